"""Notification latency and what notifications cost proposing.

- **Latency**, proposal committed -> listener received: agents propose `propose_mkdir`
  one at a time through real `placet serve` processes (1, then 4, one MCP client each,
  taking turns), and a real HTTP listener on 127.0.0.1 standing in for the ntfy server
  records when each message arrives. "Committed" is the proposal's `created_at` (stamped
  in the creating transaction, a moment before its commit), "received" the listener's
  wall clock when the POST arrived. Each proposal waits for its message before the next,
  so no two coalesce (the burst quiet time, 0.3 s by default, is part of the latency).
  With 4 processes, all 4 run a sender; the one that groups the event sends it.
- **Propose p50, notifications on vs off**: `propose_mkdir` round trips through one
  `placet serve` with `[notify]` (ntfy to the listener) and without it, alternating
  blocks, each in its own data directory.

- **The outbox trigger's cost**, in process: `Store.create_proposal` p50 on a database
  with the `tr_notify_event` trigger and on one where it was dropped, alternating calls
  (the trigger runs whether or not a channel is configured, so "off" above pays it too).

Target: latency p99 <= 1 s; propose p50 on within noise of off.

    .venv/bin/python bench/notify.py [--samples 60] [--calls 150] [--json]

With fewer than 100 samples p99 is the largest (nearest rank); the output says how
many there were.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PLACET = str(Path(sys.executable).parent / "placet")
RAISED_CAP = 10_000_000


class Listener:
    """POSTs received, as (wall time, JSON body)."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict[str, Any]]] = []
        self.cond = threading.Condition()
        me = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.time()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with me.cond:
                    me.got.append((at, json.loads(body)))
                    me.cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, n: int, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        with self.cond:
            while len(self.got) < n:
                if not self.cond.wait(max(0.0, end - time.monotonic())):
                    raise TimeoutError(f"message {n} did not arrive within {timeout} s")


def workspace(base: Path, listener: Listener | None) -> dict[str, str]:
    home, drive, root = base / "home", base / "drive", base / "root"
    for d in (home, drive, root):
        d.mkdir(parents=True)
    home.chmod(0o700)
    cfg = f"pending_per_bridge = {RAISED_CAP}\npending_total = {RAISED_CAP}\n"
    if listener is not None:
        cfg += f'[notify]\n[notify.ntfy]\nurl = "http://127.0.0.1:{listener.port}/bench"\n'
    (home / "config.toml").write_text(cfg)
    return {"PLACET_HOME": str(home), "PLACET_DRIVE": str(drive), "ROOT": str(root)}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


async def latency(procs: int, samples: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    listener = Listener()
    with tempfile.TemporaryDirectory() as tmp:
        env = workspace(Path(tmp), listener)
        params = StdioServerParameters(
            command=PLACET, args=["serve", "--root", env.pop("ROOT")], env=env
        )
        lat: list[float] = []
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(params)) for _ in range(procs)]
            for i in range(samples + 2):
                r = await clients[i % procs].call_tool(
                    "propose_mkdir", {"remote_parent": "", "name": f"n{i}", "reason": "bench"}
                )
                made = datetime.fromisoformat(r.structured_content["proposal"]["created_at"])
                listener.wait(i + 1)
                if i >= 2:  # the first two warm each path up
                    lat.append(listener.got[i][0] - made.timestamp())
    listener.server.shutdown()
    return {
        "processes": procs,
        "samples": len(lat),
        "p50_ms": round(statistics.median(lat) * 1000, 1),
        "p99_ms": round(pct(lat, 0.99) * 1000, 1),
        "max_ms": round(max(lat) * 1000, 1),
    }


async def propose_p50(on: bool, calls: int) -> float:
    from mcp import Client, StdioServerParameters

    listener = Listener() if on else None
    with tempfile.TemporaryDirectory() as tmp:
        env = workspace(Path(tmp), listener)
        params = StdioServerParameters(
            command=PLACET, args=["serve", "--root", env.pop("ROOT")], env=env
        )
        times: list[float] = []
        async with Client(params) as client:
            for i in range(calls + 5):
                t = time.perf_counter()
                await client.call_tool(
                    "propose_mkdir", {"remote_parent": "", "name": f"p{i}", "reason": "bench"}
                )
                if i >= 5:
                    times.append(time.perf_counter() - t)
    if listener is not None:
        listener.server.shutdown()
    return statistics.median(times) * 1000


def trigger_cost(n: int) -> dict[str, float]:
    """p50 of `create_proposal` (µs) with and without the outbox trigger."""
    import sqlite3

    from placet.config import load_settings
    from placet.store import open_store

    times: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for name in times:
            home = Path(tmp) / name
            settings = load_settings({"PLACET_HOME": str(home)})
            settings = settings.model_copy(
                update={"pending_per_bridge": RAISED_CAP, "pending_total": RAISED_CAP}
            )
            stores[name] = open_store(settings)
            if name == "without":
                con = sqlite3.connect(settings.db_path)
                con.execute("DROP TRIGGER tr_notify_event")
                con.commit()
                con.close()
        for i in range(n):
            for name, store in stores.items():
                t = time.perf_counter()
                store.create_proposal(
                    kind="mkdir",
                    request={"kind": "mkdir", "remote_parent": "", "name": f"t{i}"},
                    evidence={"remote": {"exists": False}},
                    reason="bench",
                    drive_spec="local:/bench",
                    run_id="bench",
                    ttl_seconds=1800,
                )
                times[name].append(time.perf_counter() - t)
        for store in stores.values():
            store.close()
    return {k: round(statistics.median(v) * 1e6, 1) for k, v in times.items()}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "latency": [await latency(n, args.samples) for n in (1, 4)],
    }
    on: list[float] = []
    off: list[float] = []
    for _ in range(2):  # alternating blocks, so load drift hits both
        off.append(await propose_p50(False, args.calls))
        on.append(await propose_p50(True, args.calls))
    out["propose_p50_ms"] = {
        "off": round(statistics.median(off), 2),
        "on": round(statistics.median(on), 2),
        "on_over_off": round(statistics.median(on) / statistics.median(off), 3),
        "blocks": {"off": [round(x, 2) for x in off], "on": [round(x, 2) for x in on]},
    }
    out["create_proposal_p50_us"] = trigger_cost(args.calls * 10)
    out["load_after"] = os.getloadavg()[0]
    return out


def main() -> None:
    import anyio

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--calls", type=int, default=150)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = anyio.run(main_async, args)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"python {out['python']}, {out['cpus']} CPUs, load {out['load']:.1f}")
    for r in out["latency"]:
        print(
            f"latency, {r['processes']} serve process(es), {r['samples']} samples: "
            f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms"
        )
    pp = out["propose_p50_ms"]
    print(
        f"propose_mkdir p50: notifications off {pp['off']} ms, on {pp['on']} ms "
        f"(on/off {pp['on_over_off']}; blocks {pp['blocks']})"
    )
    tc = out["create_proposal_p50_us"]
    print(
        f"Store.create_proposal p50: with the outbox trigger {tc['with']} us, "
        f"without {tc['without']} us"
    )
    print(f"load after {out['load_after']:.1f}")


if __name__ == "__main__":
    main()
