"""The one call through which a standing rule approves a proposal.

A rule approval is the owner's decision made in advance, so it goes the way every
approval goes: a compare-and-set to `approved` bound to the request hash placet judged,
with its audit event. The event says how it was made: ``via: "rule"``, the rule's id,
and the SHA-256 and path of the rules file it came from (`RuleApproval.detail`), and its
actor is ``rule:<id>`` (`placet.store.lifecycle.rule_actor`), which the queue, the
history and the web page show as "approved by rule <id>".

`approve_by_rule` is the adapter to the decision core: the only place that knows how an
approval is made, so the rules never repeat its checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from placet.store import ProposalRecord, Store
from placet.store import lifecycle as lc

__all__ = ["RuleApproval", "approve_by_rule", "decider", "rule_note"]


@dataclass(frozen=True)
class RuleApproval:
    """Which rule approves, from which rules file (its SHA-256 and path)."""

    rule_id: str
    rules_sha256: str
    rules_path: str
    rules_signature: dict[str, Any] | None = None
    """Signed mode: the owner's passkey assertion over the rules file's hash."""

    def detail(self) -> dict[str, Any]:
        """The approval's audit detail."""
        rule: dict[str, Any] = {
            "id": self.rule_id,
            "rules_sha256": self.rules_sha256,
            "rules_path": self.rules_path,
        }
        if self.rules_signature is not None:
            rule["signature"] = self.rules_signature
        return {"via": "rule", "rule": rule}


def approve_by_rule(
    store: Store, record: ProposalRecord, approval: RuleApproval, *, now: datetime | None = None
) -> ProposalRecord:
    """Approve pending `record` for `approval`'s rule, bound to the request hash the
    rule judged (a proposal changed since is refused, `not_approved_as_shown`).

    Raises the refusals of an approval: NotFound, Expired, WrongState, PolicyRefused.
    """
    return store.accept(
        record.id,
        actor=lc.rule_actor(approval.rule_id),
        now=now,
        detail={**approval.detail(), "request_hash": record.request_hash},
    )


def rule_note(record: ProposalRecord) -> str | None:
    """``approved by rule <id>`` for a proposal a standing rule approved (its
    `resolved_by`), else None: what the queue, history, `placet show` and the web page
    say of it (the id is the owner's, from the rules file; shown inert all the same)."""
    rule = lc.rule_of(record.resolved_by)
    return None if rule is None else f"approved by rule {rule}"


def decider(actor: str | None) -> str:
    """Who decided, for a column of decisions: ``rule <id>`` for a standing rule, else
    the actor as stored (``owner``, ``sweeper``...), ``-`` for none."""
    rule = lc.rule_of(actor)
    return f"rule {rule}" if rule is not None else (actor or "-")
