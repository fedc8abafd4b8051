"""One string object for what both listings say alike (issue 11: a plan of 1,000,000
files within 1 GiB).

The local index and the remote listing are built apart (the remote in rclone, decoded
between the index's folders), so a file present on both sides carries two equal path
strings (66 bytes each for a typical relative path) and, on remotes whose digest is
the one placet computes locally (local folders, sftp: SHA-256), two equal 64-character
hex digests (113 bytes each). Once both listings are keyed, `share_equal_strings`
points the remote entry (and the remote digest cache's row) at the local entry's
objects, so the remote's copies are freed before the plan is classified, its peak.

Only equal strings are swapped (`==`, never a case-insensitive match), so every value,
comparison, fingerprint and stored form stays what it was; a frozen `RemoteEntry`'s
path is set through its slot descriptor, as `placet.sync.entries.new_remote_entry`
builds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from placet.sync.model import LocalEntry, OneDigest, RemoteEntry

_set_path = RemoteEntry.__dict__["path"].__set__


def share_equal_strings(
    pairs: Iterable[tuple[LocalEntry, RemoteEntry]], prefix: str
) -> Iterator[tuple[str, str]]:
    """Point each remote entry of `pairs` at its local entry's equal path and digest.

    Yields (remote path under the drive: `prefix` + the entry's path, digest object)
    for each digest swapped, for the remote digest cache to adopt too
    (`DigestCaches.share_remote_digests`); the caller must drain it.
    """
    one = OneDigest
    for lo, r in pairs:
        raw = lo.raw_path
        if r.path is not raw and r.path == raw:
            _set_path(r, raw)
        d = r.digests
        if type(d) is not one:
            continue
        t = d.digest_type
        mine = lo.sha256 if t == "sha256" else lo.digest if t == lo.digest_type else None
        v = d.value
        if mine is not None and v is not mine and v == mine:
            d.value = mine
            yield prefix + r.path, mine
