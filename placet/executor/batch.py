"""A sync's small new files, uploaded a batch at a time.

Per file, an upload costs several rcd calls and commits, so the ops of one batch (new
files in plan order, of one folder or of several small ones, at most `BATCH_OPS`;
`batch_units` picks them) share each round trip while every op keeps its own checks and result
(docs/decisions/0027-sync-execution.md): local evidence per op (descriptor walk, size and
mtime); bytes batched through `placet.drive.batches`, matched to their digests
before anything is sent; and, right before the moves, whether each target is still
absent. already_done is asked first, as a re-accept after a crash needs: one listing per
folder finds the targets there, those holding the approved digest are already_done, any
other runs alone through `run_upload` (which asks already_done before stale), as does a
target that appears later. An error of the whole batch fails each op as it would have
failed alone; nothing was moved for them."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placet.drive.base import Drive, Entry, UploadResult
from placet.drive.batches import BATCH_MAX_BYTES, BATCH_MAX_FILES, Batches, NewFile
from placet.drive.spec import check_drive_path
from placet.errors import AlreadyExists, NotFound, PlacetError, StaleEvidence
from placet.executor.checks import local_as_seen, local_found
from placet.executor.progress import OpOutcome
from placet.executor.steps import OpContext, failed, stale, upload_found_detail
from placet.local.walk import open_dir_under, open_file_for_read, open_regular_at, open_root
from placet.paths.local import check_local_shape
from placet.schema import Op, RootRef

BATCH_OPS = 100
"""Most ops of one batch (a folder of more is split, so the transfer workers share it)."""

JournalTemps = Callable[[list[tuple[Op, str]]], None]
"""`journal_temps([(op, remote temp path)])`: durably records them, in one commit."""


@dataclass
class BatchContext:
    """What a batch needs: the per-op context (drive, root), the runner's hooks.

    `single(op)` runs one op alone, as the runner does (used for the ops a batch does
    not take); `ready(op)` is called once an op's bytes were read and approved (raises
    `Aborted` to stop); `journal_temps` records temporary names before bytes go to them.
    """

    ctx: OpContext
    single: Callable[[Op], OpOutcome]
    ready: Callable[[Op], None]
    journal_temps: JournalTemps


def batches_of(drive: Drive) -> Batches | None:
    """`drive`'s batch part when it takes batches of new files now (`Batches.can_batch`)."""
    part = getattr(drive, "batches", None)
    if not isinstance(part, Batches):
        return None
    try:
        return part if part.can_batch() else None
    except PlacetError:
        return None


def batchable(op: Op, max_size: int) -> bool:
    """An upload of a new file (the evidence saw no target) of at most `max_size` bytes."""
    ev_remote = op.expected_remote
    return (
        op.kind == "upload"
        and not op.replace
        and op.expected_local is not None
        and op.local_path is not None
        and (ev_remote is None or not ev_remote.exists)
        and (op.size or 0) <= max_size
        and op.expected_local.size <= max_size
    )


def batch_units(
    ops: list[Op], drive: Drive, skip: frozenset[int]
) -> tuple[list[list[Op]], set[int]]:
    """`ops` (a sync's selected file ops) as units for the transfer pool: batches of new
    small files in plan order, of one folder or of several small ones (at most
    `BATCH_OPS` files, `BATCH_MAX_BYTES` in all), every other op alone; and the indexes
    of the ops put in batches."""
    part = batches_of(drive)
    if part is None:
        return [[op] for op in ops], set()
    max_size = part.max_file_size
    units: list[list[Op]] = []
    batched: set[int] = set()
    unit: list[Op] = []
    held = 0  # bytes of `unit`
    limit = min(BATCH_OPS, BATCH_MAX_FILES)
    for op in ops:
        if op.index in skip or not batchable(op, max_size):
            units.append([op])
            continue
        size = op.size or 0
        if not unit or len(unit) >= limit or held + size > BATCH_MAX_BYTES:
            unit, held = [], 0
            units.append(unit)
        unit.append(op)
        held += size
        batched.add(op.index)
    return units, batched


def run_upload_batch(b: BatchContext, ops: list[Op]) -> list[tuple[Op, OpOutcome]]:
    """Run a batch of new-file uploads; one outcome per op, in any order.

    Raises only `Aborted` (the owner cancelled or the lease was lost: nothing of an op
    not yet ended was moved into place, and its temporary objects are gone).
    """
    root, batches = b.ctx.root, batches_of(b.ctx.drive)
    assert root is not None and batches is not None  # `batch_units` made this batch
    out: list[tuple[Op, OpOutcome]] = []
    started = time.monotonic()
    taken: list[tuple[Op, int]] = []  # (op, open descriptor)
    walk = _Walk(root)
    there = _targets_there(batches, ops)
    try:
        for op in ops:
            if op.index in there:  # already_done is asked first, as `run_upload` does
                found = there[op.index]
                out.append((op, found if found is not None else b.single(op)))
                continue
            got = _open_source(walk, op)
            if isinstance(got, OpOutcome):
                out.append((op, got))
            elif got is None:
                out.append((op, b.single(op)))
            else:
                taken.append((op, got))
        if not taken:
            return out
        files = [_new_file(op, fd) for op, fd in taken]

        def journal(temps: list[tuple[int, str]]) -> None:
            b.journal_temps([(taken[i][0], t) for i, t in temps])

        try:
            results = batches.upload_new_batch(
                files, journal=journal, ready=lambda i: b.ready(taken[i][0])
            )
        except PlacetError as e:
            return out + [(op, _error(op, e)) for op, _ in taken]
        seconds = round(time.monotonic() - started, 3)
        for (op, _), r in zip(taken, results, strict=True):
            if isinstance(r, UploadResult):
                out.append((op, _done(op, r, seconds)))
            elif isinstance(r, AlreadyExists):  # the target is there: the per-op rules decide
                out.append((op, b.single(op)))
            else:
                out.append((op, _error(op, r)))
        return out
    finally:
        for _, fd in taken:
            os.close(fd)
        walk.close()


def _targets_there(batches: Batches, ops: list[Op]) -> dict[int, OpOutcome | None]:
    """Per op whose target is there now (one listing of each folder, of those names, with
    the approved digest's type): `already_done` when the object holds the approved
    digest (size, then digest, as `remote_holds` compares), else None (the op runs
    alone, which decides as for any present target). Nothing when the listing fails (the
    batch then meets the error)."""
    by_type: dict[str, list[Op]] = {}
    for op in ops:
        ev = op.expected_local
        assert ev is not None
        by_type.setdefault((ev.digest_type or "").lower(), []).append(op)
    out: dict[int, OpOutcome | None] = {}
    for t, some in by_type.items():
        try:
            listed = batches.targets_listed([op.remote_path or "" for op in some], t)
        except PlacetError:
            continue
        for op in some:
            e = listed.get(check_drive_path(op.remote_path or ""))
            if e is not None:
                out[op.index] = _found_done(op, e)
    return out


def _found_done(op: Op, e: Entry) -> OpOutcome | None:
    ev = op.expected_local
    assert ev is not None
    if e.is_dir or (e.size is not None and e.size != ev.size):
        return None
    got = e.digests.get((ev.digest_type or "").lower()) if ev.digest else None
    if got is None or got != (ev.digest or "").lower():
        return None
    detail = upload_found_detail(op.remote_path or "", ev, got)
    return OpOutcome("already_done", detail, remote_mtime=e.mtime)  # listed: no stat again


class _Walk:
    """`placet.local.walk.open_file_for_read` for the files of one batch: the root is
    opened and its identity checked once, each local folder walked once by descriptor,
    and each file opened under its folder's descriptor by `open_regular_at` (the same
    checks, without re-walking the same folders for every file)."""

    def __init__(self, root: RootRef) -> None:
        self.root = root
        self._root_fd: int | None = None
        self._dirs: dict[tuple[str, ...], int] = {}

    def open(self, rel: str) -> tuple[int, os.stat_result]:
        """(descriptor, stat) of regular file `rel`; raises as `open_file_for_read`."""
        parts = check_local_shape(rel).parts
        if not parts:
            return open_file_for_read(self.root, rel)  # refuses it with its words
        folder = tuple(parts[:-1])
        dir_fd = self._dirs.get(folder)
        if dir_fd is None:
            if self._root_fd is None:
                self._root_fd = open_root(self.root)
            dir_fd = self._dirs[folder] = open_dir_under(self._root_fd, folder)
        return open_regular_at(dir_fd, parts[-1], shown="/".join(parts))

    def close(self) -> None:
        for fd in [*self._dirs.values(), *([self._root_fd] if self._root_fd is not None else [])]:
            os.close(fd)
        self._dirs, self._root_fd = {}, None


def _open_source(walk: _Walk, op: Op) -> int | OpOutcome | None:
    """The op's local file opened by descriptor walk and as the evidence saw it: its
    descriptor; a `stale` outcome; or None (let the op run alone and report it)."""
    ev = op.expected_local
    assert ev is not None and op.local_path is not None
    try:
        fd, st = walk.open(op.local_path)
    except NotFound:
        gone = {"exists": False}
        return stale("local", op.local_path, ev.model_dump(mode="json"), gone, "vanished")
    except (PlacetError, OSError):
        return None
    if not local_as_seen(st, ev):
        os.close(fd)
        return stale("local", op.local_path, ev.model_dump(mode="json"), local_found(st), "changed")
    return fd


def _new_file(op: Op, fd: int) -> NewFile:
    ev = op.expected_local
    assert ev is not None
    digest = (ev.digest_type, ev.digest) if ev.digest_type and ev.digest else None
    return NewFile(fd, ev.size, op.remote_path or "", ev.sha256, digest)


def _done(op: Op, r: UploadResult, seconds: float) -> OpOutcome:
    ev = op.expected_local
    assert ev is not None
    detail: dict[str, Any] = {
        "remote_path": r.remote_path,
        "size": r.size,
        "sha256": r.sha256,
        "local_digest_type": ev.digest_type,
        "local_digest": ev.digest,
        "digest_type": r.digest_type,
        "digest": r.digest,
        "verification": r.verification,
        "path_taken": r.path_taken,
        "seconds": seconds,
    }
    return OpOutcome("done", detail, remote_mtime=r.mtime)


def _error(op: Op, e: PlacetError) -> OpOutcome:
    """An op's outcome for error `e`, worded as `run_upload` words it."""
    if isinstance(e, StaleEvidence):
        return OpOutcome.error("stale", e, remote_path=op.remote_path or "")
    return failed(e)
