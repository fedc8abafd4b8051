"""The owner's standing rules, asked about every proposal this server stores.

The propose tools and `propose_sync` store the proposal first, then hand it to
`placet.rules.deciding.apply_rules` (the rules file as it is now, this server's roots for
its safety check), which approves through the decision core
(`placet.decisions.standing.approve_by_rule`). A proposal a rule approves is answered
approved, with the rule's id; one the rules leave to the owner is answered as always,
with the rules' note when they have one. No tool reads or writes the rules themselves.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

import anyio

from placet.config import Settings
from placet.decisions.standing import approve_by_rule
from placet.executor import load_plan
from placet.rules.approving import RuleApproval
from placet.rules.deciding import RuleOutcome, apply_rules
from placet.schema import Op
from placet.server.state import ServerState
from placet.store import ProposalRecord, Store

__all__ = ["judged_by_rules"]


async def judged_by_rules(state: ServerState, record: ProposalRecord) -> RuleOutcome:
    """`apply_rules` on `record` (its ops as the executor would run them), in a worker
    thread."""
    roots = tuple(r.path for r in state.roots)
    ops_of = partial(_ops, state.store, record)
    approve = partial(_approve, state.store, state.settings)
    return await anyio.to_thread.run_sync(
        partial(
            apply_rules, state.store, state.settings, record,
            ops_of=ops_of, roots=roots, approve=approve,
        )
    )  # fmt: skip


def _approve(
    store: Store, settings: Settings, record: ProposalRecord, approval: RuleApproval, now: datetime
) -> ProposalRecord:
    return approve_by_rule(store, settings, record, approval, now=now)


def _ops(store: Store, record: ProposalRecord) -> list[Op]:
    return load_plan(store, record).ops
