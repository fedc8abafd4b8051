"""A plan's listing fingerprints: equal listings agree, any change a plan depends on
(name, kind, size, mtime, digest, on either side) gives another fingerprint, so a
stored plan is never reused for a listing it was not made from."""

from __future__ import annotations

import pytest

from placet.sync.entries import LocalEntry, OneDigest, RemoteEntry
from placet.sync.listings import read_listings
from tests.support.listings import SHA1, L, R


def fps(local: list[LocalEntry], remote: list[RemoteEntry]) -> tuple[str, str]:
    got = read_listings(local, remote, SHA1)
    return got.local_fingerprint, got.remote_fingerprint


LOCAL = [L("a.txt", "a"), L("d", kind="dir"), L("d/b.txt", "b")]
REMOTE = [R("a.txt", "a"), R("d", kind="dir"), R("d/b.txt", "b")]


def test_equal_listings_agree_whatever_their_order_and_digest_mapping() -> None:
    base = fps(LOCAL, REMOTE)
    assert fps(list(reversed(LOCAL)), list(reversed(REMOTE))) == base
    as_one = [
        RemoteEntry(e.path, e.kind, e.size, e.mtime, OneDigest(*next(iter(e.digests.items()))))
        if e.digests
        else e
        for e in REMOTE
    ]
    assert fps(LOCAL, as_one) == base


def _local(**changes: object) -> list[LocalEntry]:
    e = LOCAL[2]
    fields = {f: getattr(e, f) for f in e.__slots__} | changes
    return [*LOCAL[:2], LocalEntry(**fields)]  # type: ignore[arg-type]


def _remote(**changes: object) -> list[RemoteEntry]:
    e = REMOTE[2]
    fields = {f: getattr(e, f) for f in e.__slots__} | changes
    return [*REMOTE[:2], RemoteEntry(**fields)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"path": "d/c.txt", "raw_path": "d/c.txt"},
        {"size": 2},
        {"mtime_ns": 2},
        {"sha256": "0" * 64},
        {"digest": "0" * 40},
        {"kind": "skipped"},
    ],
)
def test_any_local_change_changes_the_local_fingerprint(change: dict[str, object]) -> None:
    lfp, rfp = fps(LOCAL, REMOTE)
    lfp2, rfp2 = fps(_local(**change), REMOTE)
    assert lfp2 != lfp and rfp2 == rfp


@pytest.mark.parametrize(
    "change",
    [
        {"path": "d/c.txt"},
        {"size": 2},
        {"mtime": "2025-01-01T00:00:01Z"},
        {"digests": {"sha1": "0" * 40}},
        {"digests": OneDigest("sha1", "0" * 40)},
        {"digests": {}},
        {"kind": "dir"},
    ],
)
def test_any_remote_change_changes_the_remote_fingerprint(change: dict[str, object]) -> None:
    lfp, rfp = fps(LOCAL, REMOTE)
    lfp2, rfp2 = fps(LOCAL, _remote(**change))
    assert rfp2 != rfp and lfp2 == lfp
