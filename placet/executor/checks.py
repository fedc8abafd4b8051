"""Re-checking a proposal's evidence at execution, and recognising work already done.

Every op asks two questions before it touches anything (docs/design.md sections 4, 9,
"Op results"): **already_done** first (the target already holds the approved content, so
a crash between a move and its journal row never strands an op), then **stale** (the
source or target is no longer what the proposal saw: a local file by size and mtime, its
bytes matched as they stream; a remote one by size and digest, or by SHA-256 of the bytes
placet read when proposing, docs/decisions/0011-no-digest-binding.md). Approved content is
judged by the remote's digest of the approved type, else by a read-back, done only where a
target exists that the evidence said should not. `RemoteProbe` caches one path's stat and
digests for one op, and digests are asked one type at a time (each may be a full read)."""

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
    back and its SHA-256 compared (size and mtime can be restored); with `streamed` (a
    download, whose own stream is compared with the digest before its bytes take the name)
    only its size is compared here, so the file is read once, not twice.
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
