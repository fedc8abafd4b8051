"""Which ops of a proposal the owner may leave out (untick) when accepting it.

Only a sync has ops to untick (`skip_ops`); every other kind is accepted or discarded
whole. A selection must leave something to run, name only ops the proposal has, and
keep what its ticked ops need: rclone creates the missing folders above a file it
uploads, so an upload (or a deeper mkdir) ticked inside a folder whose mkdir is unticked
would create that folder anyway while the journal says placet did nothing for it. Such a
selection is refused before the owner confirms or signs (``folder_unticked``); a view
that unticks a folder unticks `inside` it too, and says so. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar

from placet.errors import UsageError
from placet.text import quote


class OpLike(Protocol):
    """What the selection rules read of an op (`placet.schema.Op`, or a view of one)."""

    @property
    def index(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def remote_path(self) -> str | None: ...


OpT = TypeVar("OpT", bound=OpLike)

__all__ = ["OpLike", "check_selection", "inside", "needs", "settle"]

_WRITES_REMOTE = ("mkdir", "upload", "upload_revision")
"""Op kinds that create their remote path's missing folders on the way."""


def _under(path: str | None, folder: str) -> bool:
    return path is not None and path.startswith(folder.rstrip("/") + "/")


def inside(ops: Sequence[OpT], folder: OpT) -> list[int]:
    """Indexes of the ops that need the mkdir op `folder`: the uploads and mkdirs whose
    remote path lies under its folder (segment-wise: ``s/sub`` holds ``s/sub/a``,
    never ``s/subway``)."""
    if folder.kind != "mkdir" or not folder.remote_path:
        return []
    return [
        op.index
        for op in ops
        if op.kind in _WRITES_REMOTE and _under(op.remote_path, folder.remote_path)
    ]


def needs(ops: Sequence[OpT], skip: Collection[int]) -> list[tuple[OpT, OpT]]:
    """(ticked op, unticked mkdir it needs) for every ticked op inside a folder whose
    mkdir op is unticked, in op order (the nearest such folder of each)."""
    unticked = sorted(
        (op for op in ops if op.kind == "mkdir" and op.index in skip and op.remote_path),
        key=lambda op: -len(op.remote_path or ""),
    )
    if not unticked:
        return []
    out: list[tuple[OpT, OpT]] = []
    for op in ops:
        if op.index in skip or op.kind not in _WRITES_REMOTE:
            continue
        folder = next((f for f in unticked if _under(op.remote_path, f.remote_path or "")), None)
        if folder is not None:
            out.append((op, folder))
    return out


def check_selection(pid: int, kind: str, ops: Sequence[OpLike], skip: Collection[int]) -> None:
    """Refuse a selection of proposal `pid` (of `kind`, whose parsed ops are `ops`) that
    unticks the ops `skip`.

    Raises:
        UsageError: ``skip_invalid`` (ops unticked in a proposal that is not a sync, or
            an index it has no op for), ``nothing_selected`` (every op unticked: discard
            it instead), ``folder_unticked`` (a ticked op needs an unticked folder).
    """
    if not skip:
        return
    chosen = sorted(set(skip))
    if kind != "sync":
        raise UsageError(
            f"cannot accept proposal {pid} with ops unticked: it is a {kind} proposal "
            "with a single op; accept or discard it whole",
            code="skip_invalid",
            details={"proposal_id": pid, "kind": kind},
        )
    indexes = {op.index for op in ops}
    unknown = [i for i in chosen if i not in indexes]
    if unknown:
        shown = ", ".join(f"#{op.index}" for op in ops[:20])
        raise UsageError(
            f"cannot accept proposal {pid} with op(s) {unknown} unticked: it has no such "
            f"op; its ops are {shown}{', ...' if len(ops) > 20 else ''}",
            code="skip_invalid",
            details={"proposal_id": pid, "unknown": unknown},
        )
    if len(chosen) >= len(indexes):
        raise UsageError(
            f"cannot accept proposal {pid} with every op unticked: nothing would run; "
            "discard it instead",
            code="nothing_selected",
            details={"proposal_id": pid},
        )
    missing = needs(ops, chosen)
    if missing:
        op, folder = missing[0]
        more = f" (and {len(missing) - 1} more ticked op(s) inside it)" if len(missing) > 1 else ""
        raise UsageError(
            f"cannot accept proposal {pid} with op #{folder.index} (create folder "
            f"{quote(folder.remote_path or '')}) unticked while op #{op.index} ({op.kind} "
            f"{quote(op.remote_path or '')}) stays ticked{more}: the ticked op would create the "
            f"folder anyway; tick #{folder.index} again, or untick the ops inside it too",
            code="folder_unticked",
            details={
                "proposal_id": pid,
                "folder_op": folder.index,
                "needed_by": [o.index for o, f in missing if f.index == folder.index],
            },
        )


def settle(
    ops: Sequence[OpT], skip: Collection[int], unticked: Collection[int]
) -> tuple[set[int], set[int]]:
    """A selection made consistent after the owner changed it: ops inside a folder the
    owner just unticked (`unticked`) are unticked too; a folder that ops still ticked
    need is ticked again. Returns (also unticked, ticked again), for the view to apply
    and say."""
    skipped = set(skip)
    off: set[int] = set()
    on: set[int] = set()
    while missing := needs(ops, skipped):
        for op, folder in missing:
            if folder.index in unticked or folder.index in off:
                skipped.add(op.index)
                off.add(op.index)
            else:
                skipped.discard(folder.index)
                on.add(folder.index)
    return off, on - off
