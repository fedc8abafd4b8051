"""Re-checking a proposal's evidence at execution, and recognising work already done.

Two questions are asked of every op before it touches anything (docs/design.md sections 4, 9):

1. **already_done** (asked first): does the target already hold the approved content?
   Then the op is done whatever else changed, which is what makes re-accepting an
   interrupted proposal safe: a crash between the final move and its journal entry
   leaves the approved bytes in place, and the next run must not call that stale.
2. **stale**: is the source or target still what the proposal saw? A local file is
   compared by size and mtime (its bytes are hashed as they stream, and the drive
   refuses bytes that differ from the approved SHA-256); a remote one by size and digest
   of the remote's own type, or, where the remote offers none, by SHA-256 of its bytes
   against those placet read when proposing or planning (`read_by_placet`; evidence
   recorded before that: size and mtime).

"Approved content" is decided by the strongest means available: the remote's own digest
of the approved type when it has one, else SHA-256 of the bytes read back (a remote with
no digest, e.g. WebDAV). Reading back costs a full read, so it is done only on the rare
path where a target exists that the evidence said should not.

`RemoteProbe` caches one path's stat and digests for the length of one op, so a check
that needs the same digest twice (already_done, then stale) asks rclone once. Hashes are
asked one type at a time (`Drive.digest_of`), never every type a backend knows: on a
local folder or sftp each type is a full read of the file.
"""

from __future__ import annotations

import os
from typing import Any

from placet.drive.base import Drive, Entry
from placet.schema import LocalFileEvidence, RemoteEvidence


class RemoteProbe:
    """Live facts about one remote path, each fetched at most once."""

    def __init__(self, drive: Drive, path: str) -> None:
        self.drive = drive
        self.path = path
        self._entry: Entry | None = None
        self._stat_done = False
        self._digests: dict[str, str | None] = {}
        self._readback: str | None = None

    def entry(self) -> Entry | None:
        """The entry now (no digest), or None when absent."""
        if not self._stat_done:
            self._entry = self.drive.stat(self.path)
            self._stat_done = True
        return self._entry

    def forget(self) -> None:
        """Drop what was cached (after this process changed the path)."""
        self._entry, self._stat_done, self._digests, self._readback = None, False, {}, None

    def digest(self, digest_type: str) -> str | None:
        """The remote's own `digest_type` digest (lower-case hex), None if it has none."""
        t = digest_type.lower()
        if t not in self._digests:
            if t not in self.drive.capabilities().hash_types:
                self._digests[t] = None
            else:
                d = self.drive.digest_of(self.path, t)
                self._digests[t] = d.lower() if d else None
        return self._digests[t]

    def known_digest(self, digest_type: str | None) -> str | None:
        """A digest already fetched by `digest` (None when it was not asked or absent)."""
        return self._digests.get(digest_type.lower()) if digest_type else None

    def readback_sha256(self) -> str:
        """SHA-256 of the object's bytes, read back now (`Drive.content_sha256`: one rcd
        call, no rclone child)."""
        if self._readback is None:
            self._readback = self.drive.content_sha256(self.path).lower()
        return self._readback


def remote_holds(probe: RemoteProbe, approved: LocalFileEvidence) -> bool:
    """True when the remote path is a file holding exactly the `approved` bytes (a local
    file's evidence: its size, SHA-256, and digest of the remote's type).

    Compared by size, then the remote's digest of `approved.digest_type` when it has
    one, else by reading the object back and comparing SHA-256.
    """
    e = probe.entry()
    if e is None or e.is_dir:
        return False
    if e.size is not None and e.size != approved.size:
        return False
    if approved.digest_type and approved.digest:
        got = probe.digest(approved.digest_type)
        if got is not None:
            return got == approved.digest.lower()
    return probe.readback_sha256() == approved.sha256.lower()


def remote_as_seen(probe: RemoteProbe, ev: RemoteEvidence, *, streamed: bool = False) -> bool:
    """True when the remote path is still what the evidence recorded.

    Absent stays absent; a folder stays a folder; a file keeps its size and its digest
    of the recorded type (where the remote reports one now), else its mtime. A file
    bound by content (`RemoteEvidence.read_by_placet`: the remote has no digest) is read
    back and its SHA-256 compared (issue 12 item 3); with `streamed` (a download, whose
    own stream is compared with the digest before its bytes take the name) only its
    size is compared here, so the file is read once, not twice.
    """
    e = probe.entry()
    if not ev.exists:
        return e is None
    if e is None or e.is_dir != ev.is_dir:
        return False
    if ev.is_dir:
        return True
    if ev.size is not None and e.size is not None and e.size != ev.size:
        return False
    if ev.read_by_placet and ev.digest:  # the remote has no digest: compare the bytes
        return streamed or probe.readback_sha256() == ev.digest.lower()
    if ev.digest_type and ev.digest:
        got = probe.digest(ev.digest_type)
        if got is not None:
            return got == ev.digest.lower()
    return ev.mtime is None or e.mtime == ev.mtime


def remote_found(probe: RemoteProbe, digest_type: str | None) -> dict[str, Any]:
    """The remote path as it is now, in `RemoteEvidence` shape, for a stale report."""
    e = probe.entry()
    if e is None:
        return {"exists": False}
    out: dict[str, Any] = {"exists": True, "is_dir": e.is_dir, "size": e.size, "mtime": e.mtime}
    known = None if e.is_dir else probe.known_digest(digest_type)
    if known is not None and digest_type:
        out["digest_type"] = digest_type.lower()
        out["digest"] = known
    return out


def local_as_seen(st: os.stat_result, ev: LocalFileEvidence) -> bool:
    """True when a local file still has the recorded size and mtime (nanoseconds)."""
    return st.st_size == ev.size and st.st_mtime_ns == ev.mtime_ns


def local_found(st: os.stat_result | None) -> dict[str, Any]:
    """The local file as it is now (size, mtime_ns), for a stale report."""
    if st is None:
        return {"exists": False}
    return {"exists": True, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
