"""Every reply fits a host (docs/decisions.md, "Every reply fits a host").

Through the official MCP client and a real `placet serve` (a local-folder drive): a sync
of 300 generated files is indexed, planned, proposed, read back and paged through, every
reply of every tool measured (text content and structured content each, as UTF-8 JSON)
against the 40,000-byte budget; paging through the ops returns each op once, with the
plan's paths; the owner accepts with `placet accept` and the ops then paged are the ops
that ran. The same for 20,000 files up to the owner's accept (applying 20,000 files is
timed in bench/reply_budget.py, with the 100,000-file case). Every tool of the catalogue
is called on large inputs (long names, deep paths, big folders) and fits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from budget_scenario import BUDGET, Measured, check_ran, make_tree, plan_and_propose
from mcp_fixtures import Workspace, connect, make_workspace

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ws(tmp_path: Path, placet_home: Path) -> Workspace:
    w = make_workspace(tmp_path, placet_home)
    w.write_config(allow_yes=True)
    return w


async def _changes(m: Measured, path: str, anchor: str) -> list[dict[str, object]]:
    return [c for p in await m.pages("drive_changes", path=path, since_anchor=anchor)
            for c in p["changes"]]  # fmt: skip


async def test_sync_of_300_files_fits_every_reply_and_runs_the_ops_paged(ws: Workspace) -> None:
    make_tree(ws.root / "big", 300, per_dir=100)
    async with connect(ws) as client:
        m = Measured(client)
        anchor = (await m.call("drive_changes", path=""))["anchor"]
        proposed = await plan_and_propose(m, "big", "big", 300)
        assert proposed.plan_dirs == [".", "d0000", "d0001", "d0002"]
        r = ws.placet("accept", "--yes", str(proposed.pid))
        assert r.returncode == 0, r.stderr
        await check_ran(m, proposed, "big", ws.drive)
        added = await _changes(m, "", anchor)
        assert sorted(c["path"] for c in added) == sorted(
            ["big", *(f"big/d000{i}" for i in range(3)), *(f"big/{p}" for p in proposed.plan_paths)]
        )
        assert {c["change"] for c in added} == {"added"}
    print(m.calls, m.largest)
    assert m.calls["proposal_ops"] >= 4  # 304 ops do not fit one reply: paged, twice
    assert m.calls["sync_plan"] >= 3 and m.calls["local_index"] >= 2


@pytest.mark.slow
async def test_sync_of_20000_files_fits_every_reply(ws: Workspace) -> None:
    make_tree(ws.root / "big", 20_000)
    (ws.drive / "big").mkdir()
    async with connect(ws) as client:
        m = Measured(client)
        anchor = (await m.call("drive_changes", path="big"))["anchor"]
        proposed = await plan_and_propose(m, "big", "big", 20_000)
        assert len(proposed.paged) == 20_000 + 80  # 80 folders of 250 files
        make_tree(ws.drive / "big" / "copied", 20_000)  # 20,080 changes to page through
        added = await _changes(m, "big", anchor)
        assert len(added) == 20_000 + 81 and {c["change"] for c in added} == {"added"}
    assert all(t <= BUDGET and s <= BUDGET for t, s in m.largest.values())
