"""Standing rules at work: a proposal just made, judged by the owner's rules, and approved
when one allows it.

`apply_rules` runs after a proposal is stored (the propose tools and `propose_sync`): it
reads the rules file (`placet.rules.loading`; refused or absent: nothing happens), builds
the proposal's facts from the ops the executor would run, asks the matcher, and for an
allow records the use in the store (`placet.rules.ledger`: the hourly cap and the pause
hold across processes) and approves through `approve` (the decision core's
`placet.decisions.standing.approve_by_rule`). The proposal then runs like any other. The
agent's reply carries one line about what happened (`RuleOutcome.note`). With
``approvals = "signed"`` a rule approves only while the rules file's current bytes carry
a valid signature by a pinned passkey (`placet.rules.signing`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from placet.config import Settings, approvals_mode
from placet.errors import PlacetError
from placet.rules.approving import RuleApproval
from placet.rules.facts import facts_of
from placet.rules.ledger import RuleLedger
from placet.rules.loading import RulesState, load_rules, owner_drive
from placet.rules.matcher import Verdict, evaluate
from placet.schema import Op
from placet.store import ProposalRecord, Store
from placet.store import lifecycle as lc
from placet.store.db import utcnow
from placet.text import quote

__all__ = ["Approve", "OpsOf", "RuleOutcome", "apply_rules", "judge"]

log = logging.getLogger(__name__)

OpsOf = Callable[[], Sequence[Op]]
"""The proposal's parsed ops, as the executor runs them (`placet.executor.load_plan`),
read only when a rule is there to judge them."""

Approve = Callable[[ProposalRecord, RuleApproval, datetime], ProposalRecord]
"""How a rule approval is made, at the given time: the decision core's
`placet.decisions.standing.approve_by_rule`, its store and settings bound."""


@dataclass(frozen=True)
class RuleOutcome:
    """What the rules did with one proposal: `approved_by` (a rule id) and the record
    after the approval, or None and the record as it was; `note` says it in one line."""

    record: ProposalRecord
    approved_by: str | None = None
    note: str | None = None
    verdict: Verdict | None = None


def apply_rules(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    *,
    ops_of: OpsOf,
    roots: Sequence[Path],
    env: Mapping[str, str] | None = None,
    now: datetime | None = None,
    approve: Approve,
    state: RulesState | None = None,
) -> RuleOutcome:
    """Judge pending `record`, whose ops `ops_of()` reads, by the owner's rules and
    approve it when one allows it (module docstring). `roots`: the local roots of the
    proposing process (the rules file must lie outside each). Never raises for the
    rules' sake: a refusal or a store failure leaves the proposal pending, logged and
    said in the note."""
    if record.status != lc.PENDING:
        return RuleOutcome(record)
    state = state or load_rules(settings, roots=roots, env=env)
    if state.status == "absent":
        return RuleOutcome(record)
    if not state.usable or state.sha256 is None:
        why = state.refusal.message if state.refusal is not None else "refused"
        return RuleOutcome(record, note=f"standing rules are off ({why}): the owner decides")
    if not any(r.effect == "allow" for r in state.rules):
        return RuleOutcome(record)
    try:
        return _judged(store, settings, record, ops_of, state, env, now or utcnow(), approve)
    except PlacetError as e:
        log.warning("standing rules left proposal %s to the owner: %s", record.id, e.message)
        return RuleOutcome(record, note=f"standing rules could not judge it: {e.message}")


def _judged(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    ops_of: OpsOf,
    state: RulesState,
    env: Mapping[str, str] | None,
    when: datetime,
    approve: Approve,
) -> RuleOutcome:
    """`apply_rules` once the rules file is usable. Raises PlacetError."""
    assert state.sha256 is not None
    signature = None
    if approvals_mode(settings) == "signed":
        from placet.rules.signing import signature_for

        signature, why_unsigned = signature_for(store, settings, state)
        if signature is None:
            note = f'standing rules approve nothing (approvals = "signed"): {why_unsigned}'
            return RuleOutcome(record, note=note)
    verdict = evaluate(state.rules, facts_of(record, ops_of()), when, owner_drive(settings, env))
    if verdict.effect != "allow" or verdict.rule_id is None:
        forbidden = f"{verdict.reason}: the owner decides" if verdict.effect == "forbid" else None
        return RuleOutcome(record, note=forbidden, verdict=verdict)
    rule = next(r for r in state.rules if r.id == verdict.rule_id)
    ledger = RuleLedger(store)
    claim = ledger.claim(rule.id, record.id, state.sha256, max_per_hour=rule.max_per_hour, now=when)
    if not claim.ok:
        note = f"rule {quote(rule.id)} covers it but approves nothing now: {claim.why}"
        return RuleOutcome(record, note=f"{note}; the owner decides", verdict=verdict)
    approval = RuleApproval(rule.id, state.sha256, str(state.path), signature)
    try:
        approved = approve(record, approval, when)
    except PlacetError as e:
        ledger.release(rule.id, record.id)
        log.warning("rule %s did not approve proposal %s: %s", rule.id, record.id, e.message)
        return RuleOutcome(
            record, note=f"rule {quote(rule.id)} could not approve it: {e.message}", verdict=verdict
        )
    return RuleOutcome(
        approved, approved_by=rule.id, note=f"approved by rule {quote(rule.id)}", verdict=verdict
    )


def judge(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    ops: Sequence[Op],
    state: RulesState,
    *,
    now: datetime,
    env: Mapping[str, str] | None = None,
) -> tuple[Verdict, str | None]:
    """What the usable rules of `state` would do with `record`, whose ops are `ops`,
    at `now`, changing nothing: the verdict, and for an allow, why the store's limits
    would stop it (its pause, its hourly cap) or None. For `placet rules test`."""
    verdict = evaluate(state.rules, facts_of(record, ops), now, owner_drive(settings, env))
    if verdict.effect != "allow" or verdict.rule_id is None:
        return verdict, None
    rule = next(r for r in state.rules if r.id == verdict.rule_id)
    ledger = RuleLedger(store)
    failed = ledger.paused_by(rule.id)
    if failed is not None:
        return verdict, f"paused: the run of proposal {failed}, which it approved, failed"
    if rule.max_per_hour is not None:
        used = ledger.uses_in_hour(rule.id, now)
        if used >= rule.max_per_hour:
            return verdict, f"it approved {used} proposals in the last hour (max_per_hour)"
    return verdict, None
