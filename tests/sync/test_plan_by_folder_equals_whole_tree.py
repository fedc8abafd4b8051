"""The plan merged folder by folder (`placet.sync.march`) is the plan of the whole keyed
trees (`tests.support.whole_tree_planner`): the same ops in the same order, the same
reports and counts, or the same refusal. On generated small trees (names that meet under
NFC or case folding, names sorting around "/", hidden names, unlisted parents, special
and unreadable entries, duplicates, baselines) and on a 20,000-file tree with a folder
of 8,000 files, NFC/NFD and case twins, conflicts, downloads and replacements; and
through the service on a real pair, its caches and baseline held or read by folder, cold,
warm and after a few changes (a same-size edit, a change there, a case twin, files turned
into folders). Skips packed as found give the rows of the same skips."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placet.drive.base import preferred_digest
from placet.sync import plan
from placet.sync.entries import (
    BaselineEntry,
    LocalEntry,
    OneDigest,
    PlanCapabilities,
    RemoteEntry,
    nfc,
)
from placet.sync.model import SyncPlan
from placet.sync.service import SkipPacker, SyncService, verified_skips
from placet.sync.tables import Pair, StoredPlan, pack_rows, unpack
from tests.support.clocks import ScanClock
from tests.support.listings import B, L, R
from tests.support.rig import Rig
from tests.support.whole_tree_planner import whole_tree_plan

_NFD_E = unicodedata.normalize("NFD", "é")
NAMES = ["a", "A", "b", "é", _NFD_E, "a-b", "a.b", "a b", ".h", "a0", "con"]
CONTENTS = ["", "x", "y", "xy"]

names = st.sampled_from(NAMES)
raw_paths = st.lists(names, min_size=1, max_size=3).map("/".join)


@st.composite
def local_entries(draw: st.DrawFn) -> LocalEntry:
    raw = draw(raw_paths)
    kind = draw(st.sampled_from(["file", "file", "file", "dir", "dir", "skipped", "error"]))
    if kind == "file":
        e = L(nfc(raw), draw(st.sampled_from(CONTENTS)), raw=raw)
        if draw(st.booleans()) and draw(st.booleans()):
            e = LocalEntry(e.path, e.raw_path, "file", e.size, 1, None, note="unreadable")
        return e
    return L(nfc(raw), None, kind=kind, raw=raw, note="why")


@st.composite
def remote_entries(draw: st.DrawFn) -> RemoteEntry:
    path = draw(raw_paths)
    if draw(st.integers(0, 3)) == 0:
        return R(path, kind="dir")
    types = draw(st.sampled_from([("sha1",), ()]))
    mtime = draw(st.sampled_from(["2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"]))
    e = R(
        path, draw(st.sampled_from(CONTENTS)), types=types, mtime=mtime, upper=draw(st.booleans())
    )
    if types and draw(st.booleans()):  # one digest held as listings hold it
        e = RemoteEntry(e.path, e.kind, e.size, e.mtime, OneDigest(*next(iter(e.digests.items()))))
    return e


@st.composite
def baselines(draw: st.DrawFn) -> dict[str, BaselineEntry]:
    out: dict[str, BaselineEntry] = {}
    for p in draw(st.lists(raw_paths, max_size=6)):
        content = draw(st.sampled_from([None, *CONTENTS]))
        out[nfc(p)] = B(nfc(p), content)
    return out


def same(local: list[LocalEntry], remote: list[RemoteEntry], baseline: dict[str, BaselineEntry],
         caps: PlanCapabilities, **kw: object) -> SyncPlan | None:  # fmt: skip
    """Both planners' plan, asserted equal (or the same refusal: None)."""
    try:
        want = whole_tree_plan(local, remote, baseline, caps, **kw)  # type: ignore[arg-type]
    except Exception as e:
        with pytest.raises(type(e)) as got:
            plan(local, remote, baseline, caps, **kw)  # type: ignore[arg-type]
        assert getattr(got.value, "details", None) == getattr(e, "details", None)
        return None
    p = plan(local, remote, baseline, caps, **kw)  # type: ignore[arg-type]
    assert p.ops == want.ops
    assert p.reports == want.reports
    assert p.summary == want.summary
    # The skips packed as they are found (what the service does): the rows of the same
    # skips, and nothing else changed.
    packer = SkipPacker(baseline)
    sunk = plan(local, remote, baseline, caps, on_skip=packer.skip, **kw)  # type: ignore[arg-type]
    assert sunk.ops == want.ops
    assert sunk.summary == want.summary
    rows = unpack(pack_rows(verified_skips(want, baseline)))
    assert sorted(unpack(packer.finish())) == sorted(rows)
    return p


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    local=st.lists(local_entries(), max_size=12),
    remote=st.lists(remote_entries(), max_size=12),
    baseline=baselines(),
    ci=st.booleans(),
    hashes=st.sampled_from([("sha1",), ()]),
    hidden=st.booleans(),
    allow_empty=st.booleans(),
)
def test_small_trees_plan_alike(
    local: list[LocalEntry],
    remote: list[RemoteEntry],
    baseline: dict[str, BaselineEntry],
    ci: bool,
    hashes: tuple[str, ...],
    hidden: bool,
    allow_empty: bool,
) -> None:
    caps = PlanCapabilities(hash_types=hashes, case_insensitive=ci)
    same(local, remote, baseline, caps, include_hidden=hidden, allow_empty_side=allow_empty)


def _big_pair() -> tuple[list[LocalEntry], list[RemoteEntry], dict[str, BaselineEntry]]:
    """20,000 files: 120 folders of 100 plus one of 8,000, and the unusual cases."""
    local: list[LocalEntry] = []
    remote: list[RemoteEntry] = []
    baseline: dict[str, BaselineEntry] = {}

    def both(path: str, lc: str | None, rc: str | None, bc: str | None = None) -> None:
        if lc is not None:
            local.append(L(path, lc))
        if rc is not None:
            remote.append(R(path, rc))
        if bc is not None:
            baseline[path] = B(path, bc)

    for d in range(120):
        folder = f"d{d:03d}/e{d % 7}"
        for f in range(100):
            p = f"{folder}/f{f:03d}.txt"
            n = (d * 100 + f) % 50
            if n == 0:
                both(p, f"new {p}", None)  # upload
            elif n == 1:
                both(p, None, f"theirs {p}")  # download
            elif n == 2:
                both(p, f"edited {p}", f"old {p}", f"old {p}")  # upload_revision
            elif n == 3:
                both(p, f"old {p}", f"theirs {p}", f"old {p}")  # download (replacement)
            elif n == 4:
                both(p, f"mine {p}", f"theirs {p}", f"old {p}")  # conflict
            elif n == 5:
                both(p, f"same {p}", None, f"same {p}")  # deleted on the remote
            elif n == 6:
                both(p, None, f"same {p}", f"same {p}")  # deleted here
            else:
                both(p, f"same {p}", f"same {p}")
    for f in range(8000):  # one big folder
        p = f"big/f{f:05d}"
        both(p, f"same {p}" if f % 97 else f"mine {p}", f"same {p}")
    for name in ("café", "naïve"):  # NFD on disk, NFC on the remote, and the reverse
        nfd = unicodedata.normalize("NFD", name)
        local.append(L(f"n/{name}.txt", "same", raw=f"n/{nfd}.txt"))
        remote.append(R(f"n/{name}.txt", "same"))
        local.append(L(f"m/{name}", "x", raw=f"m/{name}"))
        remote.append(R(f"m/{nfd}", "y"))
        local.append(L(f"twins/{name}", "nfc", raw=f"twins/{name}"))  # two names, one key
        local.append(L(f"twins/{name}", "nfd", raw=f"twins/{nfd}"))
    local += [L("twins/Read.md", "1"), L("twins/read.md", "2"), L("twins/DIR", kind="dir"),
              L("twins/DIR/x", "x"), L("twins/dir/y", "y")]  # fmt: skip
    remote += [R("twins/README", "r"), R("twins/readme", "r2"), R("a-b/c", "c"), R("a.b", "d")]
    local += [L("a", kind="dir"), L("a/b", "b"), L("a-b", kind="dir"), L("a-b/c", "c2")]
    local += [L("tc", "file here"), L("tc2", kind="dir"), L("tc2/x", "x")]
    remote += [R("tc", kind="dir"), R("tc/under", "u"), R("tc2", "a file there")]
    local += [L("gone", kind="dir"), L("gone/new.txt", "n"), L("empty", kind="dir")]
    baseline["gone"] = B("gone", None)
    local += [L("link", kind="skipped", note="symlink"), L("bad", kind="error", note="unreadable")]
    remote += [R("link/inside", "i"), R("bad/inside", "j"), R(".hidden/x", "h")]
    assert sum(1 for e in local if e.kind == "file") > 15_000
    return local, remote, baseline


@pytest.mark.parametrize("ci", [False, True], ids=["case-sensitive", "case-insensitive"])
def test_a_tree_of_20000_files_plans_alike(ci: bool) -> None:
    local, remote, baseline = _big_pair()
    caps = PlanCapabilities(hash_types=("sha1",), case_insensitive=ci)
    p = same(local, remote, baseline, caps)
    assert p is not None
    kinds = {o.kind for o in p.ops}
    assert kinds == {"mkdir", "upload", "upload_revision", "download"}
    assert p.summary["conflict"] >= 240 + 82
    assert p.summary["collision"] == (5 if ci else 2)
    assert [o.path for o in p.ops if o.kind != "mkdir"] == sorted(
        (o.path for o in p.ops if o.kind != "mkdir"), key=lambda s: s.casefold() if ci else s
    )
    # The listings in another order: the same plan.
    same(list(reversed(local)), list(reversed(remote)), baseline, caps)


@pytest.mark.parametrize("rows", [5, 250_000], ids=["read-by-folder", "held"])
def test_the_service_plans_a_real_pair_as_the_whole_tree_planner(rig: Rig, rows: int) -> None:
    """`make_plan` (the local walk, rclone's batched listings, the caches and baseline
    read a folder at a time when too big to keep) gives the ops and reports the
    whole-tree planner gives for the same listings and baseline, cold and warm."""
    assert rig.remote_dir is not None
    remote = rig.remote_dir
    nfd = unicodedata.normalize("NFD", "café")

    def put(root: Path, rel: str, text: str) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    for i in range(300):  # a folder of many files, a tenth edited here, a tenth there
        put(rig.root.path, f"big/f{i:03d}.txt", f"{i} here" if i % 10 == 1 else f"{i}")
        put(remote, f"big/f{i:03d}.txt", f"{i} there" if i % 10 == 2 else f"{i}")
    for rel in ("a/x.txt", "a-b/y.txt", "a.b", "a0/z.txt", "deep/1/2/3/f.txt", f"n/{nfd}.txt"):
        put(rig.root.path, rel, rel)
        put(remote, rel, rel)
    put(rig.root.path, "only-here/new.txt", "new")
    put(remote, "only-there/new.txt", "theirs")
    put(rig.root.path, "gone-there.txt", "same")  # in the baseline: deleted on the remote
    put(remote, "gone-here.txt", "same")  # in the baseline: deleted here
    put(rig.root.path, ".hidden/h.txt", "h")
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    svc.data.memory_rows = rows
    folder = svc.folder(rig.ctx, "", None)
    pair = Pair(str(folder.root.path), "", rig.ctx.drive_spec, "")
    same_sha = hashlib.sha256(b"same").hexdigest()
    base = [BaselineEntry(p, same_sha, "sha256", same_sha, 4, None)
            for p in ("gone-there.txt", "gone-here.txt")]  # fmt: skip
    base += [BaselineEntry(f"big/f{i:03d}.txt", hashlib.sha256(str(i).encode()).hexdigest(),
                           "sha256", hashlib.sha256(str(i).encode()).hexdigest(), len(str(i)))
             for i in range(300)]  # fmt: skip
    base += [BaselineEntry(d, None) for d in ("big", "a", "gone-folder")]
    svc.data.record_baseline(pair, base)
    for _ in ("cold", "warm"):
        got = _plans_alike(rig, svc, {b.path: b for b in base})
        assert got.summary["upload_revision"] == 30 and got.summary["download"] == 31
        assert got.summary["deleted_remote"] == 1 and got.summary["deleted_local"] == 1
    # A re-plan after a few changes, most folders as they were: bytes edited here at the
    # same size with a new mtime, a file changed there, a case twin added here, a file
    # turned into a folder here and another there.
    edited = rig.root.path / "a/x.txt"
    edited.write_text("A/X.TXT")
    os.utime(edited, ns=(edited.stat().st_atime_ns, edited.stat().st_mtime_ns + 10**9))
    put(remote, "big/f005.txt", "5 changed there")
    put(rig.root.path, "a/X.txt", "twin")
    (rig.root.path / "a.b").unlink()
    put(rig.root.path, "a.b/inner.txt", "inner")
    (remote / "a0/z.txt").unlink()
    put(remote, "a0/z.txt/inner.txt", "inner")
    clock.settle()
    got = _plans_alike(rig, svc, {b.path: b for b in base})
    assert got.summary["conflict"] == 3 and got.summary["download"] == 32


def _plans_alike(rig: Rig, svc: SyncService, baseline: dict[str, BaselineEntry]) -> StoredPlan:
    """`make_plan` of the rig's root, asserted equal to the whole-tree planner's plan of
    the same listings and baseline: ops, reports, summary and the skips' rows."""
    caps = rig.drive.capabilities()
    folder = svc.folder(rig.ctx, "", None)
    got = svc.make_plan(rig.ctx, folder, "", include_hidden=False, allow_empty_side=False)
    local = svc.index(folder, digest_type=preferred_digest(caps), include_hidden=False)
    listed, _ = svc.remote_listing(rig.drive, "")
    want = whole_tree_plan(local.entries, listed, baseline, caps)
    assert got.plan.ops == want.ops
    assert got.plan.reports == tuple(r for r in want.reports if r.kind != "skip")
    assert got.summary == dict(want.summary)
    rows = [BaselineEntry(*r) for r in verified_skips(want, baseline)]
    assert sorted(svc.data.plan_skips(got.id), key=repr) == sorted(rows, key=repr)
    return got
