"""`propose_sync` refuses a plan that is out of date, over MCP with the installed
`placet serve` on stdio, a real rclone `local` remote, and the owner accepting with
`placet accept --yes` in another process (docs/decisions/0024-sync-plans.md).

A plan is out of date once a newer plan of the same pair (root, local folder, drive,
remote folder; any options) exists, or once a proposal made from it succeeded or is
approved or executing: `plan_superseded`, naming the newer plan or the proposal. A plan
past the 7 days plans are kept is `expired`. Plans of other pairs never interfere, and
`sync_plan` never hands out again a plan `propose_sync` would refuse.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from mcp import Client

from placet.config import Settings
from placet.store import open_store
from placet.store.db import dt_text, utcnow
from tests.support.mcp import Workspace, connect, error_of, ok, plan_items, proposal_ops

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return ok(await client.call_tool(tool, args))


async def refused(client: Client, plan_id: int, reason: str = "again") -> dict[str, Any]:
    return error_of(await client.call_tool("propose_sync", {"plan_id": plan_id, "reason": reason}))


def accept(ws: Workspace, pid: int) -> None:
    r = ws.placet("accept", "--yes", str(pid))
    assert r.returncode == 0, r.stdout + r.stderr


async def test_a_newer_plan_of_the_same_folders_supersedes_the_older(yes_ws: Workspace) -> None:
    work = yes_ws.root / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / ".dot").write_text("hidden\n")
    async with connect(yes_ws) as client:
        p1 = (await call(client, "sync_plan", local_path="work", remote_path="work"))["plan_id"]
        # Another pair planned after p1 (other local folder) does not supersede it.
        docs = (await call(client, "sync_plan", local_path="docs", remote_path="docs"))["plan_id"]
        assert docs > p1
        first = await call(client, "propose_sync", plan_id=p1, reason="back up work")
        assert first["created"] is True

        (work / "b.txt").write_text("b\n")
        p2 = (await call(client, "sync_plan", local_path="work", remote_path="work"))["plan_id"]
        assert p2 > docs
        # Same local folder, another remote folder: another pair, planned after p2.
        copy = (await call(client, "sync_plan", local_path="work", remote_path="copy"))["plan_id"]
        assert copy > p2

        err = await refused(client, p1, reason="back up work")  # as the pending one
        assert err["code"] == "plan_superseded" and err["retryable"] is False
        assert f"plan {p2} of the same folders is newer" in err["message"]
        assert "call sync_plan again and propose the new plan" in err["message"]
        assert err["details"]["newer_plan_id"] == p2 and err["details"]["proposal_id"] is None

        for plan_id in (p2, copy, docs):  # none of them superseded by the others
            got = await call(client, "propose_sync", plan_id=plan_id, reason="sync")
            assert got["proposal"]["request"]["plan_id"] == plan_id

        # Other options, same pair: newer, so it supersedes p2 ...
        p3 = await call(client, "sync_plan", local_path="work", remote_path="work",
                        include_hidden=True)  # fmt: skip
        assert p3["plan_id"] > copy and p3["counts"]["upload"] == 3
        err = await refused(client, p2)
        assert err["code"] == "plan_superseded" and err["details"]["newer_plan_id"] == p3["plan_id"]
        # ... and planning p2's options again gives a new plan, not p2 (which is refused).
        p4 = (await call(client, "sync_plan", local_path="work", remote_path="work"))["plan_id"]
        assert p4 > p3["plan_id"]
        got = await call(client, "propose_sync", plan_id=p4, reason="sync, no hidden files")
        ops = await proposal_ops(client, got["proposal"]["id"])
        assert got["created"] is True
        assert [(o["kind"], o["remote_path"]) for o in ops if o["kind"] == "upload"] == [
            ("upload", "work/a.txt"),
            ("upload", "work/b.txt"),
        ]
        again = await call(client, "sync_plan", local_path="work", remote_path="work")
        assert again["plan_id"] == p4 and again["reused"] is True  # the newest is reused


async def test_an_applied_plan_is_refused_and_planning_again_gives_a_new_one(
    yes_ws: Workspace,
) -> None:
    work, remote = yes_ws.root / "work", yes_ws.drive / "work"
    work.mkdir()
    remote.mkdir()
    for i in range(3):
        (work / f"f{i}.txt").write_text(f"file {i}\n")
    async with connect(yes_ws) as client:
        p1 = (await call(client, "sync_plan", local_path="work", remote_path="work"))["plan_id"]
        prop = await call(client, "propose_sync", plan_id=p1, reason="back up")
        pid = prop["proposal"]["id"]
        accept(yes_ws, pid)
        got = await call(client, "proposal_get", id=pid)
        assert got["proposal"]["status"] == "succeeded"
        assert (remote / "f2.txt").read_text() == "file 2\n"

        err = await refused(client, p1, reason="old plan")
        assert err["code"] == "plan_superseded"
        assert f"proposal #{pid} made from it already applied it" in err["message"]
        assert "call sync_plan again and propose the new plan" in err["message"]
        assert err["details"] == {"plan_id": p1, "newer_plan_id": None, "proposal_id": pid,
                                  "proposal_status": "succeeded"}  # fmt: skip
        assert (await call(client, "proposal_list", status="pending"))["proposals"] == []

        # The newcomer's case: plan 1 applied, plan 2 made; plan 1 names both.
        (work / "f0.txt").write_text("edited after the sync\n")
        p2 = await call(client, "sync_plan", local_path="work", remote_path="work")
        assert p2["plan_id"] != p1
        items = await plan_items(client, p2["plan_id"])
        assert [(o["kind"], o["path"]) for o in items] == [("upload_revision", "f0.txt")]
        err = await refused(client, p1, reason="old plan")
        assert err["code"] == "plan_superseded"
        assert f"#{pid}" in err["message"] and f"plan {p2['plan_id']}" in err["message"]
        new = await call(client, "propose_sync", plan_id=p2["plan_id"], reason="publish edit")
        accept(yes_ws, new["proposal"]["id"])
        assert (remote / "f0.txt").read_text() == "edited after the sync\n"


async def test_a_plan_being_applied_or_past_retention_is_refused(
    yes_ws: Workspace, settings: Settings
) -> None:
    work = yes_ws.root / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    async with connect(yes_ws) as client:
        p1 = (await call(client, "sync_plan", local_path="work", remote_path="work"))["plan_id"]
        prop = await call(client, "propose_sync", plan_id=p1, reason="back up")
        pid = prop["proposal"]["id"]
        store = open_store(settings)
        try:
            store.accept(pid)  # approved; no executor runs it in this test
            err = await refused(client, p1)
            assert err["code"] == "plan_superseded"
            assert err["details"]["proposal_status"] == "approved"
            assert f"proposal #{pid} made from it is approved" in err["message"]
            assert "wait for it to finish, then call sync_plan again" in err["message"]

            p2 = await call(client, "sync_plan", local_path="docs", remote_path="docs")
            with store.engine.begin() as conn:  # made 8 days ago, not pruned yet
                conn.exec_driver_sql(
                    "UPDATE sync_plan SET created_at = ? WHERE id = ?",
                    (dt_text(utcnow() - timedelta(days=8)), p2["plan_id"]),
                )
        finally:
            store.close()
        err = await refused(client, p2["plan_id"])
        assert err["code"] == "expired" and "older than the 7 days" in err["message"]
        assert (await call(client, "proposal_get", id=pid))["proposal"]["status"] == "approved"
        assert (await call(client, "proposal_list", status="pending"))["proposals"] == []
