"""Reading one file of an op for its preview, bounded, and checking it against the evidence.

A preview is worth showing only if it is of the bytes the evidence's digest names (what
the owner approves and the executor re-checks), so every read ends in a `Side` saying how
its bytes are bound (`placet.preview.model`). A local file is opened as the executor
opens it (`placet.local.walk`: from the root's descriptor, no link followed), its size
and mtime compared with the evidence, then at most `cap` bytes read: a file that fits
is hashed and compared with the evidence's SHA-256, a larger one compared with the bytes
captured when proposed, else ``unchecked``. A remote file is looked up (`Drive.stat`:
gone, or another size or mtime, is a change), then its first bytes read through rclone
(`Drive.read_head`, ``rclone cat --count``) and, when it fits, hashed and compared.
Nothing here raises for a file that cannot be read: the side says why, since a preview
is never a reason to refuse or to fail.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import PurePosixPath

from placet.drive.base import Drive, Entry
from placet.errors import NotFound, PlacetError
from placet.local import walk
from placet.preview.model import Binding, Side
from placet.preview.render import Content
from placet.schema import LocalFileEvidence, RemoteEvidence, RootRef
from placet.store.previews import StoredPreview
from placet.text import inert

__all__ = [
    "DriveSource",
    "read_bounded",
    "read_local",
    "read_remote",
    "recheck_remote",
    "remote_binding",
    "stored_binding",
]

DriveSource = Callable[[], Drive]
"""Gives the drive to read remote files from (opened by the caller when first asked)."""


def read_bounded(fd: int, cap: int) -> bytes:
    """At most `cap` bytes of `fd` from offset 0 (``pread``: the position is not moved)."""
    out = bytearray()
    while len(out) < cap:
        chunk = os.pread(fd, cap - len(out), len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _changed(role: str, where: str, why: str) -> Side:
    return Side(role, where, "changed", message=why)


def _unavailable(role: str, where: str, e: PlacetError | str) -> Side:
    why = e if isinstance(e, str) else inert(e.message)
    return Side(role, where, "unavailable", message=why)


def read_local(
    root: RootRef,
    rel: str,
    evidence: LocalFileEvidence,
    cap: int,
    role: str,
    stored: StoredPreview | None = None,
) -> Side:
    """The local file `rel` in `root` now, checked against `evidence` (see the module
    docstring); `stored`: its preview captured when proposed, shown when it still
    matches."""
    try:
        fd, st = walk.open_file_for_read(root, PurePosixPath(rel))
    except NotFound:
        return _changed(role, "local", "it is gone")
    except PlacetError as e:
        return _unavailable(role, "local", e)
    try:
        head = read_bounded(fd, min(cap, st.st_size))
        whole = st.st_size <= cap and len(head) == st.st_size
    finally:
        walk.close_quietly(fd)
    if st.st_size != evidence.size:
        return _changed(role, "local", f"{st.st_size} bytes, not {evidence.size}")
    if st.st_mtime_ns != evidence.mtime_ns:
        return _changed(role, "local", "its modification time is not the one proposed")
    if whole:
        if hashlib.sha256(head).hexdigest() != evidence.sha256:
            return _changed(role, "local", "its SHA-256 is not the evidence's")
        if stored is not None and stored.content == head:
            return Side(role, "local", stored_binding(stored), Content(stored.content, stored.size))
        return Side(role, "local", "digest", Content(head, st.st_size))
    if stored is not None and stored.content:
        if head[: len(stored.content)] != stored.content:
            return _changed(role, "local", "its first bytes are not the ones proposed")
        return Side(role, "local", stored_binding(stored), Content(stored.content, stored.size))
    return Side(role, "local", "unchecked", Content(head, st.st_size),
                message="its size and mtime match the evidence")  # fmt: skip


def stored_binding(stored: StoredPreview) -> Binding:
    """A stored preview's binding (anything unknown counts as unchecked)."""
    if stored.binding == "same_read":
        return "same_read"
    return "digest" if stored.binding == "digest" else "unchecked"


def _remote_change(entry: Entry | None, evidence: RemoteEvidence) -> str | None:
    """How the remote file `entry` differs from `evidence` by what a stat tells, or None."""
    if entry is None or entry.is_dir:
        return "it is gone" if entry is None else "it is a folder"
    if evidence.size is not None and entry.size != evidence.size:
        return f"{entry.size} bytes, not {evidence.size}"
    if evidence.mtime and entry.mtime and entry.mtime != evidence.mtime:
        return "its modification time is not the one proposed"
    return None


def remote_binding(data: bytes, size: int | None, evidence: RemoteEvidence) -> str | None:
    """How remote bytes `data` (the first of a file of `size` bytes) are bound to
    `evidence`: ``digest`` (whole, digest matches), ``unchecked`` (partial, or no digest
    hashlib computes), None (whole, and the digest differs: it changed)."""
    if size is None or len(data) < size or not evidence.digest or not evidence.digest_type:
        return "unchecked"
    try:
        got = hashlib.new(evidence.digest_type, data).hexdigest()
    except ValueError:  # a hashlib built without that type (md5 under FIPS)
        return "unchecked"
    return "digest" if got == evidence.digest.lower() else None


def read_remote(drive: Drive, path: str, evidence: RemoteEvidence, cap: int, role: str) -> Side:
    """The remote file `path` now, checked against `evidence` (see the module docstring)."""
    try:
        entry = drive.stat(path)
        change = _remote_change(entry, evidence)
        if change is not None or entry is None:
            return _changed(role, "remote", change or "it is gone")
        size = entry.size
        want = cap if size is None else min(cap, size)
        data = drive.read_head(path, want) if want > 0 else b""
    except NotFound:
        return _changed(role, "remote", "it is gone")
    except PlacetError as e:
        return _unavailable(role, "remote", e)
    binding = remote_binding(data, size, evidence)
    if binding is None:
        return _changed(role, "remote", "its digest is not the evidence's")
    return Side(role, "remote", "digest" if binding == "digest" else "unchecked",
                Content(data, size))  # fmt: skip


def recheck_remote(
    drive: Drive, path: str, evidence: RemoteEvidence, stored: StoredPreview, role: str
) -> Side:
    """A remote preview captured when proposed, shown if the file still has the size
    and mtime the evidence recorded (one `Drive.stat`); a drive that cannot be asked
    now leaves it shown, said so."""
    content = Content(stored.content, stored.size)
    try:
        entry = drive.stat(path)
    except PlacetError as e:
        return Side(role, "remote", stored_binding(stored), content,
                    message=f"not re-checked now: {inert(e.message)}")  # fmt: skip
    change = _remote_change(entry, evidence)
    if change is not None:
        return _changed(role, "remote", change)
    return Side(role, "remote", stored_binding(stored), content)
