"""The sync tools at their edges, over MCP with the installed `placet serve` on stdio and
a real rclone `local` remote: empty folders page without crashing, downloads that would
replace local files are refused at propose time under the default `new-only` policy (and
marked in the plan), the plan counts the mkdir of a missing remote folder as the proposal
holds it, and every paging tool answers a bad cursor with `invalid_cursor`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from tests.support.mcp import Workspace, connect, error_of, ok, proposal_ops

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return ok(await client.call_tool(tool, args))


def accept(ws: Workspace, pid: int) -> None:
    r = ws.placet("accept", "--yes", str(pid))
    assert r.returncode == 0, r.stdout + r.stderr


def allow_overwrite(ws: Workspace, root_path: str) -> None:
    with (ws.home / "config.toml").open("a") as f:
        f.write(f'[roots.{json.dumps(root_path)}]\ndownloads = "allow-overwrite"\n')


async def test_local_index_and_sync_plan_of_folders_with_nothing_to_list(yes_ws: Workspace) -> None:
    (yes_ws.root / "empty").mkdir()
    (yes_ws.root / "dots").mkdir()
    (yes_ws.root / "dots" / ".hidden").write_text("x")
    (yes_ws.drive / "empty").mkdir()
    async with connect(yes_ws) as client:
        for path in ("empty", "dots"):
            got = await call(client, "local_index", path=path)
            assert got["entries"] == [] and got["next_cursor"] is None
            assert got["total_entries"] == 0
        hidden = await call(client, "local_index", path="dots", include_hidden=True)
        assert [e["path"] for e in hidden["examples"]["file"]] == [".hidden"]
        plan = await call(client, "sync_plan", local_path="empty", remote_path="empty")
        assert plan["examples"] == {} and plan["conflicts"] == []
        assert plan["conflicts_cursor"] is None
        items = await call(client, "sync_plan_ops", plan_id=plan["plan_id"])
        assert items["items"] == [] and items["next_cursor"] is None
    bare = yes_ws.base / "bare"
    bare.mkdir()
    async with Client(yes_ws.params(roots=[str(bare)])) as client:  # a fresh, empty root
        got = await call(client, "local_index", path="")
        assert got["entries"] == [] and got["next_cursor"] is None


async def test_plan_counts_the_mkdir_of_a_missing_remote_folder(yes_ws: Workspace) -> None:
    fresh = yes_ws.root / "fresh"
    (fresh / "sub").mkdir(parents=True)
    (fresh / "a.txt").write_text("a\n")
    (fresh / "sub" / "b.txt").write_text("b\n")
    (yes_ws.root / "hollow").mkdir()
    async with connect(yes_ws) as client:
        plan = await call(client, "sync_plan", local_path="fresh", remote_path="newfolder")
        assert plan["remote_folder_missing"] is True
        assert plan["counts"]["mkdir"] == 2 and plan["counts"]["upload"] == 2
        assert [d["path"] for d in plan["examples"]["mkdir"]] == [".", "sub"]
        prop = await call(client, "propose_sync", plan_id=plan["plan_id"], reason="back up")
        ops = await proposal_ops(client, prop["proposal"]["id"])
        assert len(ops) == plan["counts"]["mkdir"] + plan["counts"]["upload"]
        assert ops[0]["kind"] == "mkdir" and ops[0]["remote_path"] == "newfolder"

        empty = await call(client, "sync_plan", local_path="hollow", remote_path="hollowed")
        assert empty["remote_folder_missing"] is True and empty["counts"]["mkdir"] == 1
        assert [d["path"] for d in empty["examples"]["mkdir"]] == ["."]
        prop = await call(client, "propose_sync", plan_id=empty["plan_id"], reason="mirror")
        ops = await proposal_ops(client, prop["proposal"]["id"])
        assert [(o["kind"], o["remote_path"]) for o in ops] == [("mkdir", "hollowed")]
        accept(yes_ws, prop["proposal"]["id"])
        assert (yes_ws.drive / "hollowed").is_dir()


async def test_downloads_replacing_local_files_are_refused_under_new_only(
    yes_ws: Workspace,
) -> None:
    work, remote = yes_ws.root / "work", yes_ws.drive / "work"
    work.mkdir()
    remote.mkdir()
    (work / "same.txt").write_text("same\n")
    (remote / "same.txt").write_text("same\n")
    (work / "both.txt").write_text("local side\n")
    (remote / "both.txt").write_text("remote side\n")
    (work / "new.txt").write_text("new here\n")
    async with connect(yes_ws) as client:
        plan = await call(client, "sync_plan", local_path="work", remote_path="work")
        (conflict,) = plan["conflicts"]
        assert conflict["path"] == "both.txt" and conflict["blocked_by_policy"] is True
        assert plan["download_policy"] == "new-only" and plan["policy_note"]
        err = error_of(await client.call_tool("propose_sync", {
            "plan_id": plan["plan_id"], "reason": "x", "decisions": {"both.txt": "keep_remote"}
        }))  # fmt: skip
        assert err["code"] == "refused" and err["details"]["keep_remote_paths"] == ["both.txt"]
        root_path = err["details"]["root_path"]
        assert f'[roots."{root_path}"]' in err["message"]
        assert 'downloads = "allow-overwrite"' in err["message"] and "skip" in err["message"]
        assert (await call(client, "proposal_list"))["proposals"] == []
        prop = await call(client, "propose_sync", plan_id=plan["plan_id"], reason="sync",
                          decisions={"both.txt": "skip"})  # fmt: skip
        accept(yes_ws, prop["proposal"]["id"])  # records the baseline of same.txt

        (remote / "same.txt").write_text("edited on the drive\n")
        plan = await call(client, "sync_plan", local_path="work", remote_path="work")
        (op,) = plan["examples"]["download"]
        assert op["path"] == "same.txt" and op["blocked_by_policy"] is True
        assert plan["downloads_blocked_by_policy"] == 1
        err = error_of(await client.call_tool("propose_sync", {
            "plan_id": plan["plan_id"], "reason": "x", "decisions": {"both.txt": "skip"}
        }))  # fmt: skip
        assert err["code"] == "refused" and err["details"]["paths"] == ["same.txt"]

    allow_overwrite(yes_ws, root_path)
    async with connect(yes_ws) as client:
        plan = await call(client, "sync_plan", local_path="work", remote_path="work")
        (op,) = plan["examples"]["download"]
        assert "blocked_by_policy" not in op and plan["policy_note"] is None
        prop = await call(client, "propose_sync", plan_id=plan["plan_id"], reason="pull",
                          decisions={"both.txt": "keep_remote"})  # fmt: skip
        accept(yes_ws, prop["proposal"]["id"])
    assert (work / "same.txt").read_text() == "edited on the drive\n"
    assert (work / "both.txt").read_text() == "remote side\n"


async def test_every_paging_tool_answers_a_bad_cursor_with_invalid_cursor(
    yes_ws: Workspace,
) -> None:
    async with connect(yes_ws) as client:
        plan = await call(client, "sync_plan", local_path="docs", remote_path="shared")
        for tool, args in (
            ("local_index", {"path": "docs"}),
            ("sync_plan_ops", {"plan_id": plan["plan_id"]}),
            ("drive_changes", {"path": ""}),
            ("drive_list", {"path": ""}),
            ("proposal_list", {}),
        ):
            err = error_of(await client.call_tool(tool, {**args, "cursor": "bogus"}))
            assert err["code"] == "invalid_cursor", (tool, err)
            assert "without a cursor" in err["message"] and "restart" in err["message"], tool
