"""Ending with the client: `placet serve` over raw pipes whose host dies, or closes stdin
and stops reading stdout. Either way the server exits with status 0, one log line and no
traceback, and stops its rclone child; it never stays blocked on a write.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

from placet.server.stdio import CLOSING_STALL_SECONDS
from tests.support.mcp import PLACET, Workspace, rclone_children
from tests.support.processes import alive


def _start(ws: Workspace, stderr: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [PLACET, "serve", "--root", str(ws.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr.open("wb"),
        env={**os.environ, **ws.env},
    )
    assert proc.stdin is not None and proc.stdout is not None
    _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "gone", "version": "0"}}})  # fmt: skip
    assert json.loads(proc.stdout.readline())["id"] == 0
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, _call("drive_list", 1))  # starts the rclone child
    assert json.loads(proc.stdout.readline())["result"]["isError"] is False
    return proc


def _call(tool: str, rid: int) -> dict[str, object]:
    params = {"name": tool, "arguments": {"path": ""} if tool == "drive_list" else {}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def _send(proc: subprocess.Popen[bytes], msg: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()


def _ended_quietly(proc: subprocess.Popen[bytes], stderr: Path, within: float) -> float:
    """Wait for the exit; check status 0, no traceback, the rclone child gone. Returns
    the seconds it took."""
    children = rclone_children(proc.pid)
    started = time.monotonic()
    try:
        rc = proc.wait(timeout=within)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    took = time.monotonic() - started
    err = stderr.read_text()
    assert rc == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert "the client is gone" in err and len(err.splitlines()) <= 3, err
    deadline = time.monotonic() + 10
    while any(map(alive, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(alive, children)), children
    return took


def test_a_killed_host_leaves_the_server_exiting_quietly(ws: Workspace, tmp_path: Path) -> None:
    stderr = tmp_path / "stderr"
    proc = _start(ws, stderr)
    assert proc.stdin is not None and proc.stdout is not None
    for rid in range(2, 50):  # answers on their way when the host dies
        _send(proc, _call("roots_list", rid))
    proc.stdout.close()  # the host is gone: no reader of stdout, and stdin closes too
    proc.stdin.close()
    _ended_quietly(proc, stderr, within=30)


def test_a_host_that_closes_stdin_and_stops_reading_does_not_block_it(
    ws: Workspace, tmp_path: Path
) -> None:
    stderr = tmp_path / "stderr"
    proc = _start(ws, stderr)
    assert proc.stdin is not None and proc.stdout is not None
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)  # a few answers fill it
    for rid in range(2, 300):
        _send(proc, _call("roots_list", rid))
    proc.stdin.close()  # goodbye, but stdout is never read again
    took = _ended_quietly(proc, stderr, within=CLOSING_STALL_SECONDS + 25)
    assert took >= CLOSING_STALL_SECONDS - 1  # it waited for the client first
    proc.stdout.close()
