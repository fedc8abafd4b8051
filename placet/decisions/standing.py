"""A standing rule's approval, made through the decision core like every other.

`placet.rules.deciding.apply_rules` judges a proposal by the owner's rules; when one
allows it, `approve_by_rule` is the call that approves it: `accept` of the proposal as
the rule judged it (its request hash), with `Proof.rule` (the rule's id, the rules
file's SHA-256 and path, in signed mode the owner's signature of the rules), actor
``rule:<id>``, and `run_here=False`: this host's executor loops run it, the loop of the
process that approved it included (docs/decisions/0038-standing-rules.md).
"""

from __future__ import annotations

from datetime import datetime

from placet.config import Settings
from placet.decisions.deciding import accept
from placet.decisions.model import Proof, Shown
from placet.rules.approving import RuleApproval
from placet.store import ProposalRecord, Store

__all__ = ["approve_by_rule"]


def approve_by_rule(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    approval: RuleApproval,
    *,
    now: datetime,
) -> ProposalRecord:
    """Approve pending `record` for `approval`'s rule, exactly as the rule judged it.

    Raises the refusals of an accept (`placet.decisions.checks`): ``wrong_state``,
    ``expired``, ``not_approved_as_shown``, ``signature_required``, ``placet_own_path``...
    """
    proof = Proof.rule(
        approval.rule_id,
        approval.rules_sha256,
        rules_path=approval.rules_path,
        signature=approval.rules_signature,
    )
    (accepted,) = accept(store, settings, [Shown.of(record)], proof, now=now, run_here=False)
    return accepted.record
