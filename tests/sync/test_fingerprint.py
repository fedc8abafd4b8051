"""A plan's listing fingerprints: equal listings agree, any change a plan depends on
(name, kind, size, mtime, digest, on either side) gives another fingerprint, so a
stored plan is never reused for a listing it was not made from."""

from __future__ import annotations

import unicodedata

import pytest

from placet.sync import plan
from placet.sync.entries import LocalEntry, OneDigest, PlanCapabilities, RemoteEntry
from tests.support.listings import SHA1, L, R


def fps(
    local: list[LocalEntry],
    remote: list[RemoteEntry],
    caps: PlanCapabilities = SHA1,
    include_hidden: bool = False,
) -> tuple[str, str]:
    got = plan(local, remote, {}, caps, include_hidden=include_hidden)
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
# fingerprints alike, so the values themselves must not change between versions: each
# side's entries folder by folder in the order the merge enters folders, each folder's
# lines sorted (docs/decisions/0026-plan-memory.md).
_NFD = unicodedata.normalize("NFD", "café.txt")
_GOLDEN_LOCAL = {
    False: "c01aa172f692e0fcb07075832cc8f2885ff0f1d29a7dc5fff85ffbff13561abb",
    True: "ac4897a473b98044ec71367e33d5cdf05af42507e83aff6fea3fa3a196b8cda5",
}
_GOLDEN_REMOTE = {  # include_hidden: the two "a.txt" rows in either order hash alike
    False: "ec09062af13de0101d5fe1152e4d73eaa1104021d0c11774ada2c150a89eea5a",
    True: "f45cebf70bf7b53f166da29c745cf54c5eb942ae32e69238052f415ec5fbed39",
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
    elif order == "sorted":
        local.sort(key=lambda e: e.raw_path)
        remote.sort(key=lambda e: e.path)
    caps = PlanCapabilities(hash_types=("sha1",), case_insensitive=case_insensitive)
    local_fp, remote_fp = fps(local, remote, caps, hidden)
    assert local_fp == _GOLDEN_LOCAL[hidden]
    assert remote_fp == _GOLDEN_REMOTE[hidden]


@pytest.mark.parametrize("in_order", [False, True])
def test_fingerprints_of_a_listing_in_any_order_keep_their_values(in_order: bool) -> None:
    local = [L(f"d{i % 7}/f{i:05d}.txt", str(i)) for i in range(5000)]
    remote = [R(f"d{i % 7}/f{i:05d}.txt", str(i)) for i in range(5000)]
    if in_order:
        local.sort(key=lambda e: e.raw_path)
        remote.sort(key=lambda e: e.path)
    local_fp, remote_fp = fps(local, remote)
    assert local_fp == ("f351ed93aa8bcc01db2167b95ad909058e08e40aca34dbf46c33341d50109e29")
    assert remote_fp == ("77b041b346e5b894ba21dbf422b766307b3b13a7960acf8e9bcccea06d53915a")
