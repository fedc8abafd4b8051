"""`proposal_ops`: a proposal's ops and their per-op results, page by page.

A sync proposal can hold 100,000 ops, so `proposal_get` and the others answer it in brief
(`placet.server.sync_proposals`) and this tool lists the ops: by index (the key of each
op's result), each with the risk flag codes placet shows the owner for it and its result
in the latest attempt (null until it ran). Pages are filled up to the reply budget
(`placet.server.budget`), at most `OPS_PAGE` ops. The cursor is signed and names the
proposal and its request hash, so a cursor of another proposal, an altered one or one of
another server process is refused (`invalid_cursor`); the ops of a proposal never change,
so every op is listed exactly once across the pages. Other kinds hold one op.

The proposal is read again for a page only when something was committed since the last
read (`_visible`), so the pages of a large proposal cost their ops, not the whole row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from placet.errors import UsageError
from placet.proposals.vetting import op_flags, root_path_of
from placet.server.budget import fitting, room_for
from placet.server.framework import READ_LOCAL, ToolOutput, define_tool
from placet.server.state import Caller, caller
from placet.server.sync_proposals import op_count, ops_page
from placet.server.tools.params import Cursor, NextCursor
from placet.server.tools.proposals import ProposalId, get_visible
from placet.server.tools.sync_pages import decode_cursor, encode_cursor
from placet.store import ProposalRecord

OPS_PAGE = 500
READ_CHUNK = 64
"""Ops read from the store at a time while a page is filled (a page of long paths holds
about 60 ops, so reading `OPS_PAGE` for each page read and decoded eight times too many)."""
_TAG = "o1"


class OpOutcome(BaseModel):
    outcome: str = Field(description="done | already_done | stale | failed | skipped")
    detail: dict[str, Any]
    recorded_at: datetime


class ProposalOpView(BaseModel):
    op: dict[str, Any] = Field(
        description="The op as stored: index, kind, local_path, remote_path, size, the "
        "evidence it re-checks when it runs (expected_local, expected_remote), replace, reason."
    )
    risk_flags: list[str] = Field(description="Codes of the risk flags the owner sees for it.")
    result: OpOutcome | None = Field(description="Its result in the latest attempt; null: none.")


class ProposalOpsOut(ToolOutput):
    proposal_id: int
    kind: str
    status: str
    attempt: int = Field(description="The latest execution attempt (0: not run yet).")
    op_count: int = Field(description="Ops in the proposal, in all pages.")
    start: int = Field(description="Index of the first op on this page.")
    ops: list[ProposalOpView] = Field(
        description=f"By index; at most {OPS_PAGE}, fewer when they would not fit the reply."
    )
    next_cursor: NextCursor

    def summary(self) -> str:
        if not self.ops:
            return f"proposal {self.proposal_id}: no ops from {self.start} (of {self.op_count})"
        last = self.start + len(self.ops) - 1
        more = "; more with next_cursor" if self.next_cursor else ""
        return f"proposal {self.proposal_id}: ops {self.start}-{last} of {self.op_count}{more}"


def _start_of(cursor: str | None, rec: ProposalRecord) -> int:
    if cursor is None:
        return 0
    value = decode_cursor(_TAG, cursor, "proposal_ops", signed=True)
    ok = isinstance(value, list) and len(value) == 3 and isinstance(value[2], int)
    if not ok or value[:2] != [rec.id, rec.request_hash[:16]] or value[2] < 0:
        raise UsageError(
            f"the cursor belongs to another proposal than {rec.id}; call proposal_ops again "
            "with the id it came with, or without a cursor to restart paging",
            code="invalid_cursor",
            details={"proposal_id": rec.id},
        )
    return int(value[2])


def _views(who: Caller, rec: ProposalRecord, start: int, total: int) -> Iterator[ProposalOpView]:
    """The views of `rec`'s ops from `start` to `total`, with their latest results: read
    from the store `READ_CHUNK` ops at a time, as the page takes them."""
    store = who.state.store
    root_path = root_path_of(rec)
    pos = start
    while pos < total and (ops := ops_page(store, rec, pos, READ_CHUNK)):
        results = (
            {r.op_index: r for r in store.op_results(rec.id, start=pos, stop=pos + READ_CHUNK)}
            if rec.attempt > 0
            else {}
        )
        for op in ops:
            r = results.get(op.index)
            yield ProposalOpView(
                op=op.model_dump(mode="json"),
                risk_flags=[f.code for f in op_flags(rec, op, root_path)],
                result=OpOutcome(outcome=r.outcome, detail=r.detail, recorded_at=r.recorded_at)
                if r
                else None,
            )
        pos += READ_CHUNK


def _page(who: Caller, rec: ProposalRecord, cursor: str | None) -> ProposalOpsOut:
    """One page from the cursor's op on: the op views that fit the reply budget
    (`placet.server.budget.fitting`), at most `OPS_PAGE`."""
    start = _start_of(cursor, rec)
    total = op_count(who.state.store, rec)
    out = ProposalOpsOut(
        proposal_id=rec.id, kind=rec.kind, status=rec.status, attempt=rec.attempt,
        op_count=total, start=start, ops=[],
        next_cursor=encode_cursor(_TAG, [rec.id, rec.request_hash[:16], total], signed=True),
    )  # fmt: skip
    room = room_for(who.state.settings.reply_budget_bytes, out)
    out.ops = fitting(_views(who, rec, start, total), room, OPS_PAGE)
    nxt = start + len(out.ops)
    out.next_cursor = (
        encode_cursor(_TAG, [rec.id, rec.request_hash[:16], nxt], signed=True)
        if out.ops and nxt < total
        else None
    )
    return out


@define_tool(title="List a proposal's ops and their results", annotations=READ_LOCAL)
async def proposal_ops(
    ctx: Context[Any, Any], id: ProposalId, cursor: Cursor = None
) -> ProposalOpsOut:
    """Every op of a proposal, by index, with its risk flags and its result in the latest
    attempt: a sync proposal's full op list, which proposal_get only summarises.

    Pages fit one reply: call with the id, then again with the same id and the
    next_cursor of the previous page until next_cursor is null.
    """
    who = await caller(ctx)
    rec = await _visible(who, id)
    return await anyio.to_thread.run_sync(_page, who, rec, cursor)


_RECENT: OrderedDict[int, tuple[int, ProposalRecord]] = OrderedDict()
_RECENT_SIZE = 8


async def _visible(who: Caller, pid: int) -> ProposalRecord:
    """`get_visible(who, pid)`, without reading the row again while no process committed
    anything since the last read (SQLite's `data_version` unchanged): paging through
    100,000 ops reads the proposal once, not once a page."""
    version = who.state.store.data_version()
    hit = _RECENT.get(pid)
    if hit is not None and hit[0] == version and who.can_see(hit[1]):
        rec = hit[1]
        if not (rec.status == "pending" and rec.is_expired(datetime.now(UTC))):
            return rec
    rec = await get_visible(who, pid)
    _RECENT[pid] = (version, rec)
    _RECENT.move_to_end(pid)
    while len(_RECENT) > _RECENT_SIZE:
        _RECENT.popitem(last=False)
    return rec


TOOLS = (proposal_ops,)
