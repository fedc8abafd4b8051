"""A sync's new folders, many at a time: one request listing the parents of up to
`FOLDER_BATCH` folders, then one mkdir call per absent folder, not two stats and a
mkdir each.

Each op keeps its own result and is decided as `run_mkdir` decides it
(docs/decisions/0027-sync-execution.md): a folder there is already_done, an absent one is
created and done. Anything else (a file there, a name the drive answered differently, a
name that needs the normalization check (not `twin_free`), a stat or mkdir that failed, a drive
without batches) runs alone through `run_mkdir`, which words its outcome."""

from __future__ import annotations

from collections.abc import Callable

from placet.drive.base import Drive
from placet.drive.batches import Batches
from placet.drive.twins import twin_free
from placet.errors import NotFound, PlacetError
from placet.executor.progress import OpOutcome
from placet.schema import Op

FOLDER_BATCH = 256
"""Most folders one stat request covers."""


def run_mkdir_batch(
    drive: Drive, ops: list[Op], single: Callable[[Op], OpOutcome]
) -> list[tuple[Op, OpOutcome]]:
    """Run mkdir `ops` (at most `FOLDER_BATCH`); one outcome per op, in their order.
    `single(op)` runs one op alone, as the runner does. Raises only what `single` raises."""
    part = getattr(drive, "batches", None)
    paths = [op.remote_path or "" for op in ops]
    if not isinstance(part, Batches) or len(ops) < 2 or not all(paths):
        return [(op, single(op)) for op in ops]
    try:
        found = _found(drive, paths)
    except PlacetError:
        return [(op, single(op)) for op in ops]
    out: dict[int, OpOutcome] = {}
    make: list[Op] = []
    for op, path, got in zip(ops, paths, found, strict=True):
        name = path.rpartition("/")[2]
        if got is False and twin_free(name):
            make.append(op)
        elif got == "dir" and twin_free(name):
            out[op.index] = OpOutcome("already_done", {"remote_path": path})
        else:  # before the others: a folder made as another's parent would look done
            out[op.index] = single(op)
    if make:
        try:
            errors: list[PlacetError | None] = part.mkdir_many(
                [op.remote_path or "" for op in make]
            )
        except PlacetError as e:
            errors = [e] * len(make)
        for op, err in zip(make, errors, strict=True):
            ok = OpOutcome("done", {"remote_path": op.remote_path or ""})
            out[op.index] = ok if err is None else single(op)
    return [(op, out[op.index]) for op in ops]


def _found(drive: Drive, paths: list[str]) -> list[bool | str | None]:
    """What is at each of `paths` now, from one request listing their parent folders
    (what rclone's stat does for each): False (nothing), ``dir``, ``file``, or None (its
    parent could not be listed; a case-insensitive drive, where a listing's exact names
    do not say)."""
    if drive.capabilities().case_insensitive:
        return [None] * len(paths)
    parents = sorted({p.rpartition("/")[0] for p in paths})
    listed: dict[str, dict[str, bool]] = {}
    for parent, rows in zip(parents, drive.list_folders_rows(parents), strict=True):
        if isinstance(rows, NotFound):
            listed[parent] = {}
        elif not isinstance(rows, PlacetError):
            listed[parent] = {row[0]: row[1] for row in rows}
    out: list[bool | str | None] = []
    for path in paths:
        there = listed.get(path.rpartition("/")[0])
        if there is None:
            out.append(None)
        elif path not in there:
            out.append(False)
        else:
            out.append("dir" if there[path] else "file")
    return out


__all__ = ["FOLDER_BATCH", "run_mkdir_batch"]
