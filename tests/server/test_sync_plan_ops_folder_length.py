"""`sync_plan_ops(folder=...)` answers within the reply budget for any folder a plan can
list (the reply names the folder), and refuses a longer one as ``invalid_argument``,
never as a ``reply_too_large`` placet bug."""

from __future__ import annotations

import pytest

from placet.paths.local import MAX_LOCAL_PATH_BYTES
from tests.support.mcp import Workspace, connect, error_of, ok

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


async def test_a_folder_longer_than_any_plan_path_is_refused_as_an_argument(ws: Workspace) -> None:
    (ws.root / "work" / "a").mkdir(parents=True)
    (ws.root / "work" / "a" / "x.txt").write_text("x")
    async with connect(ws) as client:
        while True:
            r = await client.call_tool("sync_plan", {"local_path": "work", "remote_path": "work"})
            if not r.is_error or error_of(r)["code"] != "in_progress":
                break
        plan_id = ok(r)["plan_id"]
        for worst in ("\x01" * MAX_LOCAL_PATH_BYTES, "\U0001f600" * (MAX_LOCAL_PATH_BYTES // 4)):
            page = ok(
                await client.call_tool("sync_plan_ops", {"plan_id": plan_id, "folder": worst})
            )
            assert page["total"] == 0 and page["folder"] == worst
        for over in ("x" * 100_000, "é" * (MAX_LOCAL_PATH_BYTES // 2 + 1)):
            got = await client.call_tool("sync_plan_ops", {"plan_id": plan_id, "folder": over})
            err = error_of(got)
            assert err["code"] == "invalid_argument" and "list the plan by kind" in err["message"]
