"""A standing rule's approval as the rules decide it, and as the owner reads it.

`RuleApproval` is what the rules hand the decision core when one of them allows a
proposal (`placet.decisions.standing.approve_by_rule` makes the approval): which rule,
from which rules file (its SHA-256 and path) and, in signed mode, the owner's signature
of that file. The approval's actor is ``rule:<id>`` (`placet.store.lifecycle.rule_actor`),
which the queue, the history, `placet show` and the web page say as "approved by rule
<id>" (`rule_note`, `decider`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placet.store import ProposalRecord
from placet.store import lifecycle as lc

__all__ = ["RuleApproval", "decider", "rule_note"]


@dataclass(frozen=True)
class RuleApproval:
    """Which rule approves, from which rules file (its SHA-256 and path)."""

    rule_id: str
    rules_sha256: str
    rules_path: str
    rules_signature: dict[str, Any] | None = None
    """Signed mode: the owner's passkey assertion over the rules file's hash."""


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
