"""Temporary names left by an execution that stopped mid-transfer, and their removal.

Before the first byte goes to a temporary name (remote or local), the runner journals it
in the op's result row (detail ``temps``), committed. The next execution reads those rows
before claiming and removes exactly those names, whatever their age (their writer is
gone); one it cannot remove yet is carried into the new attempt's journal. A replaced
object's backup (side ``backup``) is moved back onto an empty target, deleted when the
op is still selected and both the target and the backup prove the replacement complete
(`replaced_as_approved`), else left and listed for the owner
(docs/decisions/0007-upload-checks.md). Age-based cleanup (`Drive.cleanup_temps`, older
than 15 minutes) catches what no journal names."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

from placet.drive.base import Drive
from placet.errors import NotFound, PlacetError
from placet.executor.checks import RemoteProbe, remote_as_seen, remote_holds
from placet.local import atomic, walk
from placet.names import is_placet_backup, is_placet_temp
from placet.paths.local import check_local_shape
from placet.schema import Op, RootRef
from placet.store import OpResultRecord

log = logging.getLogger(__name__)

Temp = dict[str, str]
"""{"side": "remote" | "local", "path": ...}, or, for a drive backup,
{"side": "backup", "path": ..., "restore_to": target}."""


def journal_entry(op: Op, side: str, path: str) -> Temp:
    """The journal entry of temporary name `path` of `op`: a drive backup
    (`is_placet_backup`) is side ``backup`` and names the op's target to restore."""
    if side == "remote" and is_placet_backup(path.rsplit("/", 1)[-1]):
        return {"side": "backup", "path": path, "restore_to": op.remote_path or ""}
    return {"side": side, "path": path}


def journaled_temps(results: list[OpResultRecord]) -> dict[int, list[Temp]]:
    """Temp names recorded in a journal, by op index (entries of unknown shape skipped)."""
    out: dict[int, list[Temp]] = {}
    for r in results:
        temps = r.detail.get("temps") if isinstance(r.detail, dict) else None
        for t in temps if isinstance(temps, list) else []:
            if not isinstance(t, dict) or not isinstance(t.get("path"), str):
                continue
            name = t["path"].rsplit("/", 1)[-1]
            if t.get("side") in ("remote", "local") and is_placet_temp(name):
                out.setdefault(r.op_index, []).append({"side": t["side"], "path": t["path"]})
            elif (
                t.get("side") == "backup"
                and is_placet_backup(name)
                and isinstance(t.get("restore_to"), str)
            ):
                out.setdefault(r.op_index, []).append(
                    {"side": "backup", "path": t["path"], "restore_to": t["restore_to"]}
                )
    return out


def remove_temp(drive: Drive, root: RootRef | None, temp: Temp, op: Op | None = None) -> bool:
    """Remove one journaled temp of `op`; True when it is gone (or was never there). A
    drive backup is put back instead (`Drive.restore_backup`), or deleted when the
    replacement is proven complete (`replaced_as_approved`; needs `op`).

    A local temp is removed through the root's descriptor walk like any other local
    write (a root that changed is not touched). Failures are logged and reported False.
    """
    try:
        if temp["side"] == "backup":
            if op is not None and replaced_as_approved(drive, op, temp):
                return drive.discard_backup(temp["path"])
            return drive.restore_backup(temp["path"], temp["restore_to"])
        if temp["side"] == "remote":
            drive.remove_temp(temp["path"])
            return True
        if root is None:
            return True
        parts = check_local_shape(temp["path"]).parts
        root_fd = walk.open_root(root)
        try:
            dir_fd = walk.open_dir_under(root_fd, parts[:-1])
        finally:
            os.close(root_fd)
        try:
            atomic.discard_temp_file(dir_fd, parts[-1])
        finally:
            os.close(dir_fd)
        return True
    except NotFound:
        return True
    except (PlacetError, OSError) as e:
        log.warning("could not remove temporary %s %r yet: %s", temp["side"], temp["path"], e)
        return False


def replaced_as_approved(drive: Drive, op: Op, backup: Temp) -> bool:
    """True when upload `op`'s replacement is complete but for deleting `backup`: its
    target holds the approved bytes (`remote_holds`, as an op found already done) and
    the backup holds what the evidence recorded under the target (`remote_as_seen`), so
    it is the content the owner approved replacing, not something written since.

    Raises: what the drive raises (the caller treats it as "not proven").
    """
    local, remote = op.expected_local, op.expected_remote
    if op.kind not in ("upload", "upload_revision") or local is None or remote is None:
        return False
    if not remote.exists or remote.is_dir or backup.get("restore_to") != op.remote_path:
        return False
    target = RemoteProbe(drive, backup["restore_to"])
    return remote_holds(target, local) and remote_as_seen(
        RemoteProbe(drive, backup["path"]), remote
    )


def cleanup_old_temps(drive: Drive, folders: set[str]) -> list[str]:
    """`Drive.cleanup_temps` on each folder (missing folders and failures ignored)."""
    removed: list[str] = []
    for folder in sorted(folders):
        with contextlib.suppress(PlacetError):
            removed += drive.cleanup_temps(folder)
    return removed


def temps_detail(temps: list[Temp]) -> dict[str, Any]:
    """The detail fragment that journals `temps` ({} when there are none)."""
    return {"temps": temps} if temps else {}
