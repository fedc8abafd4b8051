"""`placet show ID --diff [--op N]`: what the bytes of a proposal's ops say.

For each op that writes a file (the first `SHOWN` of a sync, or op N alone), its content
preview (`placet.preview.opening.open_preview`, checked against the evidence now) as
lines: a new file's first lines, a replacement's unified diff with its counts, a
binary's type and size; placet's own notes (how the bytes are bound to the digest,
what was cut) start with ``#``. A file changed since proposed is said to have changed,
and its bytes are not printed. Every line is inert (`placet.preview.render`); on a
terminal, added lines are green and removed ones red (colours placet adds around inert
text, never bytes of the file).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

from placet.cli.show_ops import SHOWN
from placet.config import Settings
from placet.drive.base import Drive
from placet.executor import op_at, stored_ops
from placet.preview.model import render_op
from placet.preview.opening import open_preview, writes_file
from placet.preview.render import Line, Rendering
from placet.schema import Op
from placet.store import ProposalRecord, Store
from placet.text import inert

__all__ = ["diff_lines", "rendering_lines"]

_PREFIX = {"context": " ", "del": "-", "add": "+", "text": "  ", "hunk": "", "note": "# "}
_COLOUR = {"del": "\x1b[31m", "add": "\x1b[32m", "hunk": "\x1b[36m", "note": "\x1b[2m"}


def _colour() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def rendering_lines(r: Rendering, *, colour: bool = False) -> Iterator[str]:
    """`r` as plain lines (`_PREFIX` marks each kind), coloured for a terminal."""
    yield f"  {r.title}"
    for line in r.lines:
        yield "  " + _line(line, colour)


def _line(line: Line, colour: bool) -> str:
    out = _PREFIX.get(line.kind, "") + line.text
    if line.cut:
        out += f" ... [{line.cut} more characters]"
    start = _COLOUR.get(line.kind) if colour else None
    return f"{start}{out}\x1b[0m" if start else out


def _head(op: Op) -> str:
    src, dst = op.local_path, op.remote_path
    if op.kind == "download":
        src, dst = dst, src
    return f"op #{op.index} {inert(op.kind)}: {inert(str(src))} -> {inert(str(dst))}"


def diff_lines(
    store: Store, settings: Settings, record: ProposalRecord, op_index: int | None
) -> Iterator[str]:
    """`placet show --diff` of `record` (op `op_index` alone, or every op that writes a
    file, the first `SHOWN` of them); a drive is opened only for a remote file."""
    drives: list[Drive] = []

    def drive() -> Drive:
        if not drives:
            from placet.drive import drive_for

            drives.append(drive_for(settings))
        return drives[0]

    colour = _colour()
    if op_index is not None:
        ops: Iterator[Op] = iter([op_at(store, record, op_index)])  # NotFound before a line
    else:
        ops = (op for op in stored_ops(store, record) if writes_file(op))
    yield f"proposal {record.id}  {inert(record.kind)}  {record.status.upper()}: content"
    try:
        shown = 0
        for op in ops:
            if shown == SHOWN:
                yield f"  ... more ops write files; --op N shows op N (see placet show {record.id})"
                break
            shown += 1
            yield f"  {_head(op)}"
            yield from rendering_lines(
                render_op(open_preview(store, settings, record, op, drive)), colour=colour
            )
        if not shown:
            yield "  no op of this proposal writes a file"
    finally:
        for d in drives:
            d.close()
