"""`placet serve` under hostile load: a flood of unread calls, an oversized client name,
ids past SQLite's integer range; each against a real server subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, Implementation

from placet.config import load_settings
from placet.server.flow import MAX_RUNNING_TOOLS, MAX_WAITING_TOOLS
from placet.store import open_store
from tests.support.mcp import PLACET, Workspace, connect, error_of, ok


def _line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


# ---- 1. a flood of calls whose answers nobody reads -----------------------------------


@pytest.mark.timeout(300)
def test_unread_flood_stops_the_reading_and_the_server_answers_after(ws: Workspace) -> None:
    """Back-pressure: with its answers unread the server stops reading stdin (so it holds
    a bounded amount; bench/server_memory.py measures how much), then answers every call."""
    calls, pad = 5000, 100_000  # 5,000 calls of ~100 KB each: ~500 MB if all were held
    proc = subprocess.Popen(
        [PLACET, "serve", "--root", str(ws.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **ws.env},
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    try:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"},
        }
        stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
        stdin.flush()
        assert json.loads(stdout.readline())["id"] == 0
        stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        stdin.flush()

        written = [0]

        def writer() -> None:
            for i in range(1, calls + 1):
                params = {"name": "roots_list", "arguments": {}, "_meta": {"pad": "x" * pad}}
                stdin.write(
                    _line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
                )
                written[0] = i
            stdin.flush()

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        # Read nothing until the writer is done or has stopped making progress (the
        # server stopped reading stdin).
        last, still = -1, 0
        while t.is_alive() and still < 3:
            time.sleep(1.0)
            still = still + 1 if written[0] == last else 0
            last = written[0]
        assert t.is_alive(), "the server read all 5,000 calls with their answers unread"

        answered: dict[int, str] = {}
        while len(answered) < calls:
            line = stdout.readline()
            assert line, f"server closed stdout after {len(answered)} answers"
            msg = json.loads(line)
            if "id" not in msg:
                continue
            if "error" in msg:
                answered[msg["id"]] = f"protocol:{msg['error']['code']}"
            elif msg["result"].get("isError"):
                answered[msg["id"]] = msg["result"]["structuredContent"]["code"]
            else:
                answered[msg["id"]] = "ok"
        assert set(answered) == set(range(1, calls + 1))
        assert set(answered.values()) <= {"ok", "server_busy"}, set(answered.values())
        assert "ok" in answered.values()
        t.join(timeout=30)

        call = {"name": "roots_list", "arguments": {}}
        stdin.write(
            _line({"jsonrpc": "2.0", "id": "after", "method": "tools/call", "params": call})
        )
        stdin.flush()
        reply = json.loads(stdout.readline())
        assert reply["id"] == "after" and reply["result"]["isError"] is False
    finally:
        stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_calls_past_the_running_and_waiting_bound_answer_server_busy(
    ws: Workspace,
) -> None:
    async with connect(ws) as client:
        made = ok(
            await client.call_tool(
                "propose_mkdir", {"remote_parent": "", "name": "busy", "reason": "load test"}
            )
        )
        pid = made["proposal"]["id"]
        n = MAX_RUNNING_TOOLS + MAX_WAITING_TOOLS + 20
        results: list[CallToolResult] = []

        async def one() -> None:
            results.append(await client.call_tool("proposal_wait", {"id": pid, "timeout_s": 1}))

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        busy = [r for r in results if r.is_error]
        assert len(results) == n
        assert busy, "no call was refused"
        for r in busy:
            err = error_of(r)
            assert err["code"] == "server_busy" and err["retryable"] is True
            assert "retry" in err["message"]
        assert len(results) - len(busy) >= MAX_RUNNING_TOOLS + MAX_WAITING_TOOLS
        # and the server is fine afterwards
        assert ok(await client.call_tool("proposal_get", {"id": pid}))["proposal"]["id"] == pid


# ---- 2. client name and version are capped before they are stored -------------------


@pytest.mark.anyio
async def test_huge_client_name_is_capped_and_control_chars_replaced(ws: Workspace) -> None:
    name = "agent\x1b[31m\u202e" + "n" * (1 << 20)
    version = "1.0\n" + "v" * 5000
    info = Implementation(name=name, version=version)
    async with Client(ws.params(), client_info=info) as client:
        made = ok(
            await client.call_tool(
                "propose_mkdir", {"remote_parent": "", "name": "cap", "reason": "cap test"}
            )
        )
    shown = made["proposal"]
    store = open_store(load_settings())
    try:
        rec = store.get(shown["id"])
    finally:
        store.close()
    for got in (rec.client_name, rec.client_version, shown["client_name"], shown["client_version"]):
        assert got is not None and len(got) <= 200
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in got)
    assert rec.client_name is not None and rec.client_name.startswith("agent")
    assert rec.client_name.endswith("…")
    assert rec.client_version is not None and rec.client_version.startswith("1.0")


# ---- 3. ids outside 1..2**63-1 are schema violations, never internal errors ----------


ID_TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("proposal_get", "id", {}),
    ("proposal_wait", "id", {"timeout_s": 0}),
    ("proposal_withdraw", "id", {}),
    ("proposal_ops", "id", {}),
    ("propose_sync", "plan_id", {"reason": "x"}),
    ("sync_plan_ops", "plan_id", {}),
]


@pytest.mark.anyio
async def test_every_id_argument_is_bounded_to_sqlite_integers(ws: Workspace) -> None:
    async with connect(ws) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        id_params = {
            (name, p)
            for name, t in tools.items()
            for p, spec in t.input_schema.get("properties", {}).items()
            if p in ("id", "plan_id") or p.endswith("_id")
        }
        assert id_params == {(n, p) for n, p, _ in ID_TOOLS}  # the list below is complete
        for name, param, extra in ID_TOOLS:
            spec = tools[name].input_schema["properties"][param]
            assert spec.get("maximum") == 2**63 - 1 and spec.get("minimum") == 1, spec
            for bad in (2**63, 2**64, 10**30, 0, -1):
                err = error_of(await client.call_tool(name, {param: bad, **extra}))
                assert err["code"] == "invalid_argument", err
                assert err["details"]["field"] == param, err
            # the largest valid id is simply not there
            err = error_of(await client.call_tool(name, {param: 2**63 - 1, **extra}))
            assert err["code"] == "not_found", err


@pytest.mark.timeout(120)
def test_cancelled_calls_free_their_place(ws: Workspace) -> None:
    """A cancelled request is never answered; its place must still be freed, or 128
    cancellations would stop the server reading stdin for good."""
    proc = subprocess.Popen(
        [PLACET, "serve", "--root", str(ws.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **ws.env},
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(msg: dict[str, Any]) -> None:
        stdin.write(_line(msg))
        stdin.flush()

    def answer(want: object) -> dict[str, Any]:
        while True:
            line = stdout.readline()
            assert line, "server closed stdout"
            msg = json.loads(line)
            if msg.get("id") == want:
                return dict(msg)

    try:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "cancel", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        mk = {"remote_parent": "", "name": "c", "reason": "cancel test"}
        send(
            {
                "jsonrpc": "2.0",
                "id": "mk",
                "method": "tools/call",
                "params": {"name": "propose_mkdir", "arguments": mk},
            }
        )
        pid = answer("mk")["result"]["structuredContent"]["proposal"]["id"]
        for round_ in range(3):  # 3 x 60 long waits, each cancelled: 180 > 128 places
            ids = [f"w{round_}-{i}" for i in range(60)]
            for rid in ids:
                call = {"name": "proposal_wait", "arguments": {"id": pid, "timeout_s": 50}}
                send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": call})
            time.sleep(0.5)
            for rid in ids:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": rid, "reason": "test"},
                    }
                )
        time.sleep(0.5)
        send(
            {
                "jsonrpc": "2.0",
                "id": "after",
                "method": "tools/call",
                "params": {"name": "roots_list", "arguments": {}},
            }
        )
        reply = answer("after")  # would hang (pytest-timeout) if places leaked
        assert reply["result"]["isError"] is False
    finally:
        stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()
