"""The rules page of `placet web`: the owner reads the rules file and signs it.

`placet rules sign` sends the owner here. The page shows the rules file exactly as
`placet serve` reads it (its path, state, SHA-256 and every line, inert and escaped) and
whether that exact file carries a valid signature. Signing asks the passkey for an
assertion over `rules_challenge` of the SHA-256 shown (`placet.store.signatures`); the
answer is taken only if the file still hashes to it, verified like an accept's
(`Ceremonies.verify_assertion`: user verified, pinned, sign count grown), and kept with
the bytes it vouches for (`placet.rules.signing.record_signature`). An edit after the
page was shown is refused (`not_approved_as_shown`): sign what you read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from placet.config import Settings, approvals_mode
from placet.errors import PolicyRefused
from placet.rules.ledger import RuleLedger
from placet.rules.loading import RulesState, load_rules
from placet.rules.signing import record_signature, signature_for, signed_rules
from placet.store import Store
from placet.store.signatures import rules_challenge
from placet.web.challenges import Issued
from placet.web.html import Html, attr, join, page, said, text

__all__ = ["RulesSigning", "rules_page"]


def rules_page(state: RulesState, signed: str, mode: str) -> Html:
    """The page for the rules file `state`: `signed` says whether its bytes carry a
    valid signature, `mode` the approval mode in force."""
    head = f"<h1>Standing rules</h1><p>{text(state.line())}</p>"
    if not state.usable or state.data is None or state.sha256 is None:
        return page("Rules", head + '<p class="refusal">Nothing to sign: no rule applies.</p>')
    lines = state.data.decode("utf-8").splitlines()
    body = (
        head + f'<dl class="facts"><dt>sha256</dt><dd><code id="rules-sha256">'
        f"{attr(state.sha256)}</code></dd>"
        f'<dt>signature</dt><dd id="rules-signed">{said(signed)}</dd>'
        f"<dt>approvals</dt><dd>{text(mode)}"
        + ("" if mode == "signed" else " (a signature matters only in signed mode)")
        + "</dd></dl>"
        + f'<pre id="rules-text">{join(text(line) + chr(10) for line in lines)}</pre>'
        + f'<p><button id="sign-rules" data-hash="{attr(state.sha256)}">Sign these rules '
        "with your passkey</button></p>"
        '<p id="status" role="status"></p>'
    )
    return page("Rules", body)


class RulesSigning:
    """The rules page's reads and its signing ceremony, over one store."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], datetime]):
        self.store = store
        self.settings = settings
        self.clock = clock

    def state(self) -> RulesState:
        """The rules file as `placet serve` reads it (this process's environment; the
        roots the recent proposals used)."""
        roots = [Path(p) for p in RuleLedger(self.store).recent_roots()]
        return load_rules(self.settings, roots=roots, env=os.environ)

    def page(self) -> Html:
        state = self.state()
        mode = approvals_mode(self.settings)
        signed = ""
        if state.usable and state.sha256 is not None:
            kept = signed_rules(self.store, state.sha256)
            assertion, why = signature_for(self.store, self.settings, state)
            signed = (
                f"signed by passkey {kept.passkey_id} at {kept.signed_at:%Y-%m-%d %H:%M}Z"
                if assertion is not None and kept is not None
                else why
            )
        return rules_page(state, signed, mode)

    def _current(self, shown: object) -> RulesState:
        state = self.state()
        if not state.usable or state.sha256 is None:
            raise PolicyRefused(f"refusing to sign the rules: {state.line()}", code="rules_refused")
        if shown != state.sha256:
            raise PolicyRefused(
                "refusing to sign the rules: the file changed after it was shown (sha256 "
                f"now {state.sha256[:16]}…); read it again and sign what you read",
                code="not_approved_as_shown",
                details={"shown": shown, "now": state.sha256},
            )
        return state

    def issue(
        self, session: str, body: dict[str, Any], expiry: datetime
    ) -> Callable[[str], Issued]:
        """The maker of the challenge for signing the rules the page showed
        (`body["rules_sha256"]`, which must still be the file's)."""
        shown = self._current(body.get("rules_sha256")).sha256
        assert shown is not None

        def make(nonce: str) -> Issued:
            challenge = rules_challenge(rules_sha256=shown, nonce=nonce)
            return Issued("rules", challenge, expiry, session, None, shown)

        return make

    def keep(self, issued: Issued, assertion: dict[str, Any], passkey_id: int) -> str:
        """Keep a verified signature answering `issued`, if the file still hashes to
        the SHA-256 it signed; returns that SHA-256."""
        state = self._current(issued.request_hash)
        assert state.data is not None
        return record_signature(self.store, state.data, assertion, passkey_id, self.clock())
