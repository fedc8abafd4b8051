"""Every reply fits a host, and so does the agent's whole task
(docs/decisions/0015-reply-budget.md).

Through the official MCP client and a real `placet serve` (a local-folder drive): a sync
of generated files is planned and proposed as the tool descriptions say (sync_plan, then
propose_sync with the plan id and a decision per conflict), and every reply the agent
reads is added up as a host hands it to the model (the structured content as compact
JSON; an error's text): at most 20,000 bytes with no conflict, 60,000 with 50 conflicts,
however many files. Then every reply of every tool is measured (text content and
structured content each, as UTF-8 JSON) against the 40,000-byte budget; the plan's ops
listed by kind are the proposal's, each once; the owner accepts with `placet accept`
and the ops then paged are the ops that ran. The same for 20,000 files up to the
owner's accept (applying 20,000 and 100,000 files is timed in bench/reply_budget.py).
Every tool of the catalogue is called on large inputs (long names, deep paths, big
folders) and fits, and so does `tools/list`, with an output schema for every tool that
the client validates each of those results against.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from placet.config import load_settings
from placet.errors import ConfigError
from placet.server.framework import ToolOutput, success_result
from tests.support.budget import (
    BUDGET,
    Measured,
    check_ran,
    make_conflicts,
    make_tree,
    plan_and_propose,
    tools_list_bytes,
)
from tests.support.mcp import Workspace, connect, error_payload

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

TASK_BUDGET = 20_000
"""Bytes an agent reads to plan and propose a sync with no conflict, however large."""
TASK_BUDGET_50_CONFLICTS = 60_000


async def _changes(m: Measured, path: str, anchor: str) -> list[dict[str, object]]:
    pages = await m.pages("drive_changes", path=path, since_anchor=anchor, changes="all")
    return [c for p in pages for c in p["changes"]]


async def test_sync_of_300_files_fits_every_reply_and_runs_the_ops_paged(yes_ws: Workspace) -> None:
    make_tree(yes_ws.root / "big", 300, per_dir=100)
    async with connect(yes_ws) as client:
        m = Measured(client)
        anchor = (await m.call("drive_changes", path=""))["anchor"]
        proposed = await plan_and_propose(m, "big", "big", 300)
        assert proposed.task_bytes <= TASK_BUDGET
        assert proposed.plan_dirs == [".", "d0000", "d0001", "d0002"]
        r = yes_ws.placet("accept", "--yes", str(proposed.pid))
        assert r.returncode == 0, r.stderr
        await check_ran(m, proposed, "big", yes_ws.drive)
        added = await _changes(m, "", anchor)
        assert sorted(c["path"] for c in added) == sorted(
            ["big", *(f"big/d000{i}" for i in range(3)), *(f"big/{p}" for p in proposed.plan_paths)]
        )
        assert {c["change"] for c in added} == {"added"}
    assert m.calls["proposal_ops"] >= 4  # 304 ops do not fit one reply: paged, twice
    assert m.calls["sync_plan"] == 1 and "local_index" not in m.calls


async def test_a_sync_with_50_conflicts_costs_at_most_60_kb_and_runs_as_decided(
    yes_ws: Workspace,
) -> None:
    paths = make_tree(yes_ws.root / "big", 600, per_dir=100)
    make_conflicts(yes_ws.drive / "big", paths[::12])  # 50, across the folders
    async with connect(yes_ws) as client:
        m = Measured(client)
        proposed = await plan_and_propose(m, "big", "big", 600, conflicts=paths[::12])
        assert proposed.task_bytes <= TASK_BUDGET_50_CONFLICTS
        r = yes_ws.placet("accept", "--yes", str(proposed.pid))
        assert r.returncode == 0, r.stderr
        await check_ran(m, proposed, "big", yes_ws.drive)


@pytest.mark.slow
@pytest.mark.parametrize("conflicts", [0, 50])
async def test_planning_and_proposing_20000_files_fits_the_agents_context(
    yes_ws: Workspace, conflicts: int
) -> None:
    paths = make_tree(yes_ws.root / "big", 20_000)
    (yes_ws.drive / "big").mkdir()
    chosen = paths[:: 20_000 // conflicts] if conflicts else []
    make_conflicts(yes_ws.drive / "big", chosen)
    async with connect(yes_ws) as client:
        m = Measured(client)
        anchor = (await m.call("drive_changes", path="big"))["anchor"]
        proposed = await plan_and_propose(m, "big", "big", 20_000, conflicts=chosen)
        assert proposed.task_bytes <= (TASK_BUDGET_50_CONFLICTS if conflicts else TASK_BUDGET)
        made = {p.split("/")[0] for p in chosen}  # folders the conflicts' files are in
        assert len(proposed.paged) == 20_000 + 80 - len(made)  # 80 folders of 250 files
        make_tree(yes_ws.drive / "big" / "copied", 20_000)  # 20,080 changes to page through
        changes = await _changes(m, "big", anchor)
        assert len(changes) == 20_000 + 81 and {c["change"] for c in changes} == {"added"}
    assert all(t <= BUDGET and s <= BUDGET for t, s in m.largest.values())


async def test_every_tool_of_the_catalogue_fits_on_large_inputs(yes_ws: Workspace) -> None:
    """Long names (200 bytes), 40-level remote paths (whose missing parents would be
    74 KB of evidence), 300-entry folders, 16 KiB of control characters to read. The
    official client checks each structured result against its tool's output schema."""
    long = "n" * 200
    for i in range(300):
        (yes_ws.root / "wide").mkdir(exist_ok=True)
        (yes_ws.root / "wide" / f"{i:03d}{long}.txt").write_text(f"{i}\n")
        (yes_ws.drive / "wide").mkdir(exist_ok=True)
        (yes_ws.drive / "wide" / f"{i:03d}{long}-remote.txt").write_text(f"remote {i}\n")
    (yes_ws.drive / "controls.txt").write_bytes(b"\x01" * 16384)
    deep = "/".join(f"{i:02d}" + "d" * 88 for i in range(40))  # 3,639 bytes
    async with connect(yes_ws) as client:
        m = Measured(client)
        listed = await client.list_tools()
        tools = {t.name for t in listed.tools}
        assert all(t.output_schema for t in listed.tools)
        assert tools_list_bytes(listed) <= BUDGET
        await m.call("roots_list")
        listed = [e for p in await m.pages("drive_list", path="wide") for e in p["entries"]]
        assert len(listed) == len({e["name"] for e in listed}) == 300
        read = await m.call("drive_read", path="controls.txt")
        assert read["truncated"] is True and 0 < read["bytes_returned"] < 16384
        anchor = (await m.call("drive_changes", path=""))["anchor"]
        up = await m.call("propose_upload", local_path="hello.txt", remote_parent=deep,
                          reason="deep")  # fmt: skip
        ev = up["proposal"]["evidence"]
        assert len(ev["missing_parents"]) == 20 and ev["missing_parents_count"] == 40
        await m.call("propose_mkdir", remote_parent=deep, name="x" * 200, reason="deep folder")
        down = await m.call("propose_download", remote_path=f"wide/000{long}-remote.txt",
                            local_path=f"docs/{long}.txt", reason="read it")  # fmt: skip
        pages = await m.pages("local_index", path="wide", entries="all")
        assert len([e for p in pages for e in p["entries"]]) == 300
        plan = await m.call("sync_plan", local_path="wide", remote_path="wide")
        assert plan["counts"]["upload"] == 300 and plan["counts"]["download"] == 300
        items = [i for p in await m.pages("sync_plan_ops", plan_id=plan["plan_id"])
                 for i in p["items"]]  # fmt: skip
        assert sorted(i["kind"] for i in items) == ["download"] * 300 + ["upload"] * 300
        assert len({i["path"] for i in items}) == 600  # each once
        prop = await m.call("propose_sync", plan_id=plan["plan_id"], reason="both ways")
        pid = prop["proposal"]["id"]
        assert prop["proposal"]["sync"]["by_kind"]["download"]["count"] == 300
        pages = await m.pages("proposal_ops", id=pid)
        assert sum(len(p["ops"]) for p in pages) == 600
        cursor = pages[0]["next_cursor"]
        other_id = (await m.call("proposal_list"))["proposals"][1]["id"]
        altered = cursor[:-30] + ("A" if cursor[-30] != "A" else "B") + cursor[-29:]
        for bad_id, bad_cursor in ((other_id, cursor), (pid, altered), (pid, "o1.W10")):
            bad = await client.call_tool("proposal_ops", {"id": bad_id, "cursor": bad_cursor})
            assert error_payload(bad)["code"] == "invalid_cursor", bad_cursor
        await m.call("proposal_get", id=pid)
        await m.call("proposal_wait", id=up["proposal"]["id"], timeout_s=0)
        single = await m.call("proposal_ops", id=up["proposal"]["id"])  # one op, no cursor
        assert [v["op"]["kind"] for v in single["ops"]] == ["upload"]
        assert single["op_count"] == 1 and single["next_cursor"] is None
        await m.pages("proposal_list")
        await m.call("proposal_withdraw", id=down["proposal"]["id"])
        await m.pages("drive_changes", path="", since_anchor=anchor, changes="all")
    assert set(m.calls) == tools  # every tool of the catalogue was measured


def test_a_reply_over_the_budget_is_refused_not_sent() -> None:
    class Big(ToolOutput):
        text: str

    refused = success_result(Big(text="x" * 40_000), 40_000)
    assert error_payload(refused)["code"] == "reply_too_large"
    fits = success_result(Big(text="x" * 39_000), 40_000)
    assert not fits.is_error and len(fits.content) == 1  # the summary only, no JSON copy


async def test_a_smaller_budget_gives_smaller_pages(yes_ws: Workspace) -> None:
    yes_ws.write_config(reply_budget_bytes=32_000)
    make_tree(yes_ws.root / "big", 300, per_dir=100)
    async with connect(yes_ws) as client:
        m = Measured(client, budget=32_000)
        pages = await m.pages("local_index", path="big", entries="all")
        assert len(pages) >= 2 and sum(len(p["entries"]) for p in pages) == 303
    assert 28_000 < m.largest["local_index"][1] <= 32_000  # filled by bytes, not by count


def test_the_budget_setting_is_bounded(tmp_path: Path) -> None:
    for bad in (31_999, 1_000_001):
        (tmp_path / "config.toml").write_text(f"reply_budget_bytes = {bad}\n")
        with pytest.raises(ConfigError, match="reply_budget_bytes"):
            load_settings({"PLACET_HOME": str(tmp_path)})
