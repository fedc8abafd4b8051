"""The evidence a proposal records: the state of its target when it was proposed.

The owner decides on facts, and the executor re-checks the same facts before it acts (a
change in between fails the op as `stale`, docs/design.md section 4), so what is captured
here is what both read. This module decides what that state is for each side: on the
remote, whether the target exists, is a folder, or a file with its size, mtime and the
remote's preferred digest (`remote_evidence`; strongest of sha256, sha1, md5, docs/design.md
section 9, "Digest choice") and which parent folders do not exist yet
(`missing_parents`: the executor creates them on the way, and the owner is shown
which); locally, a file's size, mtime, SHA-256 and the remote's digest type, hashed in
one pass from a descriptor opened without following links (`placet.local.atomic`), and
refused as stale when the file changed while it was read, since a digest of no single
version of it would prove nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from placet.errors import LimitExceeded, NotFound, PathRefused, StaleEvidence
from placet.local import hashing, walk
from placet.paths.roots import Root
from placet.proposals.context import ProposeContext
from placet.schema import DIGEST_PREFERENCE, DigestType, LocalFileEvidence, RemoteEvidence
from placet.text import quote

if TYPE_CHECKING:
    from placet.drive.base import Entry

__all__ = [
    "local_file_evidence",
    "local_file_evidence_and_head",
    "preferred_digest_type",
    "remote_evidence",
]

"""Strongest first (docs/design.md section 9, "Digest choice")."""


def preferred_digest_type(hash_types: Sequence[str]) -> DigestType | None:
    """The strongest of sha256, sha1, md5 the remote offers (case-insensitive), or None."""
    offered = {h.lower() for h in hash_types}
    return next((t for t in DIGEST_PREFERENCE if t in offered), None)


def remote_digest_type(ctx: ProposeContext) -> DigestType | None:
    return preferred_digest_type(ctx.drive.capabilities().hash_types)


CONTENT_READ_MAX = 64 << 20
"""Most bytes placet reads at proposal time to bind a proposal to a remote file's content
when the remote offers no digest (`remote_evidence(read_content=True)`); a larger file
is refused (code ``remote_unverifiable``), never bound by size and mtime alone."""


def remote_evidence(
    ctx: ProposeContext, path: str, *, with_digest: bool = True, read_content: bool = False
) -> RemoteEvidence:
    """What the drive reports for `path` now: absent, a folder, or a file with its digest
    (of the remote's preferred type; None when it reports none or `with_digest` is False).

    With `read_content` (a download, a replacement of remote content), a file the remote
    has no digest for is read once, up to `CONTENT_READ_MAX` bytes, and its SHA-256
    recorded (`RemoteEvidence.read_by_placet`): size and mtime alone bind nothing, since
    content rewritten with the same size and a restored mtime passes them
    (docs/decisions/0011-no-digest-binding.md).

    Raises:
        LimitExceeded (code ``remote_unverifiable``): `read_content`, no digest, and the
            file is larger than `CONTENT_READ_MAX` (or of unknown size).
        StaleEvidence: the file changed while it was read.
        DriveUnavailable / DriveError: from the drive adapter.
    """
    entry: Entry | None = ctx.drive.stat(path, include_digest=with_digest)
    if entry is None:
        return RemoteEvidence(exists=False)
    if entry.is_dir:
        return RemoteEvidence(exists=True, is_dir=True)
    dtype = remote_digest_type(ctx)
    digest = entry.digests.get(dtype) if dtype is not None else None
    if digest is None and read_content:
        return _content_evidence(ctx, path, entry)
    return RemoteEvidence(
        exists=True,
        is_dir=False,
        size=entry.size,
        mtime=entry.mtime,
        digest_type=dtype if digest else None,
        digest=digest.lower() if digest else None,
    )


def _content_evidence(ctx: ProposeContext, path: str, entry: Entry) -> RemoteEvidence:
    """`entry` bound to its content: SHA-256 of its bytes, read now through the drive."""
    size = entry.size
    if size is None or size > CONTENT_READ_MAX:
        raise LimitExceeded(
            f"refusing to propose on remote {quote(path)}: the drive offers no digest, so "
            f"placet binds the proposal to the file's content by reading it, at most "
            f"{CONTENT_READ_MAX >> 20} MiB, and this file is "
            f"{'of unknown size' if size is None else f'{size} bytes'}; size and mtime alone "
            "cannot show the owner's approval still holds. Transfer it outside placet, or "
            "use a remote that offers digests",
            code="remote_unverifiable",
            details={"remote_path": path, "size": size, "max_bytes": CONTENT_READ_MAX},
        )
    sha = ctx.drive.content_sha256(path)  # one rcd call, no rclone child
    after = ctx.drive.stat(path)
    if after is None or (after.size, after.mtime) != (size, entry.mtime):
        raise StaleEvidence(
            f"remote {quote(path)} changed while placet read it to record its content; "
            "propose again",
            details={"remote_path": path, "size": size},
        )
    return RemoteEvidence(
        exists=True,
        is_dir=False,
        size=size,
        mtime=entry.mtime,
        digest_type="sha256",
        digest=sha.lower(),
        read_by_placet=True,
    )


def local_file_evidence(
    root: Root, rel: PurePosixPath, digest_type: DigestType | None, *, size_cap: int | None
) -> LocalFileEvidence:
    """`local_file_evidence_and_head` keeping no head."""
    return local_file_evidence_and_head(root, rel, digest_type, size_cap=size_cap, head=0)[0]


def local_file_evidence_and_head(
    root: Root,
    rel: PurePosixPath,
    digest_type: DigestType | None,
    *,
    size_cap: int | None,
    head: int,
) -> tuple[LocalFileEvidence, bytes]:
    """Size, mtime, SHA-256 and `digest_type` of the regular file `root/rel`, in one pass,
    and its first `head` bytes kept by that same pass (the content preview of what the
    digest names, `placet.preview`).

    The file is opened by `placet.local.walk.open_file_for_read`, which walks from the root's
    descriptor with `O_NOFOLLOW` and refuses links, FIFOs, devices and hard-linked files.

    Raises:
        PathRefused: not a regular file, a symlink, more than one hard link.
        NotFound: the file is gone.
        LimitExceeded: larger than `size_cap` bytes.
        StaleEvidence (retryable): the file changed while it was read.
    """
    fd, st = walk.open_file_for_read(root, str(rel))
    try:
        if size_cap is not None and st.st_size > size_cap:
            raise LimitExceeded(
                f"local file {quote(str(rel))} in root {root.name} is {st.st_size} bytes; "
                f"the owner's upload cap is {size_cap} bytes",
                details={"path": str(rel), "size": st.st_size, "cap": size_cap},
            )
        types: list[str] = ["sha256"]
        if digest_type is not None and digest_type != "sha256":
            types.append(digest_type)
        digests, hashed, first = hashing.hash_fd_head(fd, types, head)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if hashed != st.st_size or (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise StaleEvidence(
            f"local file {quote(str(rel))} in root {root.name} changed while placet read it; "
            "propose again once it is no longer being written",
            details={"path": str(rel), "root": root.name},
            retryable=True,
        )
    evidence = LocalFileEvidence(
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        sha256=digests["sha256"].lower(),
        digest_type=digest_type,
        digest=digests[digest_type].lower() if digest_type is not None else None,
    )
    return evidence, first


def missing_parents(ctx: ProposeContext, parent: str) -> tuple[str, ...]:
    """The folders of the drive-relative `parent` that do not exist, outermost first
    (``"a/b/c"`` on an empty drive: ``("a", "a/b", "a/b/c")``); () when it exists.

    One `Drive.stat` of `parent` answers the common case (it exists); otherwise the
    ancestors are read from the top, one call each until the first missing one (every
    folder below it is missing too). The executor (rclone) creates them on the way; the
    owner is told which (`placet.display.missing_folders_line`).

    Raises:
        PathRefused (``not_a_directory``): `parent` or one of its ancestors is a file.
        DriveUnavailable / DriveError: from the drive adapter.
    """
    if not parent:
        return ()
    entry = ctx.drive.stat(parent)
    if entry is not None and entry.is_dir:
        return ()
    parts = parent.split("/")
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        found = entry if depth == len(parts) else ctx.drive.stat(here)
        if found is None:
            return tuple("/".join(parts[:d]) for d in range(depth, len(parts) + 1))
        if not found.is_dir:
            inside = "" if here == parent else f" (on the way to {quote(parent)})"
            raise PathRefused(
                f"refusing remote parent {quote(here)}{inside}: it is a file, not a folder; "
                "name a folder (see drive_list)",
                code="not_a_directory",
                details={"remote_parent": parent, "file": here},
            )
    return ()  # pragma: no cover - the loop returns or raises at the last part


def local_target_state(root: Root, rel: PurePosixPath) -> os.stat_result | None:
    """lstat of the download target; its folder must exist (checked, with no link, by
    `resolve_local`'s walk)."""
    parent = root.path.joinpath(*rel.parts[:-1])
    if not os.path.isdir(parent):
        raise NotFound(
            f"the local folder {quote(str(rel.parent))} does not exist in root {root.name}; "
            "download into an existing folder",
            details={"path": str(rel), "missing": str(rel.parent), "root": root.name},
        )
    try:
        return os.lstat(root.path.joinpath(*rel.parts))
    except FileNotFoundError:
        return None
