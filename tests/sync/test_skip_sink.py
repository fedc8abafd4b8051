"""Skips packed while classifying (`plan`'s `on_skip`, the service's
`SkipPacker`): for every row of the planner's tables, the plan without the skip
reports is the plan with them minus those reports (same ops, other reports and
summary), and the packed rows are exactly the rows `verified_skips` gives from the
reports (no `PlanReport` per equal file); also with each single digest of a remote
entry held as a `OneDigest`, as listings hold it (the merge's inline path)."""

from __future__ import annotations

import pytest

from placet.sync.classify import SkipSink
from placet.sync.entries import OneDigest, RemoteEntry
from placet.sync.model import SyncPlan
from placet.sync.planner import plan
from placet.sync.service import SkipPacker, verified_skips
from placet.sync.tables import pack_rows, unpack
from tests.support.listings import B, L, R
from tests.sync.test_planner import DESIGN_TABLE, EDGE_CASES, Row

EXTRA = Row(
    "equal-files-and-folders",
    [L("d", kind="dir"), L("d/a", "a"), L("d/b", "b"), L("c", "new"), L("same", "s")],
    [R("d", kind="dir"), R("d/a", "a"), R("d/b", "B!"), R("same", "s")],
    {},
    [B("same", "s")],  # recorded already: its skip adds no baseline row
)


def as_listed(e: RemoteEntry) -> RemoteEntry:
    """`e` with its one digest (if it has exactly one) as a `OneDigest`."""
    if len(e.digests) != 1:
        return e
    ((t, v),) = e.digests.items()
    return RemoteEntry(e.path, e.kind, e.size, e.mtime, OneDigest(t, v))


@pytest.mark.parametrize("one", [False, True], ids=["dict-digests", "one-digest"])
@pytest.mark.parametrize("row", [*DESIGN_TABLE, *EDGE_CASES, EXTRA], ids=lambda r: r.id)
def test_packed_skips_match_the_reports_they_replace(row: Row, one: bool) -> None:
    baseline = {b.path: b for b in row.baseline}
    remote = [as_listed(e) for e in row.remote] if one else row.remote

    def planned(on_skip: SkipSink | None = None) -> SyncPlan:
        return plan(row.local, remote, baseline, row.caps,
                    include_hidden=row.include_hidden, on_skip=on_skip)  # fmt: skip

    try:
        whole = planned()
    except Exception as e:  # the same refusal either way
        with pytest.raises(type(e)):
            planned(SkipPacker(baseline).skip)
        return
    packer = SkipPacker(baseline)
    sunk = planned(packer.skip)
    assert sunk.summary == whole.summary
    assert sunk.ops == whole.ops
    sunk_skips = [r for r in whole.reports if r.kind == "skip" and r.local and r.remote
                  and not r.blocked_by]  # fmt: skip
    assert sunk.reports == tuple(r for r in whole.reports if r not in sunk_skips)
    assert unpack(packer.finish()) == unpack(pack_rows(verified_skips(whole, baseline)))
    if row is EXTRA:
        assert [r[0] for r in unpack(pack_rows(verified_skips(whole, baseline)))] == ["d", "d/a"]
