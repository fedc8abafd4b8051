"""Properties of the planner over generated trees (hypothesis).

- no op ever deletes, and no op path repeats;
- every path of either listing is classified exactly once;
- applying a plan's ops (simulated here on both listings) and recording the baseline
  the way docs/design.md section 7 says (done ops, skips verified by digest) leaves nothing
  to do: re-planning yields only `skip` (`unverified` where the remote has no digest);
- after a synced state, each kind of one-sided or two-sided change is classified as the
  table says (an oracle built from the change history, not from the table's code).
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from placet.sync import PlanCapabilities, baseline_for, plan, to_request_ops
from placet.sync.entries import BaselineEntry, LocalEntry, RemoteEntry
from placet.sync.model import OP_KINDS, SyncPlan
from tests.support.listings import MTIME, NO_HASH, SHA1, L, R, classify

Tree = dict[str, str | None]  # path -> file content, or None for a folder

names = st.sampled_from(["a", "b", "c"])
paths = st.lists(names, min_size=1, max_size=3).map("/".join)
contents = st.sampled_from(["", "x", "y", "xy", "yx", "long content"])


def _tidy(raw: Mapping[str, str | None]) -> Tree:
    """A real tree: a path with descendants is a folder; every ancestor is listed."""
    tree: Tree = {}
    for p in sorted(raw, key=lambda p: p.count("/"), reverse=True):
        if p in tree:
            continue
        tree[p] = raw[p]
        parts = p.split("/")
        for i in range(1, len(parts)):
            tree["/".join(parts[:i])] = None
    return tree


trees = st.dictionaries(paths, st.one_of(st.none(), contents), max_size=10).map(_tidy)


def local_listing(tree: Tree) -> list[LocalEntry]:
    return [L(p, c) if c is not None else L(p, kind="dir") for p, c in tree.items()]


def remote_listing(tree: Tree, mtimes: Mapping[str, str], digests: bool) -> list[RemoteEntry]:
    types = ("sha1",) if digests else ()
    return [
        R(p, c, types=types, mtime=mtimes.get(p, MTIME)) if c is not None else R(p, kind="dir")
        for p, c in tree.items()
    ]


class World:
    """Both sides, the remote's mtimes and the baseline, changed by applying ops."""

    def __init__(self, local: Tree, remote: Tree, digests: bool) -> None:
        self.local, self.remote, self.digests = dict(local), dict(remote), digests
        self.mtimes: dict[str, str] = {}
        self.baseline: dict[str, BaselineEntry] = {}
        self.clock = itertools.count(1)
        self.caps = SHA1 if digests else NO_HASH

    def plan(self, **kw: bool) -> SyncPlan:
        return plan(
            local_listing(self.local),
            remote_listing(self.remote, self.mtimes, self.digests),
            self.baseline,
            self.caps,
            **kw,
        )

    def touch_remote(self, path: str, content: str | None) -> None:
        self.remote[path] = content
        self.mtimes[path] = f"2025-03-01T00:{next(self.clock) % 60:02d}:00Z"

    def apply(self, p: SyncPlan, decisions: Mapping[str, str]) -> None:
        done: list[str] = []
        for op in to_request_ops(p, decisions):
            if op.kind == "mkdir":
                path = op.remote_path or ""
                assert self.remote.get(path.rpartition("/")[0], None) is None, "parent missing"
                self.touch_remote(path, None)
            elif op.kind in ("upload", "upload_revision"):
                path = op.remote_path or ""
                parent = path.rpartition("/")[0]
                assert not parent or (parent in self.remote and self.remote[parent] is None), (
                    f"upload of {path!r} before its parent exists"
                )
                assert (path in self.remote) == op.replace
                self.touch_remote(path, self.local[op.local_path or ""])
            else:
                path = op.local_path or ""
                assert (path in self.local) == op.replace
                self.local[path] = self.remote[op.remote_path or ""]
                parts = path.split("/")
                for i in range(1, len(parts)):
                    self.local.setdefault("/".join(parts[:i]), None)
            done.append(path)
        loc = {e.path: e for e in local_listing(self.local)}
        rem = {e.path: e for e in remote_listing(self.remote, self.mtimes, self.digests)}
        verified_skips = [r.path for r in p.reports if r.kind == "skip" and r.digest_type]
        both_dirs = [
            k for k, v in self.local.items() if v is None and self.remote.get(k, 1) is None
        ]
        for path in done + verified_skips + both_dirs:
            self.baseline[path] = baseline_for(path, loc[path], rem[path])


@settings(max_examples=300, deadline=None)
@given(local=trees, remote=trees, digests=st.booleans(), data=st.data())
def test_apply_then_replan_leaves_nothing_to_do(
    local: Tree, remote: Tree, digests: bool, data: st.DataObject
) -> None:
    w = World(local, remote, digests)
    p1 = w.plan()
    decisions = {
        c.path: data.draw(st.sampled_from(c.allowed_decisions), label=c.path) for c in p1.conflicts
    }
    w.apply(p1, decisions)
    p2 = w.plan()
    assert p2.ops == ()
    skipped_conflicts = {path for path, d in decisions.items() if d == "skip"}
    for r in p2.reports:
        if r.kind == "conflict":
            assert r.path in skipped_conflicts
        elif r.blocked_by is not None:
            assert r.blocked_by in skipped_conflicts
        else:
            assert r.kind in ("skip", "unverified"), r
            if digests or r.local is None or r.local.kind == "dir":
                assert r.kind == "skip", r
            else:
                assert r.kind == "unverified", r


# ---- every path exactly once, never a delete --------------------------------------------

fancy_names = st.sampled_from(["a", "A", "b", ".h", "caf\u00e9", "cafe\u0301"])
fancy_paths = st.lists(fancy_names, min_size=1, max_size=3).map("/".join)
fancy_trees = st.dictionaries(fancy_paths, st.one_of(st.none(), contents), max_size=10).map(_tidy)


def _nfc(p: str) -> str:
    return unicodedata.normalize("NFC", p)


@settings(max_examples=300, deadline=None)
@given(
    local=fancy_trees,
    remote=fancy_trees,
    base_tree=trees,
    ci=st.booleans(),
    hidden=st.booleans(),
    digests=st.booleans(),
)
def test_every_path_classified_once_and_never_a_delete(
    local: Tree, remote: Tree, base_tree: Tree, ci: bool, hidden: bool, digests: bool
) -> None:
    baseline = {
        p: baseline_for(
            p,
            L(p, c) if c is not None else L(p, kind="dir"),
            R(p, c) if c is not None else R(p, kind="dir"),
        )
        for p, c in base_tree.items()
    }
    caps = PlanCapabilities(hash_types=("sha1",) if digests else (), case_insensitive=ci)
    p = plan(
        local_listing(local),
        remote_listing(remote, {}, digests),
        baseline,
        caps,
        include_hidden=hidden,
        allow_empty_side=True,
    )
    assert {o.kind for o in p.ops} <= set(OP_KINDS)
    classified = [o.path for o in p.ops] + [r.path for r in p.reports]
    assert len(classified) == len(set(classified)), "a path classified twice"
    listed = {
        _nfc(x)
        for x in [*local, *remote]
        if hidden or not any(c.startswith(".") for c in x.split("/"))
    }
    if ci:
        assert {x.casefold() for x in listed} == {x.casefold() for x in classified}
    else:
        assert listed == set(classified)
    assert sum(p.summary[k] for k in OP_KINDS) == len(p.ops)
    for c in p.conflicts:
        assert c.allowed_decisions and c.conflict_kind


# ---- the table, from a change history --------------------------------------------------

CHANGES = {
    # change: (local after, remote after, expected with digests, expected without)
    "none": ("old", "old", "skip", "unverified"),
    "edit_local": ("new here", "old", "upload_revision", "upload_revision"),
    "edit_remote": ("old", "new there", "download", "download"),
    "edit_both_same": ("same new", "same new", "skip", "conflict:content_differs"),
    "edit_both_differently": (
        "mine!",
        "theirs",
        "conflict:content_differs",
        "conflict:content_differs",
    ),
    "delete_local": (None, "old", "deleted_local", "deleted_local"),
    "delete_remote": ("old", None, "deleted_remote", "deleted_remote"),
    "delete_local_edit_remote": (
        None,
        "new there",
        "conflict:deleted_here_edited_there",
        "conflict:deleted_here_edited_there",
    ),
    "edit_local_delete_remote": (
        "new here",
        None,
        "conflict:edited_here_deleted_there",
        "conflict:edited_here_deleted_there",
    ),
    "delete_both": (None, None, None, None),
}


@settings(max_examples=200, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from(["f1", "f2", "d/f3", "d/f4", "d/e/f5"]),
        st.sampled_from(sorted(CHANGES)),
        min_size=1,
    ),
    digests=st.booleans(),
)
def test_changes_after_a_sync_follow_the_table(changes: dict[str, str], digests: bool) -> None:
    # a first sync that uploads everything, so the baseline comes from done ops even
    # where the remote has no digest (unverified skips record none)
    w = World(_tidy(dict.fromkeys(changes, "old")), {}, digests)
    w.apply(w.plan(), {})
    assert w.local == w.remote
    for path, change in changes.items():
        after_local, after_remote, *_ = CHANGES[change]
        if after_local is None:
            del w.local[path]
        else:
            w.local[path] = after_local
        if after_remote is None:
            del w.remote[path]
        elif after_remote != "old":
            w.touch_remote(path, after_remote)
    got = classify(w.plan(allow_empty_side=True))
    for path, change in changes.items():
        expected = CHANGES[change][2 if digests else 3]
        assert got.get(path) == expected, (path, change)
