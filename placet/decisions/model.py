"""The values a decision is made of: what the owner was shown, how the approval was made
(its proof and origin) and what an accept hands on (run here, or wait for another host).

Frozen dataclasses, no I/O but `Proof.terminal`/`Proof.tui`, which read the process's
terminal and parents (`placet.proposals.approval.origin`) for the audit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from placet.executor import Plan
from placet.proposals.approval import origin
from placet.store import ProposalRecord
from placet.store import lifecycle as lc

__all__ = ["Accepted", "Proof", "Shown", "Via"]

Via = Literal["terminal", "tui", "web", "rule"]
"""How an approval was made: `placet accept` at a terminal, `placet review`, `placet
web` with a passkey, or one of the owner's standing rules."""


@dataclass(frozen=True)
class Shown:
    """One proposal as the owner saw it when deciding.

    Attributes:
        proposal_id: the proposal.
        request_hash: the request hash shown; a proposal that no longer has it is
            refused (``not_approved_as_shown``).
        status: the status shown (``pending``, or ``failed``/``interrupted`` for an
            accept again); a proposal decided since is refused (``wrong_state``).
        skip_ops: the op indexes the owner unticked (a sync only).
        plan: the ops as shown (`placet.executor.load_plan`), reused by the checks and
            the run instead of reading a big sync's ops again; ignored unless it was
            read for `request_hash`.
        host_id, drive_spec: the host that runs it and the drive it writes, as shown
            (a passkey signs them); one that moved since is refused
            (``not_approved_as_shown``). Empty: not bound.
    """

    proposal_id: int
    request_hash: str
    status: str = "pending"
    skip_ops: frozenset[int] = frozenset()
    plan: Plan | None = field(default=None, compare=False, repr=False)
    host_id: str | None = ""
    drive_spec: str = ""

    @classmethod
    def of(
        cls, record: ProposalRecord, skip_ops: Collection[int] = (), plan: Plan | None = None
    ) -> Shown:
        """`record` as it is shown now, with the ops `skip_ops` unticked."""
        return cls(
            record.id,
            record.request_hash,
            record.status,
            frozenset(skip_ops),
            plan,
            record.host_id,
            record.drive_spec,
        )

    def entry(self) -> dict[str, Any]:
        """What a decision on several proposals binds of this one (the approval event's
        ``set``, and what a passkey signs: `placet.store.signatures.set_challenge`)."""
        return {
            "proposal_id": self.proposal_id,
            "request_hash": self.request_hash,
            "skip_ops": sorted(self.skip_ops),
            "host_id": self.host_id,
            "drive_spec": self.drive_spec,
        }


@dataclass(frozen=True)
class Proof:
    """How an approval was made, recorded in its audit event: ``via`` plus `facts`
    (``detail[key]`` for each), and a passkey assertion (``detail["passkey"]``) for a
    signed approval. Build one with the constructor of its shell."""

    via: Via
    facts: Mapping[str, Any] = field(default_factory=dict)
    passkey: Mapping[str, Any] | None = None

    @classmethod
    def terminal(cls, tty: int | None, *, yes: bool) -> Proof:
        """`placet accept`: the confirmation code typed on terminal `tty` (None: there
        was none, only with ``--yes``), and the process around it."""
        return cls("terminal", {"yes": yes, "tty": tty is not None, "origin": origin(tty)})

    @classmethod
    def tui(cls, tty: int | None) -> Proof:
        """`placet review`: confirmed in the review UI on terminal `tty`."""
        return cls("tui", {"tty": True, "origin": origin(tty)})

    @classmethod
    def web(
        cls,
        passkey: Mapping[str, Any],
        *,
        passkey_id: int,
        passkey_name: str,
        client: str | None,
        user_agent: str,
    ) -> Proof:
        """`placet web`: the passkey assertion as the audit keeps it (its nonce
        included), made by passkey `passkey_id` from `client`."""
        web = {
            "passkey_id": passkey_id,
            "passkey_name": passkey_name,
            "client": client,
            "user_agent": user_agent[:200],
        }
        return cls("web", {"web": web}, passkey=dict(passkey))

    @classmethod
    def rule(
        cls,
        rule_id: str,
        rules_sha256: str,
        *,
        rules_path: str | None = None,
        signature: Mapping[str, Any] | None = None,
    ) -> Proof:
        """A standing rule of the owner's rules file: the rule's id, the SHA-256 of the
        file's bytes it was read from and the file's path; in signed mode, the owner's
        passkey signature over those bytes (`placet.rules.signing`)."""
        rule: dict[str, Any] = {"id": rule_id, "rules_sha256": rules_sha256}
        if rules_path is not None:
            rule["rules_path"] = rules_path
        if signature is not None:
            rule["signature"] = dict(signature)
        return cls("rule", {"rule": rule})

    @property
    def signed(self) -> bool:
        """The approval carries the owner's passkey: an assertion over the request, or
        (a standing rule) the signature of the rules it came from."""
        rule = self.facts.get("rule")
        return self.passkey is not None or (
            isinstance(rule, Mapping) and isinstance(rule.get("signature"), Mapping)
        )

    @property
    def actor(self) -> str:
        """Who approves, as the audit names it: ``rule:<id>`` for a standing rule
        (`placet.store.lifecycle.rule_actor`), else the owner."""
        rule = self.facts.get("rule")
        if self.via == "rule" and isinstance(rule, Mapping):
            return lc.rule_actor(str(rule.get("id")))
        return lc.OWNER

    def detail(self) -> dict[str, Any]:
        """The approval event's detail entries this proof gives."""
        out: dict[str, Any] = {"via": self.via, **self.facts}
        if self.passkey is not None:
            out["passkey"] = dict(self.passkey)
        return out


@dataclass(frozen=True)
class Accepted:
    """One proposal an accept approved, and where it runs.

    Attributes:
        record: the proposal, now ``approved``.
        waiting: ``waiting for host NAME (id)`` when it was made on another host, whose
            placet runs it (`placet.store.host`); None when it runs on this host.
        reserved: this process said it runs the proposal itself (`accept(run_here=True)`):
            this host's executor loops leave it alone until `run` or `leave` ends that.
        plan: the plan the checks read (a set of one), which `run` hands the executor.
    """

    record: ProposalRecord
    waiting: str | None
    reserved: bool
    plan: Plan | None = field(default=None, compare=False, repr=False)

    @property
    def proposal_id(self) -> int:
        return self.record.id

    @property
    def runs_here(self) -> bool:
        return self.waiting is None
