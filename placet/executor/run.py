"""Running an accepted proposal: claim, bind, run each op, journal each result, finish.

`execute` is the executor's one entry point; the order of its steps is the safety
argument (docs/design.md sections 4 and 9):
1. **Claim** (approved -> executing) under this process's lease, after reading the last
   attempt's journal for leftover temporary names (`placet.executor.temps`).
2. **Bind** (`placet.executor.binding`): the request still hashes as stored and as the
   approval recorded, the drive is the configured one, signed mode is satisfied, no
   write targets placet's own folders; a failure runs nothing and ends `failed`.
3. **Ops** (`placet.executor.ops`): each re-checks its evidence and acts; results are
   journaled in batches, temporary names before the first byte; a sync runs folders,
   then files on the pool (docs/decisions/0027-sync-execution.md); unticked ops touch
   nothing. A cancel stops the running transfer; a lost lease stops all writing.
4. **Finish**: succeeded only if every selected op is done or already_done."""

from __future__ import annotations

import contextlib
import errno
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from placet.config import Settings
from placet.drive import drive_for
from placet.drive.base import Drive
from placet.errors import PlacetError, StaleEvidence, WrongState
from placet.executor.batch import BatchContext, batch_units, run_upload_batch
from placet.executor.beside import Beside
from placet.executor.binding import bind, reuses_shown
from placet.executor.download import run_download
from placet.executor.folders import FOLDER_BATCH, run_mkdir_batch
from placet.executor.lease import Heartbeat
from placet.executor.ops import Plan
from placet.executor.pool import TICK, Flight, run_transfers
from placet.executor.progress import Aborted, OpOutcome, ProgressEvent
from placet.executor.steps import OpContext, failed, run_mkdir, run_upload
from placet.executor.temps import (
    Temp,
    cleanup_old_temps,
    journal_entry,
    journaled_temps,
    remove_temp,
    temps_detail,
)
from placet.proposals.vetting import OwnPaths
from placet.schema import Op
from placet.store import LeaseHolder, OpResultRecord, ProposalRecord, Store
from placet.store.lifecycle import APPROVED, SUCCESS_OUTCOMES
from placet.sync.baseline import BaselineRecorder

log = logging.getLogger(__name__)

ProgressCallback = Callable[[ProgressEvent], None]

_SKIPPED = {
    "code": "skipped_by_owner",
    "message": "the owner unticked this op when accepting; placet did nothing for it",
    "retryable": False,
    "details": {},
}

FLUSH_OPS = 256
"""Op results journaled in one commit at most (and baseline entries recorded with them)."""
FLUSH_SECONDS = 0.1
"""Longest an ended op waits for its journal commit while others run."""

_STEPS = {
    "mkdir": run_mkdir,
    "upload": run_upload,
    "upload_revision": run_upload,
    "download": run_download,
}


def execute(
    store: Store,
    settings: Settings,
    proposal_id: int,
    *,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    drive: Drive | None = None,
    shown: Plan | None = None,
) -> ProposalRecord:
    """Execute approved proposal `proposal_id` and return its final record.

    Args:
        store: the open store.
        settings: the owner's settings (lease, heartbeat, trash, download policy, drive).
        proposal_id: a proposal in status `approved`.
        progress: called from this thread with a `ProgressEvent` as bytes move (at most
            every 1 MiB or 100 ms per op) and once per op when its result is journaled,
            also while a sync's transfers run on worker threads.
            Exceptions it raises are logged and ignored.
        cancel: set it (from any thread) to stop: the running transfer is aborted, its
            temp removed, the proposal marked `interrupted`.
        drive: the drive to use (its spec must be the proposal's); default
            `placet.drive.drive_for(settings)`, opened and closed here.
        shown: the plan the caller read with `load_plan` to show the owner; reused when
            it was read for the approved request hash (`bind`), so a 100,000-op sync is
            not read and parsed a second time.

    Returns:
        The proposal as it ended: `succeeded`, `failed`, or `interrupted` (cancelled or
        lease lost).

    Raises:
        NotFound: no such proposal. WrongState: it is not approved (or another executor
        claimed it first). PolicyRefused ``other_host``: it was made on another host,
        which runs it (`Store.claim`); nothing was written. PolicyRefused (codes
        ``request_altered``, ``drive_changed``, ``not_approved_as_shown``,
        ``placet_own_path``) and PlacetError
        (``request_invalid``): the binding checks refused; nothing was executed and the
        proposal was ended `failed`. ConfigError: the drive could not
        be set up (also ends the proposal `failed`). StoreError: the database failed
        mid-run (the lease then lapses and recovery marks the proposal interrupted).
    """
    record = store.get(proposal_id)
    if record.status != APPROVED:
        raise WrongState(
            f"cannot execute proposal {proposal_id}: it is {record.status}, not approved; "
            "accept it first (`placet accept ID`)",
            details={"proposal_id": proposal_id, "status": record.status},
        )
    prior = store.op_results(proposal_id, having="temps") if record.attempt else []
    holder = LeaseHolder.current()
    record = store.claim(proposal_id, holder=holder)
    beat = Heartbeat(store, proposal_id, holder, settings.heartbeat_seconds).start()
    owned: Drive | None = None
    try:
        try:
            plan = bind(store, settings, record, drive, shown, beside=True)
            if drive is None:
                drive = owned = drive_for(settings)
            beside = None
            if plan.kind == "sync":  # its checks over every op go beside the transfers
                beside = Beside(store, record, drive, OwnPaths(settings, record))
        except PlacetError as e:
            store.finish(proposal_id, holder=holder, summary={"error": e.to_dict()}, expected_ops=1)
            raise
        run = _Run(store, settings, record, plan, drive, holder, beat, progress, cancel)
        run.beside = beside
        rows = beside is not None and reuses_shown(record, shown)
        return run.go(journaled_temps(prior), check_rows=rows)
    finally:
        beat.stop()
        if owned is not None:
            owned.close()


class _Run:
    """One execution attempt of one proposal (see `execute`)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        record: ProposalRecord,
        plan: Plan,
        drive: Drive,
        holder: LeaseHolder,
        beat: Heartbeat,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> None:
        self.store, self.settings, self.record, self.plan = store, settings, record, plan
        self.drive, self.holder, self.beat = drive, holder, beat
        self.pid = record.id
        self._progress = progress
        self._cancel = cancel or threading.Event()
        self.count = len(plan.ops)
        self.total = plan.bytes_total
        self.moved = 0  # bytes of ops that ended
        self.ended = 0  # ops journaled
        self.flight = Flight()  # ops running and their bytes so far
        self.max_in_flight = 0
        self._owner = threading.get_ident()  # progress is emitted on this thread only
        self._journal_lock = threading.Lock()  # one journal write at a time (all threads)
        self._halted: str | None = None
        self._shown = (-1, 0.0)  # (flight version, monotonic time) of the last tick event
        self._last_index = 0  # the op journaled last (named when none is in flight)
        self.temps: dict[int, list[Temp]] = {}  # journaled temps per running op index
        self._pending: list[tuple[Op, OpOutcome, dict[str, Any], dict[str, Any]]] = []
        self._pending_since = 0.0  # monotonic time of the oldest unjournaled result
        self._op_json: dict[int, dict[str, Any]] = {}  # ops dumped, until journaled
        self._batched: set[int] = set()  # indexes of the ops run in batches
        self.beside: Beside | None = None  # a sync's checks over every op (`beside`)
        self.leftover: dict[int, list[Temp]] = {}  # earlier attempts' temps not yet removed
        self.backups_left: list[str] = []  # earlier backups left in place for the owner
        # A sync's baseline is written with each committed batch of results
        # (docs/design.md section 7).
        self.baseline = BaselineRecorder.for_proposal(store, record, drive)

    # ---- hooks handed to the ops ----------------------------------------------------

    def _abort_reason(self) -> str | None:
        if self._halted is not None:
            return self._halted
        if self.beat.lost.is_set():
            return "lease lost"
        if self._cancel.is_set():
            return "cancelled"
        return None

    def _emit(self, event: ProgressEvent) -> None:
        if self._progress is None:
            return
        try:
            self._progress(event)
        except Exception:  # a display problem must not fail a transfer
            log.exception("the progress callback failed; ignoring it")

    def _event(self, op_index: int, result: OpResultRecord | None = None) -> ProgressEvent:
        flying, indexes = self.flight.snapshot()
        return ProgressEvent(
            indexes[0] if indexes and result is None else op_index,
            self.count,
            self.moved + flying,
            self.total,
            result,
            ops_done=self.ended,
            in_flight=indexes,
            current=self.flight.name(indexes[0]) if indexes else None,
        )

    def _on_bytes(self, op: Op, done: int, total: int) -> None:
        """A transfer's progress callback (any thread); raises `Aborted` to stop it."""
        why = self._abort_reason()
        if why is not None:
            raise Aborted(why)
        self.flight.moved(op, done)
        if threading.get_ident() == self._owner:  # else the pool's tick reports it
            self._emit(self._event(op.index))

    def _tick(self) -> None:
        """While the pool runs: one event per `TICK` when something moved."""
        due = self._pending and time.monotonic() - self._pending_since >= FLUSH_SECONDS
        if due and not self._flush():
            self._halt("lease lost")
        version, last = self._shown
        now = time.monotonic()
        if self.flight.version != version and now - last >= TICK:
            self._shown = (self.flight.version, now)
            self._emit(self._event(self._last_index))

    def _dump(self, op: Op) -> dict[str, Any]:
        """The op as journaled (dumped once per op)."""
        got = self._op_json.get(op.index)
        if got is None:
            got = self._op_json[op.index] = op.model_dump(mode="json")
        return got

    def _in_progress(self, op: Op) -> dict[str, Any]:
        """The journal detail of a running op: its temps (call under the journal lock)."""
        return {
            "code": "in_progress",
            "message": "the op was running when this was recorded; if it stays, the "
            "executor stopped mid-op and the next run removes the temporary names below",
            "retryable": True,
            "details": {},
            **temps_detail(self.leftover.get(op.index, []) + self.temps[op.index]),
        }

    def _journal_temp(self, op: Op, side: str, path: str) -> None:
        """Durably record temp `path` of `op` before bytes go to it (any thread)."""
        with self._journal_lock:
            self.temps.setdefault(op.index, []).append(journal_entry(op, side, path))
            try:
                self.store.record_op_result(
                    self.pid,
                    op_index=op.index,
                    op=self._dump(op),
                    outcome="failed",
                    detail=self._in_progress(op),
                    holder=self.holder,
                )
            except WrongState as e:
                raise Aborted("lease lost") from e

    def _journal_temps(self, pairs: list[tuple[Op, str]]) -> None:
        """`_journal_temp` of remote temps of several ops, in one commit (any thread)."""
        with self._journal_lock:
            ops: dict[int, Op] = {}
            for op, path in pairs:
                self.temps.setdefault(op.index, []).append({"side": "remote", "path": path})
                ops[op.index] = op
            rows = [(i, self._dump(op), "failed", self._in_progress(op)) for i, op in ops.items()]
            try:
                self.store.record_op_results(self.pid, rows, holder=self.holder)
            except WrongState as e:
                raise Aborted("lease lost") from e

    def _ctx(self, op: Op) -> OpContext:
        return OpContext(
            drive=self.drive,
            settings=self.settings,
            root=self.plan.root,
            proposal_kind=self.plan.kind,
            progress=lambda done, total: self._on_bytes(op, done, total),
            journal_temp=lambda side, path: self._journal_temp(op, side, path),
        )

    def _attempt(self, op: Op) -> OpOutcome:
        """Run one selected op (any thread); raises `Aborted` when stopped."""
        self.flight.start(op)
        try:
            return self._run_op(self._ctx(op), op)
        finally:
            self.flight.landed(op)

    def _run_unit(self, unit: list[Op]) -> list[tuple[Op, OpOutcome]]:
        """Run one unit of the transfer pool (any thread): one op, or a batch of small
        new files of one folder (`placet.executor.batch`); raises `Aborted`."""
        if unit[0].index not in self._batched:
            return [(op, self._attempt(op)) for op in unit]
        refused = self._refused(unit)
        if refused:  # written nowhere: the others of the batch still run
            rest = [op for op in unit if op.index not in refused]
            return [*((op, refused[op.index]) for op in unit if op.index in refused),
                    *(self._run_unit(rest) if rest else [])]  # fmt: skip
        if self.beside is not None:
            for op in unit:  # each folder once
                self.beside.sweep(op)
        for op in unit:
            self.flight.start(op)
        batch = BatchContext(
            ctx=self._ctx(unit[0]),
            single=lambda op: self._run_op(self._ctx(op), op),
            ready=lambda op: self._on_bytes(op, op.size or 0, op.size or 0),
            journal_temps=self._journal_temps,
        )
        try:
            return run_upload_batch(batch, unit)
        finally:
            for op in unit:
                self.flight.landed(op)

    def _serial_unit(self, ops: list[Op], at: int) -> list[Op]:
        """The ops run together from `ops[at]`: a sync's selected folders, up to
        `FOLDER_BATCH` in a row (`placet.executor.folders`); any other op alone."""
        unit = [ops[at]]
        if self.plan.kind != "sync" or ops[at].kind != "mkdir" or ops[at].index in self.plan.skip:
            return unit
        for op in ops[at + 1 : at + FOLDER_BATCH]:
            if op.kind != "mkdir" or op.index in self.plan.skip:
                break
            unit.append(op)
        return unit

    def _run_serial(self, unit: list[Op]) -> list[tuple[Op, OpOutcome]]:
        """Run one op, or a sync's folders together (this thread); raises `Aborted`."""
        if len(unit) == 1:
            return [(unit[0], self._attempt(unit[0]))]
        refused = self._refused(unit)
        rest = [op for op in unit if op.index not in refused]
        for op in rest:
            self.flight.start(op)
        try:
            ran = run_mkdir_batch(self.drive, rest, lambda op: self._run_op(self._ctx(op), op))
        finally:
            for op in rest:
                self.flight.landed(op)
        if self.beside is not None:  # a folder made now holds no old temporary name
            self.beside.created([op.remote_path or "" for op, out in ran if out.outcome == "done"])
        return [*((op, refused[op.index]) for op in unit if op.index in refused), *ran]

    def _refused(self, unit: list[Op]) -> dict[int, OpOutcome]:
        """The ops of `unit` that write into placet's own folders, failed (any thread)."""
        out: dict[int, OpOutcome] = {}
        for op in unit:
            err = self.beside.refusal(op) if self.beside is not None else None
            if err is not None:
                out[op.index] = failed(err)
        return out

    def _halt(self, why: str) -> None:
        self._halted = why

    # ---- the run --------------------------------------------------------------------

    def go(self, earlier_temps: dict[int, list[Temp]], *, check_rows: bool) -> ProposalRecord:
        started = time.monotonic()
        removed = self._clean(earlier_temps)
        if self.beside is not None and check_rows:  # rows rewritten since shown: stop
            self.beside.check_rows(lambda e: self._halt("request_altered"))
        outcomes: Counter[str] = Counter()
        ops, pooled = self.plan.ops, []
        if self.plan.kind == "sync":  # folders (and unticked ops) first, then the pool
            pooled = [o for o in ops if o.kind != "mkdir" and o.index not in self.plan.skip]
            ops = [o for o in ops if o.kind == "mkdir" or o.index in self.plan.skip]
        at = 0
        while at < len(ops):
            why = self._abort_reason()
            if why is not None:
                return self._stop(why, [])
            unit = self._serial_unit(ops, at)
            at += len(unit)
            if unit[0].index in self.plan.skip:
                ended = [(unit[0], OpOutcome("skipped", dict(_SKIPPED)))]
            else:
                try:
                    ended = self._run_serial(unit)
                except Aborted as e:
                    return self._stop(e.why, unit)
                self.max_in_flight = max(self.max_in_flight, 1)
            for op, out in ended:
                if not self._end_op(op, out, outcomes):
                    return self._stop("lease lost", [])
        if not self._flush():
            return self._stop("lease lost", [])
        if pooled:
            with contextlib.suppress(PlacetError):
                self.drive.capabilities()  # cached before the workers share the drive
            units, self._batched = batch_units(pooled, self.drive, self.plan.skip)
            ran = run_transfers(
                units,
                self.settings.transfers,
                run_unit=self._run_unit,
                end_op=lambda op, out: self._end_op(op, out, outcomes),
                abort_reason=self._abort_reason,
                halt=self._halt,
                tick=self._tick,
            )
            self.max_in_flight = max(self.max_in_flight, ran.max_in_flight)
            if ran.stopped is not None:
                return self._stop(ran.stopped, ran.cut_short)
        if not self._flush():
            return self._stop("lease lost", [])
        if self.beside is not None:
            if self.beside.rows_checked() is not None:
                return self._stop("request_altered", [])
            removed += self.beside.removed
        if self.baseline is not None:
            self.baseline.ops_finished()
        summary: dict[str, Any] = {
            "ops": self.count,
            "outcomes": dict(outcomes),
            "bytes": self.moved,
            "seconds": round(time.monotonic() - started, 3),
        }
        if pooled:
            summary["transfers"] = {
                "limit": self.settings.transfers,
                "max_in_flight": self.max_in_flight,
            }
        if self.plan.skip:
            summary["skipped_by_owner"] = sorted(self.plan.skip)
        if removed:
            summary["temps_removed"] = removed
        if self.backups_left:
            summary["backups_left"] = self.backups_left
        self.beat.stop()  # no renewal may race the release below (a false "lost the lease")
        try:
            return self.store.finish(
                self.pid, holder=self.holder, summary=summary, expected_ops=self.count
            )
        except WrongState:
            return self._stop("lease lost", [])

    def _end_op(self, op: Op, out: OpOutcome, outcomes: Counter[str]) -> bool:
        """Queue one ended op for the journal (this thread), commit the queue when it is
        due (`FLUSH_OPS`, `FLUSH_SECONDS`); False: lease lost."""
        if self.beat.lost.is_set() or self._halted == "lease lost":
            return False
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(self._prepare(op, out))
        outcomes[out.outcome] += 1
        due = time.monotonic() - self._pending_since >= FLUSH_SECONDS
        return self._flush() if due or len(self._pending) >= FLUSH_OPS else True

    def _still_there(self, path: str) -> bool:
        """Whether drive object `path` exists (True when the drive cannot say)."""
        try:
            return self.drive.stat(path) is not None
        except PlacetError:
            return True

    def _clean(self, earlier: dict[int, list[Temp]]) -> list[str]:
        """Remove an earlier attempt's journaled temps, and old temps in target folders;
        returns the names gone. A backup left in place for the owner (`restore_backup`:
        something is under its target) goes to `backups_left` instead."""
        removed: list[str] = []
        try:
            self.drive.clear_caches()
        except PlacetError as e:
            log.warning("could not clear rclone's caches: %s", e.message)
        backups = {i for i, temps in earlier.items() if any(t["side"] == "backup" for t in temps)}
        backups -= self.plan.skip  # unticked now: its backup is not deleted (kept, listed)
        ops = {op.index: op for op in self.plan.ops if op.index in backups} if backups else {}
        for index, temps in earlier.items():
            for t in temps:
                if not remove_temp(self.drive, self.plan.root, t, ops.get(index)):
                    self.leftover.setdefault(index, []).append(t)
                elif t["side"] == "backup" and self._still_there(t["path"]):
                    self.backups_left.append(t["path"])
                else:
                    removed.append(f"{t['side']}:{t['path']}")
        if self.beside is None:  # a sync sweeps each folder beside its transfers
            folders = {
                (op.remote_path or "").rpartition("/")[0]
                for op in self.plan.ops
                if op.kind in ("upload", "upload_revision") and op.index not in self.plan.skip
            }
            removed += [f"remote:{p}" for p in cleanup_old_temps(self.drive, folders)]
        return removed

    def _run_op(self, ctx: OpContext, op: Op) -> OpOutcome:
        step = _STEPS.get(op.kind)
        if self.beside is not None:
            refused = self.beside.refusal(op)
            if refused is not None:
                return failed(refused)
            self.beside.sweep(op)
        try:
            if step is None:
                raise PlacetError(
                    f"op {op.index} has unknown kind {op.kind!r}; nothing was done",
                    code="request_invalid",
                )
            return step(ctx, op)
        except Aborted:
            raise
        except StaleEvidence as e:
            return OpOutcome.error("stale", e)
        except PlacetError as e:
            return failed(e)
        except OSError as e:
            err = PlacetError(
                f"op {op.index} failed on a local file: {e.strerror or e}; nothing was put "
                "under the target name: fix the cause and accept again",
                code="local_io_error",
                details={"errno": errno.errorcode.get(e.errno or 0, str(e.errno))},
                retryable=e.errno in (errno.ENOSPC, errno.EIO, errno.EAGAIN, errno.EINTR),
            )
            return failed(err)
        except Exception as e:  # a bug: keep going with the other ops, say what happened
            log.exception("op %s of proposal %s failed unexpectedly", op.index, self.pid)
            return failed(
                PlacetError(
                    f"op {op.index} failed unexpectedly ({type(e).__name__}: {e}); this is "
                    "a placet bug: please report it",
                    code="internal_error",
                )
            )

    def _prepare(
        self, op: Op, out: OpOutcome
    ) -> tuple[Op, OpOutcome, dict[str, Any], dict[str, Any]]:
        """(op, outcome, op as journaled, detail as journaled: with the temps to remove)."""
        detail = dict(out.detail)
        keep = list(self.leftover.get(op.index, []))
        if out.outcome not in SUCCESS_OUTCOMES:
            with self._journal_lock:
                keep += self.temps.get(op.index, [])  # the drive may not have removed them
        detail.update(temps_detail(keep))
        return op, out, self._dump(op), detail

    def _flush(self) -> bool:
        """Journal the queued results in one commit, then record their baseline and send
        their progress events (this thread); False: lease lost (nothing written)."""
        if not self._pending:
            return True
        batch, self._pending = self._pending, []
        try:
            if self.beat.lost.is_set() or self._halted == "lease lost":
                raise WrongState("lease lost")
            rows = [(op.index, op_json, out.outcome, d) for op, out, op_json, d in batch]
            with self._journal_lock:
                self.store.record_op_results(self.pid, rows, holder=self.holder)
                for op, *_ in batch:  # ended and journaled: its temps are in its result
                    self.temps.pop(op.index, None)
        except WrongState:  # recovery took the proposal: another process may own it
            return False
        now = datetime.now(UTC)
        for op, out, op_json, detail in batch:
            self._op_json.pop(op.index, None)  # journaled for good: held no longer
            if self.baseline is not None and out.outcome != "skipped":
                self.baseline.op_ended(op, out.outcome, out.detail, remote_mtime=out.remote_mtime)
            self.flight.end(op)
            self.ended += 1
            self._last_index = op.index
            if op.kind != "mkdir" and op.index not in self.plan.skip:
                self.moved += op.size or 0
            if self._progress is not None:
                result = OpResultRecord(
                    proposal_id=self.pid, attempt=self.record.attempt, op_index=op.index,
                    op=op_json, outcome=out.outcome, detail=detail, recorded_at=now,
                )  # fmt: skip
                self._emit(self._event(op.index, result))
        if self.baseline is not None:
            self.baseline.flush()
        return True

    def _stop(self, why: str, cut_short: list[Op]) -> ProposalRecord:
        """End early: cancelled (journal the ops cut short, mark interrupted), the stored
        rows altered (journal them, end failed with the reason) or lease lost (write
        nothing more: another process may own the proposal now)."""
        log.warning("stopping execution of proposal %s: %s", self.pid, why)
        altered = self.beside.altered if self.beside is not None else None
        if why == "request_altered" and altered is not None:
            for op in sorted(cut_short, key=lambda o: o.index):
                self._pending.append(self._prepare(op, failed(altered)))
            if not self._flush():
                return self.store.get(self.pid)
            self.beat.stop()
            summary = {"error": altered.to_dict(), "ops": self.count, "bytes": self.moved}
            with contextlib.suppress(WrongState):
                return self.store.finish(
                    self.pid, holder=self.holder, summary=summary, expected_ops=self.count
                )
        if why == "cancelled":
            try:
                for op in sorted(cut_short, key=lambda o: o.index):
                    err = PlacetError(
                        f"the owner stopped the execution during op {op.index}; nothing was "
                        "put under its target name: accept the proposal again to finish",
                        code="cancelled",
                        retryable=True,
                    )
                    self._pending.append(self._prepare(op, failed(err)))
                if not self._flush():
                    return self.store.get(self.pid)  # lease lost: write nothing more
                self.store.mark_interrupted(self.pid, actor="executor", why="cancelled")
            except WrongState:
                pass  # the owner's UI marked it interrupted first
        return self.store.get(self.pid)
