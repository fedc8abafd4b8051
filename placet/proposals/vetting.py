"""What placet itself finds about a proposal before the owner decides: its risk flags,
and whether an op would write into placet's own folders.

`placet accept` and the review UI both call these functions on the ops the executor
runs (`placet.executor.plan_for(...).ops`), so both front ends flag and refuse exactly
the same proposals (docs/design.md section 9, "Risk flags computed by placet";
docs/security.md). A write into placet's data, config or database folder is refused, not
flagged: found by path and by device and inode (`placet.paths.roots.PlacetDirs`), since a
flag can be typed through and no agent has a reason to write there
(docs/decisions/0028-risk-and-own-folders.md). Core module: never imports `mcp` or
`textual`."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence

from placet.config import Settings
from placet.errors import PolicyRefused
from placet.paths.roots import PlacetDirs, is_below
from placet.proposals.risk import RiskFlag, drive_base, risk_flags
from placet.schema import Op
from placet.store import ProposalRecord
from placet.text import inert, inert_with_ascii

__all__ = ["local_drive_dir", "op_flags", "proposal_flags", "refuse_own_paths", "root_path_of"]


def root_path_of(record: ProposalRecord) -> str:
    """The absolute path of the proposal's local root as stored in its request
    (``request["root"]["path"]``), or ``""`` when it has none (a mkdir)."""
    root = record.request.get("root") if isinstance(record.request, dict) else None
    return str(root.get("path", "")) if isinstance(root, dict) else ""


def op_flags(record: ProposalRecord, op: Op, root_path: str) -> list[RiskFlag]:
    """placet's risk flags for one op of `record` (`placet.proposals.risk.risk_flags`).

    A download is matched on `root_path` (the root's absolute path) joined with its
    local target; an upload, upload_revision or mkdir on the drive's own path
    (`drive_base(record.drive_spec)`) joined with its remote target. ``replaces_existing``:
    the op replaces, or its evidence saw the target exist; ``name_changed``: a single
    upload stored under a name other than its local file's (docs/design.md section 9: "a name
    changed on upload").
    """
    local = op.local_path or ""
    remote = op.remote_path or ""
    if op.kind == "download":
        replaces = op.replace or op.expected_local is not None
        return risk_flags(kind="download", target_path=local, replaces_existing=replaces,
                          name_changed=False, base_path=root_path)  # fmt: skip
    drive = drive_base(record.drive_spec)
    if op.kind == "mkdir":
        return risk_flags(kind="mkdir", target_path=remote, replaces_existing=False,
                          name_changed=False, base_path=drive)  # fmt: skip
    exists = op.expected_remote is not None and op.expected_remote.exists
    renamed = record.kind == "upload" and posixpath.basename(local) != posixpath.basename(remote)
    return risk_flags(
        kind=op.kind,
        target_path=remote,
        replaces_existing=op.replace or exists,
        name_changed=renamed,
        source_name=posixpath.basename(local) if renamed else None,
        base_path=drive,
    )


def proposal_flags(record: ProposalRecord, ops: Sequence[Op]) -> list[RiskFlag]:
    """Every distinct risk flag of `ops` (the parsed ops of `record`), in op order: none
    dropped, however many ops a sync holds. Equal flags (same code and message) of two
    ops are listed once."""
    root_path = root_path_of(record)
    return list(dict.fromkeys(f for op in ops for f in op_flags(record, op, root_path)))


def local_drive_dir(spec: str) -> str | None:
    """The folder of a drive spec that names a local folder (``/srv/d``, ``local:/srv/d``,
    ``:local:/srv/d``), else None (a named remote's type is not known here)."""
    if spec.startswith("/"):
        return spec
    if spec.startswith(("local:", ":local:", ":local,")):
        base = drive_base(spec)
        return base if base.startswith("/") else None
    return None


def refuse_own_paths(settings: Settings, record: ProposalRecord, ops: Sequence[Op]) -> None:
    """Refuse an op of `record` that would write inside placet's own folders
    (`PlacetDirs.of(settings)`: data, config and database folders): a download whose
    target (realpath of the root's path joined with it) lies in, equals or contains one,
    or an upload or mkdir to a local-folder drive (`local_drive_dir`) whose target does
    (targets in the default drive folder, ``<data dir>/drive``, excepted). Compared by
    realpath and by identity (`PlacetDirs.relation`: the (st_dev, st_ino) of the target's
    existing folders against placet's, and of the target against the folders above
    placet's), so a bind mount of a placet folder inside the root is refused too. Called
    before the owner is asked anything; the download op refuses it again by descriptor.

    Raises:
        PolicyRefused (code ``placet_own_path``; details ``proposal_id``, ``op_index``).
    """
    check = OwnPaths(settings, record)
    for op in ops:
        check(op)


class OwnPaths:
    """`refuse_own_paths` one op at a time, placet's folders and the targets' folders
    resolved once for all the ops of `record` (the executor checks each op of a sync
    right before it runs; safe to call from several threads)."""

    def __init__(self, settings: Settings, record: ProposalRecord) -> None:
        self.record = record
        self.root_path = root_path_of(record)
        self.drive_dir = local_drive_dir(record.drive_spec)
        self.default_drive = os.path.realpath(settings.default_drive_dir)
        self.own = PlacetDirs.of(settings)
        self.folders: dict[str, str] = {}  # realpath of each folder named, resolved once

    def __call__(self, op: Op) -> None:
        """Raises PolicyRefused (``placet_own_path``) as `refuse_own_paths`."""
        if op.kind == "download" and op.local_path and self.root_path:
            target = _realpath(posixpath.join(self.root_path, op.local_path), self.folders)
            fix = "start placet serve with a --root apart from placet's folders"
        elif op.kind != "download" and op.remote_path and self.drive_dir:
            target = _realpath(posixpath.join(self.drive_dir, op.remote_path), self.folders)
            if is_below(target, self.default_drive):
                return
            fix = "set a drive folder apart from placet's folders (`placet drive set`)"
        else:
            return
        hit = self.own.overlap(target)
        if hit is not None:
            raise PolicyRefused(
                f"refusing to accept proposal {self.record.id}: op #{op.index} would write "
                f"{inert_with_ascii(target)} inside placet's own {hit[0]} "
                f"'{inert(str(hit[1]))}'; discard it, and {fix}",
                code="placet_own_path",
                details={"proposal_id": self.record.id, "op_index": op.index},
            )


def _realpath(path: str, folders: dict[str, str]) -> str:
    """`os.path.realpath(path)`, its folder resolved once per `folders` (a sync's targets
    share folders): the realpath of the folder joined with the last name, which is
    resolved again only when it is a symlink (or ``.``/``..``). Equal to
    `os.path.realpath` for the same state of the file system."""
    folder, name = posixpath.split(path)
    if not folder or name in ("", ".", ".."):
        return os.path.realpath(path)
    real = folders.get(folder)
    if real is None:
        real = folders[folder] = os.path.realpath(folder)
    joined = posixpath.join(real, name)
    try:
        if stat.S_ISLNK(os.lstat(joined).st_mode):
            return os.path.realpath(joined)
    except OSError:
        pass  # absent (or unreadable): realpath keeps the name as it is
    return joined
