"""A sync's new folders, created many at a time: one stat request and one mkdir request
for up to `FOLDER_BATCH` folders, not two or three rcd calls each, one after another.

Each op keeps its own result and is decided as `run_mkdir` decides it
(docs/decisions/0027-sync-execution.md): a folder there is already_done, an absent one is
created and done. Anything else (a file there, a name the drive answered differently, a
non-ASCII name that needs the normalization check, a stat or mkdir that failed, a drive
without batches) runs alone through `run_mkdir`, which words its outcome."""

from __future__ import annotations

from collections.abc import Callable

from placet.drive.base import Drive
from placet.drive.batches import Batches
from placet.errors import PlacetError
from placet.executor.progress import OpOutcome
from placet.schema import Op

FOLDER_BATCH = 256
"""Most folders one stat request (and one mkdir request) covers."""


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
        found = part.stat_many(paths)
    except PlacetError:
        return [(op, single(op)) for op in ops]
    out: dict[int, OpOutcome] = {}
    make: list[Op] = []
    for op, path, got in zip(ops, paths, found, strict=True):
        name = path.rpartition("/")[2]
        if got is None and name.isascii():
            make.append(op)
        elif (
            not isinstance(got, PlacetError) and got is not None and got.is_dir and got.name == name
        ):
            out[op.index] = OpOutcome("already_done", {"remote_path": path})
    if make:
        try:
            errors: list[PlacetError | None] = part.mkdir_many(
                [op.remote_path or "" for op in make]
            )
        except PlacetError as e:
            errors = [e] * len(make)
        for op, err in zip(make, errors, strict=True):
            if err is None:
                out[op.index] = OpOutcome("done", {"remote_path": op.remote_path or ""})
    return [(op, out[op.index] if op.index in out else single(op)) for op in ops]


__all__ = ["FOLDER_BATCH", "run_mkdir_batch"]
