"""Waiting for the owner, end to end: proposal_wait against decisions made by other
processes (`placet accept --yes`, `placet discard`), its timeout, expiry, the sweeper,
and an accepted upload visible through drive_list with the agent's own digest.

A test that needs the server to see a phase (pending, approved, each op) holds it until
the progress notification that shows it has arrived (`Progress.wait_for`), never for a
fixed time, so a slow machine only makes it slower.
"""

from __future__ import annotations

import threading
import time
from itertools import pairwise
from typing import Any

import anyio
import pytest

from placet.config import load_settings
from placet.store import LeaseHolder, open_store
from tests.support.mcp import Workspace, connect, ok, sha256_of, snapshot
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.anyio


@pytest.fixture
def sweeping_ws(ws: Workspace) -> Workspace:
    """`ws` allowing `placet accept --yes`, its sweep every 0.5 s."""
    ws.write_config(allow_yes=True, sweep_seconds=0.5)
    return ws


UPLOAD = {"local_path": "hello.txt", "remote_parent": "shared", "reason": "publish the greeting"}


PHASE_TIMEOUT_S = 30.0


class Progress:
    """The progress notifications of one call as they arrive (the client's callback),
    and a way for a worker thread to wait for one that says something."""

    def __init__(self) -> None:
        self.items: list[tuple[float, float | None, str | None]] = []
        self._cond = threading.Condition()

    async def __call__(self, p: float, total: float | None, msg: str | None) -> None:
        with self._cond:
            self.items.append((p, total, msg))
            self._cond.notify_all()

    def wait_for(self, text: str) -> None:
        """Block (a worker thread) until a notification's message contains `text`."""
        with self._cond:
            seen = self._cond.wait_for(
                lambda: any(text in (m or "") for _, _, m in self.items), PHASE_TIMEOUT_S
            )
        assert seen, f"no progress saying {text!r} within {PHASE_TIMEOUT_S} s: {self.items}"


async def test_wait_returns_when_another_process_accepts_and_the_upload_lands(
    sweeping_ws: Workspace,
) -> None:
    on_progress = Progress()
    progress = on_progress.items

    async with connect(sweeping_ws) as client:
        proposed = ok(await client.call_tool("propose_upload", UPLOAD))["proposal"]
        pid = proposed["id"]
        local_digest = proposed["evidence"]["local"]["sha256"]
        assert not (sweeping_ws.drive / "shared" / "hello.txt").exists()  # inert until accepted
        accepted: list[Any] = []
        async with anyio.create_task_group() as tg:

            def accept_when_waiting() -> Any:
                on_progress.wait_for("waiting for the owner")
                return sweeping_ws.placet("accept", str(pid), "--yes")

            async def accept() -> None:
                accepted.append(await anyio.to_thread.run_sync(accept_when_waiting))

            tg.start_soon(accept)
            started = time.monotonic()
            waited = ok(
                await client.call_tool(
                    "proposal_wait", {"id": pid, "timeout_s": 45}, progress_callback=on_progress
                )
            )
            elapsed = time.monotonic() - started
        assert accepted[0].returncode == 0, accepted[0].stderr
        assert waited["timed_out"] is False and waited["proposal"]["status"] == "succeeded"
        assert waited["proposal"]["decided"] is True and elapsed < 45
        assert [o["outcome"] for o in waited["op_results"]] == ["done"]
        assert progress and all(msg and f"proposal {pid}" in msg for _, _, msg in progress)
        # one scale for the whole wait (total = 1 op + 1), strictly increasing (MCP spec)
        assert all(total == 2 for _, total, _ in progress)
        values = [p for p, _, _ in progress]
        assert all(a < b for a, b in pairwise(values)), progress
        assert any("waiting for the owner" in (m or "") for _, _, m in progress)
        assert progress[-1][0] == 2 and "succeeded" in (progress[-1][2] or "")
        listing = ok(
            await client.call_tool("drive_list", {"path": "shared", "include_digest": True})
        )
    entry = {e["name"]: e for e in listing["entries"]}["hello.txt"]
    assert entry["digests"]["sha256"] == local_digest == sha256_of(sweeping_ws.root / "hello.txt")
    assert (sweeping_ws.drive / "shared" / "hello.txt").read_bytes() == (
        sweeping_ws.root / "hello.txt"
    ).read_bytes()


async def test_wait_times_out_with_status_pending(sweeping_ws: Workspace) -> None:
    seen: list[float] = []

    async def on_progress(p: float, total: float | None, msg: str | None) -> None:
        seen.append(p)

    async with connect(sweeping_ws) as client:
        pid = ok(await client.call_tool("propose_upload", UPLOAD))["proposal"]["id"]
        waited = ok(
            await client.call_tool(
                "proposal_wait", {"id": pid, "timeout_s": 3}, progress_callback=on_progress
            )
        )
        assert waited["timed_out"] is True and waited["proposal"]["status"] == "pending"
        assert (
            waited["waited_s"] >= 3
            and "call again"
            in (await client.call_tool("proposal_wait", {"id": pid, "timeout_s": 0}))
            .content[0]
            .text
        )
        assert seen and all(a < b for a, b in pairwise(seen)) and seen[-1] < 1, seen


async def test_wait_reports_a_discard_made_by_the_cli(sweeping_ws: Workspace) -> None:
    before = snapshot(sweeping_ws.drive)
    async with connect(sweeping_ws) as client:
        mkdir = {"remote_parent": "", "name": "new", "reason": "a folder for reports"}
        pid = ok(await client.call_tool("propose_mkdir", mkdir))["proposal"]["id"]

        on_progress = Progress()

        def discard_when_waiting() -> None:
            on_progress.wait_for("waiting for the owner")
            r = sweeping_ws.placet("discard", str(pid))
            assert r.returncode == 0, r.stderr

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, discard_when_waiting)
            waited = ok(
                await client.call_tool(
                    "proposal_wait", {"id": pid, "timeout_s": 30}, progress_callback=on_progress
                )
            )
        assert waited["proposal"]["status"] == "discarded" and waited["timed_out"] is False
        assert waited["proposal"]["resolved_by"] == "owner"
    assert snapshot(sweeping_ws.drive) == before


def _expired_mkdir(ws: Workspace, name: str) -> int:
    """A mkdir proposal made straight through the store with a 1 s TTL (agents cannot ask
    for less than 5 minutes); it is visible to any server on the same drive."""
    settings = load_settings()
    store = open_store(settings)
    try:
        rec, _ = propose_folder(
            store,
            name,
            reason="short-lived",
            drive_spec=str(ws.drive),
            run_id="another-session",
            ttl=1,
        )
        return rec.id
    finally:
        store.close()


async def test_wait_reports_expired_without_waiting_for_the_sweeper(sweeping_ws: Workspace) -> None:
    sweeping_ws.write_config(allow_yes=True, sweep_seconds=3600)  # the timer will not run in time
    pid = _expired_mkdir(sweeping_ws, "fleeting")
    async with connect(sweeping_ws) as client:
        waited = ok(await client.call_tool("proposal_wait", {"id": pid, "timeout_s": 20}))
        assert waited["proposal"]["status"] == "expired" and waited["timed_out"] is False
        assert waited["waited_s"] < 20


async def test_the_server_sweeps_on_a_timer(sweeping_ws: Workspace) -> None:
    async with connect(sweeping_ws) as client:
        ok(await client.call_tool("roots_list", {}))  # the server is up, its sweeper running
        pid = _expired_mkdir(sweeping_ws, "swept")
        deadline = time.monotonic() + 30
        status = "pending"
        while status == "pending" and time.monotonic() < deadline:
            await anyio.sleep(0.25)
            store = open_store(load_settings())  # read directly: no tool call expires it
            status = store.get(pid).status
            store.close()
        assert status == "expired"
        store = open_store(load_settings())
        events = store.audit_events(proposal_id=pid)
        store.close()
        assert events[-1].actor == "sweeper" and events[-1].to_status == "expired"


async def test_accepted_mkdir_and_download_do_exactly_what_was_proposed(
    sweeping_ws: Workspace,
) -> None:
    async with connect(sweeping_ws) as client:
        mk = ok(
            await client.call_tool(
                "propose_mkdir", {"remote_parent": "shared", "name": "reports", "reason": "r"}
            )
        )["proposal"]
        down = ok(
            await client.call_tool(
                "propose_download",
                {"remote_path": "remote.txt", "local_path": "docs/from-drive.txt", "reason": "r"},
            )
        )["proposal"]
        assert not (sweeping_ws.drive / "shared" / "reports").exists()
        assert not (sweeping_ws.root / "docs" / "from-drive.txt").exists()
        for pid in (mk["id"], down["id"]):
            r = await anyio.to_thread.run_sync(
                lambda p=pid: sweeping_ws.placet("accept", str(p), "--yes")
            )
            assert r.returncode == 0, r.stderr
            done = ok(await client.call_tool("proposal_wait", {"id": pid, "timeout_s": 10}))
            assert done["proposal"]["status"] == "succeeded", done
        listing = ok(await client.call_tool("drive_list", {"path": "shared"}))
        assert [e["name"] for e in listing["entries"] if e["is_dir"]] == ["reports"]
    fetched = sweeping_ws.root / "docs" / "from-drive.txt"
    assert sha256_of(fetched) == down["evidence"]["remote"]["digest"]
    assert fetched.read_bytes() == (sweeping_ws.drive / "remote.txt").read_bytes()


def _sync_proposal(ws: Workspace, n_ops: int) -> int:
    """A sync proposal of `n_ops` mkdir ops on the workspace's root, made through the store
    (so a test can play the executor op by op)."""
    store = open_store(load_settings())
    try:
        ops = [
            {"index": i, "kind": "mkdir", "remote_path": f"d{i}", "reason": "missing"}
            for i in range(n_ops)
        ]
        root = {"name": "proj", "path": str(ws.root), "device": 0, "inode": 0}
        request = {
            "kind": "sync",
            "plan_id": 1,
            "root": root,
            "local_path": "",
            "remote_path": "",
            "decisions": {},
            "ops": ops,
        }
        rec, _ = store.create_proposal(
            kind="sync",
            request=request,
            evidence={},
            reason="progress test",
            drive_spec=str(ws.drive),
            run_id="another-session",
            ttl_seconds=600,
        )
        return rec.id
    finally:
        store.close()


@pytest.mark.timeout(90)
async def test_wait_progress_strictly_increases_from_pending_through_each_op_to_done(
    sweeping_ws: Workspace,
) -> None:
    """Over the real stdio client: one scale (total = ops + 1) whose values strictly
    increase while the proposal waits for the owner, waits for the executor, runs each
    op, and ends; each message states the real measure."""
    n = 3
    pid = _sync_proposal(sweeping_ws, n)
    on_progress = Progress()
    progress = on_progress.items

    def execute() -> None:
        store = open_store(load_settings())
        try:
            holder = LeaseHolder.current()
            on_progress.wait_for("is pending")  # the server saw it waiting for the owner
            store.accept(pid)
            on_progress.wait_for("is approved")  # ... waiting for the executor
            store.claim(pid, holder=holder)
            for i, op in enumerate(store.ops(pid)):
                on_progress.wait_for(f"executing: {i} of {n} ops done")  # op i in flight
                store.record_op_result(
                    pid, op_index=i, op=op, outcome="done", detail={}, holder=holder
                )
            store.finish(pid, holder=holder)
        finally:
            store.close()

    async with connect(sweeping_ws) as client, anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, execute)
        waited = ok(
            await client.call_tool(
                "proposal_wait", {"id": pid, "timeout_s": 45}, progress_callback=on_progress
            )
        )
    assert waited["proposal"]["status"] == "succeeded" and waited["timed_out"] is False
    values = [p for p, _, _ in progress]
    assert all(a < b for a, b in pairwise(values)), progress  # never down, never equal
    assert all(t == n + 1 for _, t, _ in progress)  # ops + 1, the same all along
    assert all(m and m.startswith(f"proposal {pid} is ") for _, _, m in progress)
    pending = [(p, m) for p, _, m in progress if m and "is pending" in m]
    approved = [(p, m) for p, _, m in progress if m and "is approved" in m]
    executing = [(p, m) for p, _, m in progress if m and "is executing" in m]
    assert pending and all(0 < p < 1 and "waiting for the owner: " in m for p, m in pending)
    assert approved and all(0 < p < 1 and "waiting for the executor" in m for p, m in approved)
    assert executing, progress
    for p, m in executing:  # 1 + ops done + a fraction of the op in flight
        assert 1 <= p < n + 1 and f"executing: {int(p) - 1} of {n} ops done" in m, (p, m)
    assert {int(p) - 1 for p, _ in executing} >= {0, 1, 2}  # each op as it ended
    # the phases come in order, and the total comes once, with the final status
    kinds = [m.split(" is ")[1].split(",")[0].split(":")[0] for _, _, m in progress if m]
    assert kinds == sorted(kinds, key=["pending", "approved", "executing", "succeeded"].index)
    assert [p for p in values if p >= n + 1] == [n + 1]
    assert progress[-1] == (n + 1, n + 1, f"proposal {pid} is succeeded: {n} of {n} ops done")
