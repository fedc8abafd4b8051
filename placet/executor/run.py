"""Running an accepted proposal: claim, bind, run each op, journal each result, finish.

`execute` is the executor's one entry point (the review UI and `placet accept` call it).
The order of its steps is the safety argument:

1. **Claim** (approved -> executing) under this process's lease, renewed by a heartbeat
   thread (`placet.executor.lease`). Before claiming, the previous attempt's journal is
   read for temporary names a crashed run left (`placet.executor.temps`).
2. **Bind** (DESIGN.md section 9): the stored request must still hash to the proposal's
   request hash, and to the hash the approval audit event recorded (what the owner was
   shown); the drive spec stored with the proposal must be the configured one. A
   binding failure executes nothing: the proposal ends `failed` with the reason in its
   summary, and the error is raised for the caller to show.
3. **Ops**, in order (`placet.executor.ops`): each re-checks its evidence and acts
   (`steps`, `download`), and its result is journaled (`Store.record_op_result`) as
   soon as it ends. One failing op does not stop the others; a drive that cannot be
   reached fails each op as retryable (`drive_unavailable`) and nothing is lost: the
   owner accepts the failed proposal again later. An op the owner unticked (the
   approval's `skip_ops`, bound in step 2) is journaled `skipped` and touches nothing:
   no evidence read, no temp cleanup in its folder, no baseline entry.
4. **Finish**: succeeded only if every selected op is done or already_done (the store
   checks the skipped ones against the approval event), else failed.

Cancellation (the owner quits the review UI mid-transfer) and a lost lease stop the
running transfer from inside its progress callback, so rclone is killed and its temp
object removed; a cancelled proposal is marked interrupted, and a lost lease means
another process owns the proposal now, so nothing more is written.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from placet.config import Settings
from placet.drive import configured_spec, drive_for
from placet.drive.base import Drive
from placet.errors import PlacetError, PolicyRefused, StaleEvidence, WrongState
from placet.executor.download import run_download
from placet.executor.lease import Heartbeat
from placet.executor.ops import Plan, plan_for
from placet.executor.progress import Aborted, OpOutcome, ProgressEvent
from placet.executor.steps import OpContext, failed, run_mkdir, run_upload
from placet.executor.temps import (
    Temp,
    cleanup_old_temps,
    journaled_temps,
    remove_temp,
    temps_detail,
)
from placet.requests import Op, request_hash
from placet.store import LeaseHolder, OpResultRecord, ProposalRecord, Store
from placet.store.lifecycle import APPROVED, SUCCESS_OUTCOMES, owner_skips
from placet.sync.baseline import BaselineRecorder

log = logging.getLogger(__name__)

ProgressCallback = Callable[[ProgressEvent], None]

_SKIPPED = {
    "code": "skipped_by_owner",
    "message": "the owner unticked this op when accepting; placet did nothing for it",
    "retryable": False,
    "details": {},
}

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
) -> ProposalRecord:
    """Execute approved proposal `proposal_id` and return its final record.

    Args:
        store: the open store.
        settings: the owner's settings (lease, heartbeat, trash, download policy, drive).
        proposal_id: a proposal in status `approved`.
        progress: called from this thread with a `ProgressEvent` as bytes move (at most
            every 1 MiB or 100 ms) and once per op when its result is journaled.
            Exceptions it raises are logged and ignored.
        cancel: set it (from any thread) to stop: the running transfer is aborted, its
            temp removed, the proposal marked `interrupted`.
        drive: the drive to use (its spec must be the proposal's); default
            `placet.drive.drive_for(settings)`, opened and closed here.

    Returns:
        The proposal as it ended: `succeeded`, `failed`, or `interrupted` (cancelled or
        lease lost).

    Raises:
        NotFound: no such proposal. WrongState: it is not approved (or another executor
        claimed it first). PolicyRefused (codes ``request_altered``, ``drive_changed``,
        ``not_approved_as_shown``) and PlacetError (``request_invalid``): the binding
        checks refused; the proposal was ended `failed`. ConfigError: the drive could not
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
    prior = store.op_results(proposal_id) if record.attempt else []
    holder = LeaseHolder.current()
    record = store.claim(proposal_id, holder=holder)
    beat = Heartbeat(store, proposal_id, holder, settings.heartbeat_seconds).start()
    owned: Drive | None = None
    try:
        try:
            plan = bind(store, settings, record, drive)
            if drive is None:
                drive = owned = drive_for(settings)
        except PlacetError as e:
            store.finish(proposal_id, holder=holder, summary={"error": e.to_dict()}, expected_ops=1)
            raise
        run = _Run(store, settings, record, plan, drive, holder, beat, progress, cancel)
        return run.go(journaled_temps(prior))
    finally:
        beat.stop()
        if owned is not None:
            owned.close()


def check_binding(settings: Settings, record: ProposalRecord, drive: Drive | None = None) -> None:
    """The checks of `bind` that need no approval yet: the stored request still hashes to
    the proposal's hash, and the configured drive (and `drive`, if given) is the one it
    was made against. `placet accept` runs them before asking for the code.

    Raises:
        PolicyRefused: ``request_altered`` or ``drive_changed`` (see `bind`).
    """
    _check_hash(record)
    _check_drive(settings, record, drive)


def _check_hash(record: ProposalRecord) -> None:
    pid = record.id
    now_hash = request_hash(record.kind, record.request, record.evidence)
    if now_hash != record.request_hash:
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: its stored request hashes to "
            f"{now_hash[:16]}..., not to the {record.request_hash[:16]}... it was proposed "
            "and shown with; it was altered in the database: discard it",
            code="request_altered",
            details={"proposal_id": pid, "stored": record.request_hash, "now": now_hash},
        )


def _check_drive(settings: Settings, record: ProposalRecord, drive: Drive | None) -> None:
    pid = record.id
    configured = configured_spec(settings)
    used = drive.spec if drive is not None else configured
    if record.drive_spec != configured or used != record.drive_spec:
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: it was made against the drive "
            f"{record.drive_spec!r}, but the configured drive is {configured!r}; switch the "
            "drive back, or discard it and ask the agent to propose again",
            code="drive_changed",
            details={"proposal_id": pid, "proposal_drive": record.drive_spec,
                     "configured_drive": configured},
        )  # fmt: skip


def bind(store: Store, settings: Settings, record: ProposalRecord, drive: Drive | None) -> Plan:
    """The binding checks of DESIGN.md section 9; returns the parsed plan, with the ops
    the owner unticked (the approval event's `skip_ops`) as its `skip`.

    Raises:
        PolicyRefused: ``request_altered`` (the stored request + evidence no longer hash
            to the proposal's hash), ``not_approved_as_shown`` (the approval event bound
            another hash, or there is none, or its `skip_ops` do not fit the ops: unknown
            indexes, every op, or a kind other than sync), ``drive_changed`` (the
            configured drive, or the drive handed in, is not the one the proposal was
            made against).
        PlacetError (``request_invalid``): the stored request does not parse.
    """
    pid = record.id
    _check_hash(record)
    approvals = [e for e in store.audit_events(proposal_id=pid) if e.to_status == APPROVED]
    bound = approvals[-1].detail.get("request_hash") if approvals else None
    if bound != record.request_hash:
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: the owner's approval "
            + ("is missing from the audit log" if not approvals else f"bound hash {bound}")
            + f", not the proposal's {record.request_hash}; review and accept it again",
            code="not_approved_as_shown",
            details={"proposal_id": pid, "approved": bound, "proposal": record.request_hash},
        )
    skip = owner_skips(approvals[-1].detail)
    _check_drive(settings, record, drive)
    plan = plan_for(record.kind, record.request, record.evidence)
    unknown = sorted(skip - {op.index for op in plan.ops})
    if skip and (record.kind != "sync" or unknown or len(skip) >= len(plan.ops)):
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: the owner's approval unticks ops "
            f"{sorted(skip)}, which does not fit its {len(plan.ops)} {record.kind} op(s); "
            "review and accept it again",
            code="not_approved_as_shown",
            details={"proposal_id": pid, "skip_ops": sorted(skip), "unknown": unknown},
        )
    return replace(plan, skip=skip)


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
        self.current: Op | None = None
        self.temps: dict[int, list[Temp]] = {}  # journaled temps per op index
        self.leftover: dict[int, list[Temp]] = {}  # earlier attempts' temps not yet removed
        # A sync's baseline is written as each op succeeds (DESIGN.md section 7).
        self.baseline = BaselineRecorder.for_proposal(store, record, drive)

    # ---- hooks handed to the ops ----------------------------------------------------

    def _abort_reason(self) -> str | None:
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

    def _on_bytes(self, done: int, total: int) -> None:
        why = self._abort_reason()
        if why is not None:
            raise Aborted(why)
        op = self.current
        assert op is not None
        self._emit(ProgressEvent(op.index, self.count, self.moved + done, self.total))

    def _journal_temp(self, side: str, path: str) -> None:
        op = self.current
        assert op is not None
        self.temps.setdefault(op.index, []).append({"side": side, "path": path})
        detail = {
            "code": "in_progress",
            "message": "the op was running when this was recorded; if it stays, the "
            "executor stopped mid-op and the next run removes the temporary names below",
            "retryable": True,
            "details": {},
            **temps_detail(self.leftover.get(op.index, []) + self.temps[op.index]),
        }
        try:
            self.store.record_op_result(
                self.pid,
                op_index=op.index,
                op=op.model_dump(mode="json"),
                outcome="failed",
                detail=detail,
                holder=self.holder,
            )
        except WrongState as e:
            raise Aborted("lease lost") from e

    # ---- the run --------------------------------------------------------------------

    def go(self, earlier_temps: dict[int, list[Temp]]) -> ProposalRecord:
        started = time.monotonic()
        ctx = OpContext(
            drive=self.drive,
            settings=self.settings,
            root=self.plan.root,
            proposal_kind=self.plan.kind,
            progress=self._on_bytes,
            journal_temp=self._journal_temp,
        )
        removed = self._clean(earlier_temps)
        outcomes: Counter[str] = Counter()
        for op in self.plan.ops:
            why = self._abort_reason()
            if why is not None:
                return self._stop(why, None)
            self.current = op
            if op.index in self.plan.skip:
                out = OpOutcome("skipped", dict(_SKIPPED))
            else:
                try:
                    out = self._run_op(ctx, op)
                except Aborted as e:
                    return self._stop(e.why, op)
            try:
                if self.beat.lost.is_set():
                    raise WrongState("lease lost")
                self._journal(op, out)
            except WrongState:  # recovery took the proposal: another process may own it
                return self._stop("lease lost", None)
            if self.baseline is not None and out.outcome != "skipped":
                self.baseline.op_ended(op, out.outcome, out.detail)
            outcomes[out.outcome] += 1
        if self.baseline is not None:
            self.baseline.ops_finished()
        summary: dict[str, Any] = {
            "ops": self.count,
            "outcomes": dict(outcomes),
            "bytes": self.moved,
            "seconds": round(time.monotonic() - started, 3),
        }
        if self.plan.skip:
            summary["skipped_by_owner"] = sorted(self.plan.skip)
        if removed:
            summary["temps_removed"] = removed
        try:
            return self.store.finish(
                self.pid, holder=self.holder, summary=summary, expected_ops=self.count
            )
        except WrongState:
            return self._stop("lease lost", None)

    def _clean(self, earlier: dict[int, list[Temp]]) -> list[str]:
        """Remove an earlier attempt's journaled temps, and old temps in target folders."""
        removed: list[str] = []
        try:
            self.drive.clear_caches()
        except PlacetError as e:
            log.warning("could not clear rclone's caches: %s", e.message)
        for index, temps in earlier.items():
            for t in temps:
                if remove_temp(self.drive, self.plan.root, t):
                    removed.append(f"{t['side']}:{t['path']}")
                else:
                    self.leftover.setdefault(index, []).append(t)
        folders = {
            (op.remote_path or "").rpartition("/")[0]
            for op in self.plan.ops
            if op.kind in ("upload", "upload_revision") and op.index not in self.plan.skip
        }
        removed += [f"remote:{p}" for p in cleanup_old_temps(self.drive, folders)]
        return removed

    def _run_op(self, ctx: OpContext, op: Op) -> OpOutcome:
        step = _STEPS.get(op.kind)
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

    def _journal(self, op: Op, out: OpOutcome) -> None:
        detail = dict(out.detail)
        keep = list(self.leftover.get(op.index, []))
        if out.outcome not in SUCCESS_OUTCOMES:
            keep += self.temps.get(op.index, [])  # the drive may not have removed them
        detail.update(temps_detail(keep))
        op_json = op.model_dump(mode="json")
        self.store.record_op_result(
            self.pid,
            op_index=op.index,
            op=op_json,
            outcome=out.outcome,
            detail=detail,
            holder=self.holder,
        )
        if op.kind != "mkdir" and op.index not in self.plan.skip:
            self.moved += op.size or 0
        result = OpResultRecord(
            self.pid, self.record.attempt, op.index, op_json, out.outcome, detail,
            datetime.now(UTC),
        )  # fmt: skip
        self._emit(ProgressEvent(op.index, self.count, self.moved, self.total, result))

    def _stop(self, why: str, op: Op | None) -> ProposalRecord:
        """End early: cancelled (journal the op, mark interrupted) or lease lost (write
        nothing more: another process may own the proposal now)."""
        log.warning("stopping execution of proposal %s: %s", self.pid, why)
        if why == "cancelled":
            try:
                if op is not None:
                    err = PlacetError(
                        f"the owner stopped the execution during op {op.index}; nothing was "
                        "put under its target name: accept the proposal again to finish",
                        code="cancelled",
                        retryable=True,
                    )
                    self._journal(op, failed(err))
                self.store.mark_interrupted(self.pid, actor="executor", why="cancelled")
            except WrongState:
                pass  # the owner's UI marked it interrupted first
        return self.store.get(self.pid)
