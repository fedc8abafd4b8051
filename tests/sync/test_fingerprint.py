"""A plan's listing fingerprints: equal listings agree, any change a plan depends on
(name, kind, size, mtime, digest, on either side) gives another fingerprint, so a
stored plan is never reused for a listing it was not made from."""

from __future__ import annotations

import unicodedata

import pytest

from placet.sync.entries import LocalEntry, OneDigest, PlanCapabilities, RemoteEntry
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


# Fingerprints are stored with plans: a stored plan is reused only while a new listing
# fingerprints alike, so the values themselves must not change between versions. These
# were computed before the fingerprints stopped sorting a copy beside the keyed listings
# (docs/decisions/0026-plan-memory.md).
_NFD = unicodedata.normalize("NFD", "café.txt")
_GOLDEN_LOCAL = {
    False: "4c82949ff4e773876a25e3181a5916dda0663d854376e0f432992d07081a8021",
    True: "fb1729324fafe6f93818a3089529305287f229185b8664f45a76c101ea9ddb6a",
}
_GOLDEN_REMOTE = {  # (include_hidden, reversed): the duplicate "a.txt" rows keep their order
    (False, False): "b58b393792417e74e26cd06719a0d17342c74be3e57f924c7dc98265c01f8f9a",
    (False, True): "7ef6eaef76e0443c275c7b10b92fcf3d86844757b8e1d6fcdbd61d1a3bc47aa2",
    (True, False): "c5ba8d56d5096030edd17d1dde2cedd866a75faf876f31ca74934499ccaa51f2",
    (True, True): "5e2a0ff7b8da74be54ad98b66918e7e7efa0f1511265fb5a4227c9dae6a35803",
}


@pytest.mark.parametrize("case_insensitive", [False, True])
@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("order", ["as listed", "reversed", "sorted"])
def test_fingerprints_keep_their_values(case_insensitive: bool, hidden: bool, order: str) -> None:
    local = [
        L("b/x.txt", "x"), L("a-c.txt", "ac"), L("a", kind="dir"), L("a/b.txt", "ab"),
        L(".hidden", "h"), L("a/.h/y", "y"), L("café.txt", "c", raw=_NFD),
        L("err", None, kind="error"),
    ]  # fmt: skip
    remote = [
        R("b/x.txt", "x"), R("A.txt", "1"), R("a.txt", "2"), R("a", kind="dir"),
        R("a/b.txt", "ab"), R(".hidden", "h"), R("a.txt", "3"), R(_NFD, "c"),
    ]  # fmt: skip
    if order == "reversed":
        local.reverse()
        remote.reverse()
    elif order == "sorted":  # stable: the two "a.txt" rows stay in listed order
        local.sort(key=lambda e: e.raw_path)
        remote.sort(key=lambda e: e.path)
    caps = PlanCapabilities(hash_types=("sha1",), case_insensitive=case_insensitive)
    got = read_listings(local, remote, caps, include_hidden=hidden)
    assert got.local_fingerprint == _GOLDEN_LOCAL[hidden]
    assert got.remote_fingerprint == _GOLDEN_REMOTE[hidden, order == "reversed"]


@pytest.mark.parametrize("in_order", [False, True])
def test_fingerprints_of_a_listing_hashed_in_batches_keep_their_values(in_order: bool) -> None:
    local = [L(f"d{i % 7}/f{i:05d}.txt", str(i)) for i in range(5000)]
    remote = [R(f"d{i % 7}/f{i:05d}.txt", str(i)) for i in range(5000)]
    if in_order:
        local.sort(key=lambda e: e.raw_path)
        remote.sort(key=lambda e: e.path)
    got = read_listings(local, remote, SHA1)
    assert got.local_fingerprint == (
        "1233630ea1d04f8eef7750c8592e6e056dc8702e872f0f9f03912427047e9459"
    )
    assert got.remote_fingerprint == (
        "3eab0a1d166646cf57b034fb62551b5cb6e09672b2d8ce8ec9d227bf0fb75afc"
    )
