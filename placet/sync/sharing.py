"""One string object for what both listings say alike, so a plan of 1,000,000 files stays
within 1 GiB (docs/decisions/0026-plan-memory.md).

A file on both sides carries two equal path strings, often two equal SHA-256 hex digests
and two equal size ints, built apart (the remote decoded between the index's folders).
The remote listing takes the local objects as it decodes a folder the walk is past
(`placet.sync.remote`); for the rest, `share_pair` points each remote entry at the local
entry's objects as the remote listing is keyed, and `share_equal_strings` does the same
for a kept copy of the remote digest cache. Only `==` strings are swapped, never a
case-insensitive match, so every value, fingerprint and stored form stays the same; a
frozen `RemoteEntry`'s path is set through its slot descriptor."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from placet.sync.entries import LocalEntry, OneDigest, RemoteEntry

_set_path = RemoteEntry.__dict__["path"].__set__
_set_size = RemoteEntry.__dict__["size"].__set__


def share_pair(lo: LocalEntry, r: RemoteEntry) -> None:
    """Point remote entry `r` at its local entry `lo`'s path, size and digest where
    equal (a size of 256 bytes or more is an int object of its own: 28 bytes)."""
    raw = lo.raw_path
    if r.path is not raw and r.path == raw:
        _set_path(r, raw)
    if r.size is not lo.size and r.size == lo.size:
        _set_size(r, lo.size)
    d = r.digests
    if type(d) is not OneDigest:
        return
    t = d.digest_type
    mine = lo.sha256 if t == "sha256" else lo.digest if t == lo.digest_type else None
    if mine is not None and d.value is not mine and d.value == mine:
        d.value = mine


def share_equal_strings(
    pairs: Iterable[tuple[LocalEntry, RemoteEntry]], prefix: str
) -> Iterator[tuple[str, str]]:
    """`share_pair` for each of `pairs`; yields (remote path under the drive: `prefix`
    + the entry's path, digest object) for each remote digest now the local one, for
    the remote digest cache to adopt too (`DigestCaches.share_remote_digests`)."""
    for lo, r in pairs:
        share_pair(lo, r)
        d = r.digests
        if type(d) is OneDigest and (d.value is lo.sha256 or d.value is lo.digest):
            yield prefix + r.path, d.value
