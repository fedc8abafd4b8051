"""Accepting several proposals on the queue page with one passkey assertion.

The page posts the proposals the owner selected, each with the request hash it showed;
every refusal is given before the passkey is asked (`placet.decisions.check`), then the
challenge binds the list of (id, request hash, selected ops, host, drive) in the order
shown and a nonce (`placet.store.signatures.set_challenge`), kept once. The answer is
checked again before the assertion is verified, and `placet.decisions.accept` approves
all of them or none, each approval event keeping the assertion and the set it signed,
so `placet audit --verify` re-verifies it for each proposal. A set is two proposals or
more (one is accepted on its own page, with its ops to untick).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.requests import Request

from placet import decisions
from placet.config import Settings
from placet.decisions import Proof, Shown
from placet.errors import PlacetError, PolicyRefused, UsageError, one_or_set
from placet.store import Store
from placet.store.passkeys import PasskeyRecord, token_hash
from placet.web.ceremonies import Ceremonies
from placet.web.runs import Runs

__all__ = ["MAX_SET", "SetDecisions", "web_proof"]

MAX_SET = 100
"""Most proposals one assertion accepts (a queue page lists 50)."""


def web_proof(request: Request, key: PasskeyRecord, kept: dict[str, Any], nonce: object) -> Proof:
    """The proof of an approval made on the page: the verified assertion as the audit
    keeps it (`Ceremonies.verify_assertion`) with its nonce, the passkey and the client."""
    return Proof.web(
        {**kept, "nonce": nonce},
        passkey_id=key.id,
        passkey_name=key.name,
        client=request.client.host if request.client else None,
        user_agent=request.headers.get("user-agent", ""),
    )


def _proposals(body: dict[str, Any]) -> list[tuple[int, str]]:
    """The body's ``proposals`` as (id, request hash shown) pairs.

    Raises:
        UsageError (``invalid_argument``): not a list of 2 to `MAX_SET` such objects.
    """
    items = body.get("proposals")
    ok = isinstance(items, list) and 2 <= len(items) <= MAX_SET
    pairs: list[tuple[int, str]] = []
    for item in items if ok and isinstance(items, list) else []:
        pid = item.get("proposal_id") if isinstance(item, dict) else None
        shown = item.get("request_hash") if isinstance(item, dict) else None
        if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(shown, str):
            ok = False
            break
        pairs.append((pid, shown[:128]))
    if not ok:
        raise UsageError(
            f"an accept of several proposals names 2 to {MAX_SET} of them, each as "
            '{"proposal_id": N, "request_hash": "..."}; accept one alone on its own page',
            code="invalid_argument",
        )
    return pairs


@dataclass
class SetDecisions:
    """The two steps of a set's accept, for the page's session `token`."""

    store: Store
    settings: Settings
    ceremonies: Ceremonies
    runs: Runs
    clock: Callable[[], datetime]

    def _checked(self, shown: list[Shown]) -> None:
        """Every refusal of the set, before the passkey is asked or its answer verified:
        the proposal's own for one, `SetRefused` listing each for several."""
        refused: list[tuple[int, PlacetError]] = []
        for s in shown:
            try:
                decisions.check(self.store, self.settings, s, now=self.clock(), signed=True)
            except PlacetError as e:
                refused.append((s.proposal_id, e))
        if refused:
            raise one_or_set("accept", len(shown), refused)

    def options(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """The assertion options for the selected proposals as shown (every one is pending
        with the request hash the page showed), binding them in that order."""
        shown = []
        refused: list[tuple[int, PlacetError]] = []
        pairs = _proposals(body)
        for pid, request_hash in pairs:
            try:
                record = self.store.get(pid)
            except PlacetError as e:
                refused.append((pid, e))
                continue
            shown.append(
                Shown(pid, request_hash, host_id=record.host_id, drive_spec=record.drive_spec)
            )
        if refused:
            raise one_or_set("accept", len(pairs), refused)
        self._checked(shown)
        entries = decisions.set_entries(shown)
        return self.ceremonies.accept_set_options(token_hash(token), entries)

    def accept(self, request: Request, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """Verify the assertion answering a set's challenge and accept exactly that set."""
        issued = self.ceremonies.challenges.take(body.get("nonce"), "accept-set")
        if issued.session != token_hash(token) or len(issued.entries) < 2:
            raise PolicyRefused(
                "refusing to accept these proposals: the passkey answer was made for "
                "another request; nothing was approved",
                code="challenge_invalid",
            )
        shown = [
            Shown(
                int(e["proposal_id"]),
                str(e["request_hash"]),
                skip_ops=frozenset(e["skip_ops"]),
                host_id=e["host_id"],
                drive_spec=str(e["drive_spec"]),
            )
            for e in issued.entries
        ]
        self._checked(shown)  # before the assertion is verified (its sign count is spent)
        ids = ", ".join(str(s.proposal_id) for s in shown)
        key, kept = self.ceremonies.verify_assertion(
            issued, body.get("credential"), f"refusing to accept proposals {ids}"
        )
        proof = web_proof(request, key, kept, body["nonce"])
        accepted = decisions.accept(self.store, self.settings, shown, proof, now=self.clock())
        for a in accepted:
            if a.runs_here:
                self.runs.start(a)  # else its own host's placet runs it
        return {
            "ok": True,
            "accepted": [{"proposal_id": a.proposal_id, "waiting": a.waiting} for a in accepted],
        }
