"""A remote folder the drive refuses to list (a local-folder drive's folder of mode
000, planned by a `placet serve` without the capabilities that let root read anything)
is reported as an `error` naming ``permission_denied``, and nothing beneath it is planned
or inferred: rclone's local backend lists such a folder as empty, with no error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from tests.support.mcp import CLIENT_INFO, PLACET, Workspace, error_of, ok, plan_items

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

NO_DAC = "--bounding-set=-dac_override,-dac_read_search"
"""setpriv's option that leaves root (uid 0) unable to read what its mode forbids."""


async def plan(client: Client, **args: Any) -> CallToolResult:
    """`sync_plan(**args)`, called again while it answers `in_progress`."""
    while True:
        r = await client.call_tool("sync_plan", args)
        if not (r.is_error and error_of(r)["code"] == "in_progress"):
            return r


def unprivileged(ws: Workspace) -> StdioServerParameters:
    return StdioServerParameters(
        command="setpriv",
        args=[NO_DAC, PLACET, "serve", "--root", str(ws.root)],
        env=ws.env,
        cwd=str(ws.base),
    )


@pytest.fixture
def locked(ws: Workspace) -> Iterator[Path]:
    """`work` on both sides; `work/locked` holds empty folders on both, a file here and
    one there; the remote's `work/locked` is mode 000 (made readable at teardown)."""
    work, remote = ws.root / "work", ws.drive / "work"
    for rel in ("locked/a/b", "locked/c", "open"):
        (work / rel).mkdir(parents=True)
        (remote / rel).mkdir(parents=True)
    (work / "locked/a/only-here").mkdir()
    (work / "locked/here.txt").write_text("here\n")
    (remote / "locked/theirs.txt").write_text("theirs\n")
    (remote / "locked").chmod(0)
    yield remote / "locked"
    (remote / "locked").chmod(0o755)


async def test_a_remote_folder_the_drive_refuses_is_an_error_and_nothing_beneath_is_planned(
    ws: Workspace, locked: Path
) -> None:
    async with Client(unprivileged(ws), client_info=CLIENT_INFO) as client:
        got = ok(await plan(client, local_path="work", remote_path="work"))
        counts = got["counts"]
        assert counts["mkdir"] == counts["upload"] == counts["download"] == 0, counts
        assert counts["error"] == 6, counts
        errors = await plan_items(client, got["plan_id"], kind="error")
    first, *beneath = errors
    assert first["path"] == "locked" and "permission denied" in first["reason"]
    assert "cannot list remote folder 'work/locked'" in first["reason"]
    assert sorted(e["path"] for e in beneath) == [
        "locked/a", "locked/a/b", "locked/a/only-here", "locked/c", "locked/here.txt"
    ]  # fmt: skip
    assert all(e["blocked_by"] == "locked" for e in beneath)


async def test_a_synced_remote_folder_the_drive_refuses_is_refused_with_its_cause(
    ws: Workspace, locked: Path
) -> None:
    async with Client(unprivileged(ws), client_info=CLIENT_INFO) as client:
        err = error_of(await plan(client, local_path="work/locked", remote_path="work/locked"))
    assert err["code"] == "permission_denied", err
    assert "grant read access" in err["message"]


async def test_drive_changes_and_drive_list_refuse_a_folder_the_drive_refuses(
    ws: Workspace, locked: Path
) -> None:
    """A folder that turned unreadable since the anchor is refused, not reported with
    everything beneath it deleted; listing it is refused, not answered empty."""
    locked.chmod(0o755)
    async with Client(unprivileged(ws), client_info=CLIENT_INFO) as client:
        anchor = ok(await client.call_tool("drive_changes", {"path": "work"}))["anchor"]
        locked.chmod(0)
        again = {"path": "work", "since_anchor": anchor}
        err = error_of(await client.call_tool("drive_changes", again))
        assert err["code"] == "permission_denied", err
        listed = error_of(await client.call_tool("drive_list", {"path": "work/locked"}))
        assert listed["code"] == "permission_denied", listed
        shown = ok(await client.call_tool("drive_list", {"path": "work"}))
        assert "locked" in str(shown)


async def test_a_folder_neither_side_may_read_is_one_error(ws: Workspace) -> None:
    work, remote = ws.root / "work", ws.drive / "work"
    for side in (work, remote):
        (side / "both" / "in").mkdir(parents=True)
        (side / "both").chmod(0)
    try:
        async with Client(unprivileged(ws), client_info=CLIENT_INFO) as client:
            got = ok(await plan(client, local_path="work", remote_path="work"))
            errors = await plan_items(client, got["plan_id"], kind="error")
    finally:
        for side in (work, remote):
            (side / "both").chmod(0o755)
    assert [e["path"] for e in errors] == ["both"], errors
