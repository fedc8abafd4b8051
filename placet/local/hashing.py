"""Hashing a local file's bytes by descriptor, one thread per digest type.

The executor and the proposer hash the very descriptor `placet.local.walk` opened, so
the digest is of the bytes that will be sent, not of whatever a path names later. Two
types (SHA-256 plus the remote's) are the common case; hashlib releases the GIL, so each
type gets its own thread over the same descriptor, kept in lockstep so the second pass
reads from the page cache: two digests cost about one read. A length that differs
between passes means the file was being written, and is refused as stale evidence
rather than reported as a digest of no version of the file. The first bytes of the file
can be kept by that same read (`hash_fd_head`), so a preview shown to the owner is of
the bytes the digest names (`placet.preview`), not of a second read.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from typing import Any

from placet.errors import StaleEvidence, UsageError
from placet.text import quote

__all__ = ["CHUNK", "hash_fd", "hash_fd_head", "hash_fd_sized", "sha256_fd"]

CHUNK = 1024 * 1024
"""Read size for hashing, bytes (1 MiB: large enough that per-call overhead vanishes)."""
_LOCKSTEP_CHUNKS = 32


def _hash_pass(
    fd: int,
    hasher: Any,
    chunk: int,
    barrier: threading.Barrier | None,
    head: bytearray | None = None,
    head_max: int = 0,
) -> int:
    buf = bytearray(chunk)
    view = memoryview(buf)
    offset = 0
    chunks = 0
    while True:
        n = os.preadv(fd, [buf], offset)
        if n == 0:
            break
        hasher.update(view[:n])
        if head is not None and len(head) < head_max:
            head += view[: min(n, head_max - len(head))]
        offset += n
        chunks += 1
        if barrier is not None and chunks % _LOCKSTEP_CHUNKS == 0:
            try:
                barrier.wait()  # keep passes within a few MiB, so they share the page cache
            except threading.BrokenBarrierError:
                barrier = None  # a partner finished or failed: go on alone
    if barrier is not None:
        barrier.abort()  # release partners waiting for this pass, which is done
    return offset


def hash_fd_sized(fd: int, types: Sequence[str], chunk: int = CHUNK) -> tuple[dict[str, str], int]:
    """`hash_fd_head` keeping no head: ({type: hex}, size)."""
    digests, size, _ = hash_fd_head(fd, types, 0, chunk)
    return digests, size


def hash_fd_head(
    fd: int, types: Sequence[str], head_max: int, chunk: int = CHUNK
) -> tuple[dict[str, str], int, bytes]:
    """Digest a regular file's bytes from offset 0 to EOF with one or more hashlib types.

    Reads with ``pread`` into a reused buffer (the file position is not moved). With
    several types, each is computed by its own thread over the same descriptor, the
    threads kept in lockstep every 32 chunks so the second read comes from the page cache:
    hashlib releases the GIL, so two types cost about as much as one on two cores (a
    single loop feeding both hashers costs the sum).

    The first `head_max` bytes are kept from the same reads the first type's digest is
    computed from (no second read of the file).

    Returns:
        ({type: lower-case hex}, size in bytes read, the first `head_max` bytes).

    Raises:
        UsageError: a type hashlib does not offer (use rclone for those).
        StaleEvidence: the file's length changed while it was being hashed.
    """
    hashers: dict[str, Any] = {}
    for t in dict.fromkeys(types):
        try:
            hashers[t] = hashlib.new(t)
        except ValueError as e:
            raise UsageError(
                f"hash type {quote(t)} is not available in hashlib; compute it with rclone",
                details={"type": t},
            ) from e
    head = bytearray() if head_max > 0 else None
    first = next(iter(hashers), "")
    if len(hashers) == 1:
        size = _hash_pass(fd, hashers[first], chunk, None, head, head_max)
        return {t: h.hexdigest() for t, h in hashers.items()}, size, bytes(head or b"")
    barrier = threading.Barrier(len(hashers))
    sizes: dict[str, int] = {}
    errors: list[BaseException] = []

    def run(t: str) -> None:
        try:
            keep = head if t == first else None
            sizes[t] = _hash_pass(fd, hashers[t], chunk, barrier, keep, head_max)
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in hashers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    if len(set(sizes.values())) != 1:
        raise StaleEvidence(
            "the file changed length while it was being hashed; try again when it is "
            "no longer being written",
            details={"sizes": sizes},
        )
    size = next(iter(sizes.values()))
    return {t: h.hexdigest() for t, h in hashers.items()}, size, bytes(head or b"")


def hash_fd(fd: int, types: Sequence[str], chunk: int = CHUNK) -> dict[str, str]:
    """`hash_fd_sized` without the size: ``{type: hex}``."""
    return hash_fd_sized(fd, types, chunk)[0]


def sha256_fd(fd: int) -> tuple[str, int]:
    """SHA-256 hex and size in bytes of the file behind `fd` (from offset 0)."""
    digests, size = hash_fd_sized(fd, ["sha256"])
    return digests["sha256"], size
