"""Memory of `placet serve` under hostile stdin: the peak RSS (VmHWM, MiB) it reaches.

Three scenarios, each against a fresh `placet serve` subprocess over raw pipes (a
temporary PLACET_HOME, a local-folder drive):

- **oversized lines**: one request line of 32 MiB, then one of 128 MiB (2x and 8x the
  16 MiB line cap), both refused unread; also the server's CPU seconds for each (the scan
  is linear: 4x the bytes should cost about 4x);
- **byte budget**: 20 small calls and 24 requests of 15 MiB written while no answer is
  read; measured once the server has stopped reading stdin (2 s without a byte read).
  Without the 64 MiB outstanding-bytes budget all 24 (360 MiB) would be held;
- **flood**: 5,000 `tools/call` of ~100 KB each written while no answer is read;
  measured once the writer has made no progress for 3 s (about 500 MB if all were held).

The tests (tests/server/test_wire.py, tests/server/test_limits.py) check the behaviour
(refused, stopped reading, everything answered afterwards); the figures are here.

Usage: .venv/bin/python bench/server_memory.py [--json]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from placet.server.stdio import MAX_LINE_BYTES

PLACET = str(Path(sys.executable).parent / "placet")


class Server:
    """`placet serve` on raw pipes in a scratch PLACET_HOME."""

    def __init__(self, base: Path) -> None:
        root, drive = base / "root", base / "drive"
        root.mkdir()
        drive.mkdir()
        env = {**os.environ, "PLACET_HOME": str(base / "home"), "PLACET_DRIVE": str(drive)}
        self.proc = subprocess.Popen(
            [PLACET, "serve", "--root", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.pending = b""
        init = {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}}  # fmt: skip
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.recv()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": "warm", "method": "tools/call",
                   "params": {"name": "roots_list", "arguments": {}}})  # fmt: skip
        self.recv()
        self.idle_mib = self.proc_status("VmHWM")
        """The peer figure: the same server's peak RSS after one ordinary call."""

    def send(self, msg: dict[str, Any] | bytes) -> None:
        data = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.stdin.write(data + b"\n")
        self.stdin.flush()

    def recv(self, timeout: float = 300) -> dict[str, Any]:
        fd = self.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise TimeoutError(f"no answer within {timeout} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("server closed stdout")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return dict(json.loads(line))

    def proc_status(self, key: str) -> int:
        """A /proc/PID/status figure in MiB (VmHWM: peak RSS, VmRSS: now)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
        raise KeyError(key)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rchar(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
        raise KeyError("rchar")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.stdin.close()
        self.stdout.close()


def oversized(base: Path) -> dict[str, Any]:
    server = Server(base)
    try:
        cpu = []
        for rid, mib in ((1, 2 * MAX_LINE_BYTES >> 20), (2, 8 * MAX_LINE_BYTES >> 20)):
            before = server.cpu_seconds()
            head = f'{{"jsonrpc": "2.0", "id": {rid}, "method": "ping", "params": {{"x": "'
            server.stdin.write(head.encode())
            block = b"A" * (1 << 20)
            for _ in range(mib):
                server.stdin.write(block)
            server.stdin.write(b'"}}\n')
            server.stdin.flush()
            reply = server.recv()
            assert reply["error"]["data"]["code"] == "limit_exceeded", reply
            cpu.append(server.cpu_seconds() - before)
        return {
            "idle_rss_mib": server.idle_mib,
            "peak_rss_mib": server.proc_status("VmHWM"),
            "cpu_s_32mib": round(cpu[0], 2),
            "cpu_s_128mib": round(cpu[1], 2),
        }
    finally:
        server.close()


def byte_budget(base: Path) -> dict[str, Any]:
    server = Server(base)
    try:
        fillers, bigs, pad = 20, 24, (MAX_LINE_BYTES >> 20) - 1 << 20
        done = threading.Event()

        def writer() -> None:
            try:
                for i in range(1, fillers + 1):
                    server.send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                 "params": {"name": "roots_list", "arguments": {}}})  # fmt: skip
                for i in range(fillers + 1, fillers + bigs + 1):
                    server.send(
                        f'{{"jsonrpc": "2.0", "id": {i}, "method": "ping", "params": '
                        f'{{"_meta": {{"pad": "{"P" * pad}"}}}}}}'.encode()
                    )
            except (BrokenPipeError, ValueError):
                return
            done.set()

        fcntl.fcntl(server.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
        threading.Thread(target=writer, daemon=True).start()
        last, still = -1, 0
        while still < 4 and not done.is_set():
            now = server.rchar()
            still = still + 1 if now == last else 0
            last = now
            time.sleep(0.5)
        return {
            "idle_rss_mib": server.idle_mib,
            "peak_rss_mib": server.proc_status("VmHWM"),
            "stopped_reading": not done.is_set(),
            "read_mib": server.rchar() >> 20,
        }
    finally:
        server.close()


def flood(base: Path) -> dict[str, Any]:
    server = Server(base)
    try:
        calls, pad = 5000, 100_000
        written = [0]

        def writer() -> None:
            try:
                for i in range(1, calls + 1):
                    params = {"name": "roots_list", "arguments": {}, "_meta": {"pad": "x" * pad}}
                    server.stdin.write(
                        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                    "params": params}).encode() + b"\n"
                    )  # fmt: skip
                    written[0] = i
                server.stdin.flush()
            except (BrokenPipeError, ValueError):
                return

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        peak, last, still = 0, -1, 0
        while t.is_alive() and still < 3:
            time.sleep(1.0)
            peak = max(peak, server.proc_status("VmRSS"))
            still = still + 1 if written[0] == last else 0
            last = written[0]
        return {
            "idle_rss_mib": server.idle_mib,
            "peak_rss_mib": max(peak, server.proc_status("VmHWM")),
            "calls_written": written[0],
            "stopped_reading": t.is_alive(),
        }
    finally:
        server.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name, fn in (("oversized", oversized), ("byte_budget", byte_budget), ("flood", flood)):
        with tempfile.TemporaryDirectory(prefix="placet-bench-mem-") as tmp:
            started = time.monotonic()
            results[name] = fn(Path(tmp))
            results[name]["wall_s"] = round(time.monotonic() - started, 1)
        if not args.json:
            print(f"{name:12} {results[name]}", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
