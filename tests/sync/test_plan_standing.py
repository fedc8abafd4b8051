"""`SyncData.plan_standing` on both backends: the proposal made from a stored plan that
is approved, executing or succeeded is found by the plan id in its request (SQLite's
`json_extract`, PostgreSQL's `->>` on jsonb)."""

from __future__ import annotations

import pytest

from placet.store import Store
from placet.sync.model import SyncPlan
from placet.sync.stored import SyncData
from placet.sync.tables import Pair

pytestmark = pytest.mark.usefixtures("store_backend")


def _made_from(data: SyncData, plan_id: int) -> tuple[int | None, str | None]:
    standing = data.plan_standing(plan_id)
    assert standing is not None
    return standing.proposal_id, standing.proposal_status


def test_a_plan_is_overtaken_by_its_approved_proposal(store: Store) -> None:
    data = SyncData(store)
    pair = Pair("/home/owner/proj", "", "local:/tmp/x", "")
    stored = data.save_plan(
        pair=pair, root_name="proj", options={}, plan=SyncPlan((), (), {}, "l", "r"),
        baseline_generation=0, meta={}, skips=[],
    )  # fmt: skip
    assert _made_from(data, stored.id) == (None, None)
    request = {"kind": "sync", "plan_id": stored.id, "ops": []}
    rec, _ = store.create_proposal(
        kind="sync", request=request, evidence={}, reason="apply the plan",
        drive_spec="local:/tmp/x", run_id="run-a", ttl_seconds=600,
    )  # fmt: skip
    assert _made_from(data, stored.id) == (None, None)  # pending does not count
    store.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "test", "tty": False})
    assert _made_from(data, stored.id) == (rec.id, "approved")
    assert data.plan_standing(stored.id + 1000) is None
