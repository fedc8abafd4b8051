"""The executor: turns an accepted proposal into drive and local-file operations.

`execute(store, settings, proposal_id, *, progress=None, cancel=None, drive=None)` claims
an approved proposal, checks it is bound to what the owner approved, runs its ops with
their evidence re-checked, journals each result and finishes it (see
`placet.executor.run`). The review UI and `placet accept` call it; nothing else mutates
the drive. Core module: never imports `mcp` or `textual`.
"""

from __future__ import annotations

from placet.executor.binding import (
    bind,
    check_before_accept,
    check_binding,
    refusal_before_accept,
)
from placet.executor.ops import Plan, load_plan, op_at, plan_for, stored_ops
from placet.executor.progress import OpOutcome, ProgressEvent
from placet.executor.run import ProgressCallback, execute

__all__ = [
    "OpOutcome",
    "Plan",
    "ProgressCallback",
    "ProgressEvent",
    "bind",
    "check_before_accept",
    "check_binding",
    "execute",
    "load_plan",
    "op_at",
    "plan_for",
    "refusal_before_accept",
    "stored_ops",
]
