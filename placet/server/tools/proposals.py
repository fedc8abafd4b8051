"""`proposal_get`, `proposal_list`, `proposal_wait`, `proposal_withdraw`: the queue, as the
caller may see it.

A caller sees a proposal in its scope (`Caller.can_see`); anything else answers
`not_found`, like a missing id (docs/decisions/0013-scope-and-roots.md). Short reads run
on the event loop (a WAL read never waits for a writer, and a thread hop costs more than
the read); writes and the `proposal_list` scan run in a worker thread. `proposal_wait`
polls `data_version` every 0.2 s, reads the proposal when it moved (or every 2 s), expires
an overdue pending proposal on the spot, and returns at a final status or after
`timeout_s` (at most 50). Its progress uses one strictly increasing scale for waiting and
executing (`_Progress`; docs/decisions/0014-wait-progress.md)."""

from __future__ import annotations

import base64
import binascii
import json
import time
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import Field

from placet.display import duration
from placet.errors import NotFound, UsageError
from placet.server.budget import json_bytes, room_for
from placet.server.framework import MAX_ID, READ_LOCAL, WITHDRAW, ToolOutput, define_tool
from placet.server.models import TERMINAL, OpResultView, ProposalOut, ProposalView
from placet.server.state import Caller, caller
from placet.server.sync_proposals import op_count, proposal_view
from placet.server.tools.params import NextCursor
from placet.server.wait_status import poll_after, status_line
from placet.store import ProposalRecord, Store
from placet.store.outbox import Outbox

PAGE = 50
SCAN_LIMIT = 1000  # rows read per proposal_list call at most, however many are hidden
POLL_S = 0.2
REREAD_S = 2.0
PROGRESS_S = 1.0
WAIT_MAX_S = 50

Status = Literal[
    "pending",
    "approved",
    "executing",
    "succeeded",
    "failed",
    "discarded",
    "expired",
    "withdrawn",
    "interrupted",
]
ProposalId = Annotated[
    int,
    Field(ge=1, le=MAX_ID, description="The proposal id a propose_* tool returned (1 to 2^63-1)."),
]


def _not_found(pid: int) -> NotFound:
    return NotFound(
        f"no proposal {pid} is visible to this session (it does not exist, or it concerns "
        "folders outside your roots); see proposal_list",
        details={"proposal_id": pid},
    )


async def get_visible(who: Caller, pid: int) -> ProposalRecord:
    """The proposal, expired first if its TTL passed while pending. Raises NotFound."""
    store: Store = who.state.store
    try:
        rec = store.get(pid)  # a short read: on the loop (module docstring)
    except NotFound as e:
        raise _not_found(pid) from e
    if not who.can_see(rec):
        raise _not_found(pid)
    if rec.status == "pending" and rec.is_expired(datetime.now(UTC)):
        await anyio.to_thread.run_sync(store.expire_due)  # a write: may wait for the lock
        rec = store.get(pid)
    return rec


def resolution_reason(store: Store, rec: ProposalRecord) -> str | None:
    """The owner's discard reason: the `reason` of the proposal's discard audit event's
    detail (`Store.discard`), or None (not discarded, or no reason given)."""
    if rec.status != "discarded":
        return None
    for e in reversed(store.audit_events(proposal_id=rec.id)):
        if e.to_status == "discarded":
            reason = e.detail.get("reason")
            return reason if isinstance(reason, str) and reason else None
    return None


def _view(who: Caller, rec: ProposalRecord) -> ProposalView:
    store = who.state.store
    return proposal_view(
        store, rec, who.state.run_id, resolution_reason=resolution_reason(store, rec)
    )


def _full_sync(who: Caller, rec: ProposalRecord) -> ProposalOut:
    # A sync's op results are counted in its summary and listed by proposal_ops only.
    ops = who.state.store.op_results(rec.id) if rec.attempt > 0 and rec.kind != "sync" else []
    return ProposalOut(proposal=_view(who, rec), op_results=[OpResultView.of(o) for o in ops])


async def _full(who: Caller, pid: int) -> ProposalOut:
    rec = await get_visible(who, pid)
    if rec.kind == "sync":  # a first summary flags every op: off the loop
        return await anyio.to_thread.run_sync(_full_sync, who, rec)
    return _full_sync(who, rec)


@define_tool(title="Get a proposal", annotations=READ_LOCAL)
async def proposal_get(ctx: Context[Any, Any], id: ProposalId) -> ProposalOut:
    """One proposal: its status, the request and evidence as stored, and per-op results.

    A sync proposal is answered in brief (`proposal.sync`: ops and bytes by kind, risk
    flags and decisions counted, the first ops, outcomes counted); page through every op
    and its result with proposal_ops(id).
    """
    who = await caller(ctx)
    return await _full(who, id)


class ProposalListOut(ToolOutput):
    proposals: list[ProposalView] = Field(
        description=f"Newest first; at most {PAGE}, fewer when they would not fit the reply."
    )
    next_cursor: NextCursor

    def summary(self) -> str:
        more = "; more with next_cursor" if self.next_cursor else ""
        return f"{len(self.proposals)} proposal(s){more}"


def _encode_cursor(after: int, status: str | None) -> str:
    raw = json.dumps({"v": 1, "after": after, "status": status}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, status: str | None) -> int:
    bad = UsageError(
        "the cursor is not one proposal_list returned for this status filter; call "
        "proposal_list again without a cursor to restart paging",
        code="invalid_cursor",
        details={"field": "cursor"},
    )
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError) as e:
        raise bad from e
    if (
        not isinstance(data, dict)
        or data.get("v") != 1
        or data.get("status") != status
        or not isinstance(data.get("after"), int)
        or isinstance(data.get("after"), bool)
    ):
        raise bad
    return int(data["after"])


def _list(who: Caller, status: str | None, cursor: str | None) -> ProposalListOut:
    after = _decode_cursor(cursor, status) if cursor else None
    store = who.state.store
    shown: list[ProposalView] = []
    room = room_for(who.state.settings.reply_budget_bytes, ProposalListOut(
        proposals=[], next_cursor=_encode_cursor(MAX_ID, status)))  # fmt: skip
    scanned = 0
    exhausted = full = False
    while not full and scanned < SCAN_LIMIT:
        rows = store.list(
            [status] if status else None, limit=PAGE, after_id=after, newest_first=True
        )
        if not rows:
            exhausted = True
            break
        for rec in rows:
            scanned += 1
            if who.can_see(rec):
                view = _view(who, rec)
                size = json_bytes(view) + 2
                if shown and size > room:  # the next page starts with it
                    full = True
                    break
                room -= size
                shown.append(view)
            after = rec.id
            if len(shown) == PAGE:
                full = True
                break
        if len(rows) < PAGE and not full:
            exhausted = True
            break
    more = not exhausted and after is not None
    return ProposalListOut(
        proposals=shown, next_cursor=_encode_cursor(after, status) if more and after else None
    )


@define_tool(title="List proposals", annotations=READ_LOCAL)
async def proposal_list(
    ctx: Context[Any, Any],
    status: Annotated[Status | None, Field(description="Only proposals in this status.")] = None,
    cursor: Annotated[
        str | None, Field(description="The next_cursor of a previous call; omit to start.")
    ] = None,
) -> ProposalListOut:
    """Proposals visible to this session, newest first, up to 50 a page (fewer when they
    would not fit one reply); pass next_cursor back for the next page until it is null.
    Sync proposals are shown in brief, as in proposal_get. A propose_* call that was
    cancelled after its proposal was stored still made it: it is listed here."""
    who = await caller(ctx)
    return await anyio.to_thread.run_sync(_list, who, status, cursor)


class WaitOut(ProposalOut):
    timed_out: bool = Field(
        description="True: still undecided after timeout_s; call proposal_wait again."
    )
    waited_s: float
    poll_after_s: int | None = Field(
        description="Seconds to wait before calling proposal_wait again (0: at once, each "
        "call waits up to 50 s itself); null once the status is final."
    )
    status: str = Field(
        description="One line to relay to the user, e.g. 'waiting for the owner; notified "
        "by ntfy at 12:01:03Z; expires in 24 min', or the owner's discard reason."
    )

    def summary(self) -> str:
        tail = "; call again" if self.timed_out else ""
        return f"{self.proposal.line()}: {self.status}{tail}"


def _ops_done(store: Store, rec: ProposalRecord) -> int | None:
    """Ops of the current attempt that have ended (any outcome), once it ran; else None."""
    if rec.attempt == 0 or rec.status not in ("executing", *TERMINAL):
        return None
    return len(store.op_results(rec.id))  # a short read by index: on the loop


def _ops(done: int, n: int) -> str:
    return f"{done} of {n} op{'' if n == 1 else 's'} done"


class _Progress:
    """The progress of one `proposal_wait` call: one strictly increasing scale across
    waiting, executing and the end (module docstring), with `total` = ops + 1.

    `send` computes the value for the proposal as now read and sends it only when it is
    above the last value sent (MCP basic/utilities/progress: "The progress value MUST
    increase with each notification"); `ctx.report_progress` is a no-op when the caller
    sent no progress token.
    """

    PENDING_HALF_S = 60.0  # waited seconds at which the waiting phase reaches 0.5
    OP_HALF_S = 30.0  # seconds into the current op at which its fraction reaches 0.5

    def __init__(self, ctx: Context[Any, Any], ops: int, start: float) -> None:
        self.ctx = ctx
        self.ops = ops
        self.total = self.ops + 1
        self.start = start
        self.last: float | None = None
        self.mark: tuple[int, float] | None = None  # (ops ended, when first seen so)

    def value(self, rec: ProposalRecord, done: int | None, now: float) -> tuple[float, str] | None:
        """(progress, message) for `rec` with `done` ops ended, at monotonic time `now`;
        None while every op has ended but the status is not final yet (the total is kept
        for the final status, a moment later)."""
        head = f"proposal {rec.id} is {rec.status}"
        if rec.status in TERMINAL:
            return float(self.total), head + (f": {_ops(done, self.ops)}" if done else "")
        if rec.status == "executing" and done is not None:
            if self.mark is None or self.mark[0] != done:
                self.mark = (done, now)
            if done >= self.ops:
                return None
            s = now - self.mark[1]
            return 1 + done + s / (s + self.OP_HALF_S), f"{head}: {_ops(done, self.ops)}"
        t = now - self.start
        who = "the executor to start" if rec.status == "approved" else "the owner"
        return t / (t + self.PENDING_HALF_S), f"{head}, waiting for {who}: {duration(t)}"

    async def send(self, rec: ProposalRecord, done: int | None, now: float) -> None:
        shown = self.value(rec, done, now)
        if shown is None or (self.last is not None and shown[0] <= self.last):
            return
        p, message = shown
        self.last = p
        await self.ctx.report_progress(p, self.total, message)


@define_tool(title="Wait for the owner's decision", annotations=READ_LOCAL)
async def proposal_wait(
    ctx: Context[Any, Any],
    id: ProposalId,
    timeout_s: Annotated[
        int,
        Field(ge=0, le=WAIT_MAX_S, description="Seconds to wait at most (0-50; default 50)."),
    ] = WAIT_MAX_S,
) -> WaitOut:
    """Wait until a proposal is decided and executed (or expires), at most timeout_s seconds.

    Returns the proposal as it then is; `timed_out` means it is still pending or running:
    call again after `poll_after_s`. `status` is one line to relay to the user (who was
    notified and when, the time left, or the owner's discard reason). Progress
    notifications (total = ops to run + 1) rise steadily: below 1 while it waits for the
    owner, 1 + ops done while it executes, the total at the end.
    """
    who = await caller(ctx)
    store = who.state.store
    start = time.monotonic()
    deadline = start + timeout_s
    rec = await get_visible(who, id)
    progress = _Progress(ctx, op_count(store, rec), start)
    was_open = rec.status not in TERMINAL
    version = store.data_version()
    last_read = last_progress = time.monotonic()
    done = _ops_done(store, rec)
    while rec.status not in TERMINAL:
        now = time.monotonic()
        if now >= deadline:
            break
        if now - last_progress >= PROGRESS_S:
            last_progress = now
            await progress.send(rec, done, now)
        await anyio.sleep(min(POLL_S, deadline - now))
        current = store.data_version()
        expiring = rec.status == "pending" and rec.is_expired(datetime.now(UTC))
        if current != version or expiring or time.monotonic() - last_read >= REREAD_S:
            version = current
            last_read = time.monotonic()
            rec = await get_visible(who, id)
            before, done = done, _ops_done(store, rec)
            if done is not None and done != before and rec.status not in TERMINAL:
                last_progress = time.monotonic()
                await progress.send(rec, done, last_progress)
    if was_open and rec.status in TERMINAL:
        await progress.send(rec, done, time.monotonic())
    out = await _full(who, id)
    rec = await get_visible(who, id)
    return WaitOut(
        proposal=out.proposal,
        op_results=out.op_results,
        timed_out=out.proposal.status not in TERMINAL,
        waited_s=round(time.monotonic() - start, 3),
        poll_after_s=poll_after(rec, timeout_s),
        status=_status(who, rec),
    )


def _status(who: Caller, rec: ProposalRecord) -> str:
    """The relayable line (`placet.server.wait_status`); short reads by index, on the loop."""
    store = who.state.store
    sent = Outbox(store.engine).sent_for(rec.id) if rec.status == "pending" else []
    return status_line(
        rec,
        sent=sent,
        channels_on=bool(who.state.settings.notify.channels()),
        reason=resolution_reason(store, rec) if rec.status == "discarded" else None,
        now=datetime.now(UTC),
    )


class WithdrawOut(ProposalOut):
    already_withdrawn: bool


async def _withdraw(who: Caller, pid: int) -> WithdrawOut:
    rec = await get_visible(who, pid)
    already = rec.status == "withdrawn" and rec.run_id == who.state.run_id
    if not already:
        rec = await anyio.to_thread.run_sync(
            partial(who.state.store.withdraw, pid, run_id=who.state.run_id)
        )
    view = await anyio.to_thread.run_sync(_view, who, rec)
    return WithdrawOut(proposal=view, op_results=[], already_withdrawn=already)


@define_tool(title="Withdraw your own pending proposal", annotations=WITHDRAW)
async def proposal_withdraw(ctx: Context[Any, Any], id: ProposalId) -> WithdrawOut:
    """Take back a pending proposal this session made; withdrawing twice is harmless."""
    who = await caller(ctx)
    return await _withdraw(who, id)


TOOLS = (proposal_get, proposal_list, proposal_wait, proposal_withdraw)
