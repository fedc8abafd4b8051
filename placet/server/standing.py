"""The owner's standing rules, asked about every proposal this server stores.

The propose tools and `propose_sync` store the proposal first, then hand it to
`placet.rules.deciding.apply_rules` (the rules file as it is now, this server's roots for
its safety check). A proposal a rule approves is answered approved, with the rule's id;
one the rules leave to the owner is answered as always, with the rules' note when they
have one. No tool reads or writes the rules themselves.
"""

from __future__ import annotations

from functools import partial

import anyio

from placet.rules.deciding import RuleOutcome, apply_rules
from placet.server.state import ServerState
from placet.store import ProposalRecord

__all__ = ["judged_by_rules"]


async def judged_by_rules(state: ServerState, record: ProposalRecord) -> RuleOutcome:
    """`apply_rules` on `record`, in a worker thread."""
    roots = tuple(r.path for r in state.roots)
    return await anyio.to_thread.run_sync(
        partial(apply_rules, state.store, state.settings, record, roots=roots)
    )
