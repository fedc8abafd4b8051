"""Which digest to compare, and the one-pass hashing primitive.

docs/design.md section 9 ("Digest choice"): compare the strongest type both sides can
compute, sha256 then sha1 then md5 (all three are in `hashlib`, backed by OpenSSL); a
remote with none of them is compared by size and every "equal" it yields is marked
`unverified`. Hex is compared case-insensitively because Proton Drive reports SHA-1 in
either case (docs/design.md section 3).

`hash_fd` reads a descriptor once, in 1 MiB chunks into a reused buffer, and feeds every
requested hash from the same bytes: a file is read once however many types the remote
and the evidence need. hashlib releases the GIL while it hashes large chunks, so several
threads hash several files in parallel.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence

from placet.errors import UsageError
from placet.local.hashing import CHUNK
from placet.schema import DIGEST_PREFERENCE
from placet.sync.entries import LocalEntry, RemoteEntry

_RANK: dict[str, int] = {t: i for i, t in enumerate(DIGEST_PREFERENCE)}
_NEW = {"sha256": hashlib.sha256, "sha1": hashlib.sha1, "md5": hashlib.md5}


def normalise_types(types: Iterable[str]) -> tuple[str, ...]:
    """Lower-case, de-duplicate and order digest type names, strongest first.

    Raises:
        UsageError: a type placet does not compute (only sha256, sha1, md5).
    """
    out: set[str] = set()
    for t in types:
        low = t.lower()
        if low not in _RANK:
            raise UsageError(
                f"cannot compute digest type {t!r}: placet hashes local files with "
                f"{', '.join(DIGEST_PREFERENCE)} only; ask for one of those",
                details={"digest_type": t, "supported": list(DIGEST_PREFERENCE)},
            )
        out.add(low)
    return tuple(sorted(out, key=_RANK.__getitem__))


def choose_digest_type(hash_types: Iterable[str]) -> str | None:
    """The strongest type among a remote's `hash_types` that placet can compute locally.

    Unknown names (rclone's whirlpool, quickxor, …) are ignored. None: compare by size
    only, and mark equal-sized pairs `unverified`.
    """
    best: str | None = None
    for t in hash_types:
        low = t.lower()
        if low in _RANK and (best is None or _RANK[low] < _RANK[best]):
            best = low
    return best


def hash_fd(
    fd: int, types: Sequence[str], buffer: bytearray | None = None
) -> tuple[dict[str, str], int]:
    """Read `fd` from its current offset to EOF once and digest the bytes.

    Args:
        fd: an open, readable descriptor; it is not closed.
        types: digest types from `DIGEST_PREFERENCE` (already normalised).
        buffer: a reusable read buffer (its length is the chunk size); one is made if None.

    Returns:
        (lower-case hex digest per type, number of bytes read).

    Raises:
        OSError: the read failed.
    """
    hashers = [_NEW[t](usedforsecurity=False) for t in types]
    buf = buffer if buffer is not None else bytearray(CHUNK)
    view = memoryview(buf)
    bufs = [buf]
    readv = os.readv
    total = 0
    if len(hashers) == 1:
        update = hashers[0].update
        while n := readv(fd, bufs):
            update(view[:n])
            total += n
    else:
        while n := readv(fd, bufs):
            chunk = view[:n]
            for h in hashers:
                h.update(chunk)
            total += n
    return {t: h.hexdigest() for t, h in zip(types, hashers, strict=True)}, total


def compare(lo: LocalEntry, r: RemoteEntry) -> tuple[str | None, bool | None]:
    """Compare two files by the strongest digest both have (sha256 > sha1 > md5).

    The local side has SHA-256 and at most one other type (`digest_type`), so the
    strongest common type is sha256 if the remote gave it, else the local native type
    if the remote gave that.

    Returns:
        (digest type used or None, True equal / False different / None unknown: no
        common digest and sizes equal or unknown). Hex compares case-insensitively.
        Different sizes are different whatever the digests say (-1: size unknown).
    """
    rsize = r.size
    if lo.size != rsize and rsize >= 0:
        return None, False
    d = r.digests
    if d:
        lv = lo.sha256
        rv = d.get("sha256")
        if rv and lv:
            return "sha256", rv == lv or rv.lower() == lv.lower()
        t, lv = lo.digest_type, lo.digest
        if t is not None and lv:
            rv = d.get(t)
            if rv:
                return t, rv == lv or rv.lower() == lv.lower()
    return None, None
