"""MCP latency benchmark: placet's tools over real stdio against the SDK's own floor.

Measures, with the official client (`mcp.Client(StdioServerParameters)`), each call's
round trip over stdio:

- the **floor**: an empty tool (no arguments, a one-field result) served by the same SDK
  (`MCPServer`) in a tiny separate server process (this file run with `--floor-server`);
- `proposal_get(id)` on `placet serve` (one SQLite read, visibility check, summary);
- `propose_mkdir` on `placet serve` (reason/TTL checks, one rclone `stat` through the
  long-lived `rclone rcd`, one INSERT + audit event), each call a new folder name so each
  creates a proposal.

Target: placet's p50 within 2x of the floor's. For scale, the same work is also
timed in-process without MCP (`store.get`, one `drive.stat`, `making.propose_mkdir`).
Also reported: the idle RSS of `placet serve` and of its `rclone rcd` child (after the
calls, 2 s idle), and proposals/s
through 4 `placet serve` processes at once (one client each, concurrent, for
`--seconds`), with the count read back from the database (none lost) and every
`is_error` result counted (a `database is locked` would show there).

The pending caps (100 per bridge, 1,000 in total) would stop the run, so this benchmark
raises `pending_per_session` and `pending_total` to 10,000,000 in its own `config.toml`,
and says so in its output.

Usage: .venv/bin/python bench/mcp_latency.py [--calls 300] [--seconds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

RAISED_CAP = 10_000_000
PLACET = str(Path(sys.executable).parent / "placet")


class Empty(BaseModel):
    ok: bool = True


def floor_server() -> None:
    """The floor: the smallest useful tool the SDK can serve."""
    from mcp.server import MCPServer

    server: MCPServer[Any] = MCPServer("floor", log_level="WARNING")

    @server.tool()
    async def empty() -> Empty:
        """Do nothing."""
        return Empty()

    server.run()


def phase(what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.50), 3),
        "p99_ms": round(pct(ms, 0.99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def core_timings(home: Path, root: Path, n: int) -> dict[str, Any]:
    """The same work without MCP: what each tool costs before the protocol adds its share."""
    from placet.config import load_settings
    from placet.drive import drive_for
    from placet.paths.roots import parse_roots
    from placet.proposals import context, making
    from placet.store import open_store

    settings = load_settings({"PLACET_HOME": str(home), "PLACET_DRIVE": str(root.parent / "drive")})
    store = open_store(settings)
    drive = drive_for(settings)
    try:
        ctx = context.ProposeContext(
            settings=settings,
            store=store,
            drive=drive,
            roots=tuple(parse_roots([str(root)], settings.data_dir)),
            run_id="bench-core",
            drive_spec=drive.spec,
        )
        rec, _ = making.propose_mkdir(ctx, remote_parent="", name="core", reason="b")

        def each(fn: Callable[[int], Any]) -> dict[str, float]:
            for i in range(10):
                fn(-1 - i)
            times = []
            for i in range(n):
                t0 = time.perf_counter()
                fn(i)
                times.append(time.perf_counter() - t0)
            return summary(times)

        return {
            "store_get": each(lambda i: store.get(rec.id)),
            "drive_stat": each(lambda i: drive.stat(f"absent{i}")),
            "propose_mkdir": each(
                lambda i: making.propose_mkdir(
                    ctx, remote_parent="", name=f"core{i + 20:06d}", reason="b"
                )
            ),
        }
    finally:
        drive.close()
        store.close()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    base = Path(tempfile.mkdtemp(prefix="placet-bench-mcp-"))
    home, root, drive = base / "home", base / "proj", base / "drive"
    for d in (home, root, drive):
        d.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        f"pending_per_session = {RAISED_CAP}\npending_total = {RAISED_CAP}\n"
    )
    env = {"PLACET_HOME": str(home), "PLACET_DRIVE": str(drive)}
    info = Implementation(name="bench", version="1")
    placet = StdioServerParameters(command=PLACET, args=["serve", "--root", str(root)], env=env)
    floor = StdioServerParameters(command=sys.executable, args=[__file__, "--floor-server"])
    warm, n = args.warmup, args.calls
    out: dict[str, Any] = {
        "calls": n,
        "warmup": warm,
        "caps_raised_to": RAISED_CAP,
        "machine": f"{os.cpu_count()} vCPU {platform.machine()}, "
        f"Python {platform.python_version()}",
    }

    phase("floor and placet serve, interleaved: empty, proposal_get, propose_mkdir")
    async with Client(floor, client_info=info) as fc, Client(placet, client_info=info) as pc:
        first = await pc.call_tool(
            "propose_mkdir", {"remote_parent": "", "name": "first", "reason": "b"}
        )
        pid = first.structured_content["proposal"]["id"]  # type: ignore[index]
        calls: dict[str, Callable[[int], Awaitable[Any]]] = {
            "floor_empty_tool": lambda i: fc.call_tool("empty", {}),
            "proposal_get": lambda i: pc.call_tool("proposal_get", {"id": pid}),
            "propose_mkdir": lambda i: pc.call_tool(
                "propose_mkdir",
                {"remote_parent": "", "name": f"m{i:07d}", "reason": "benchmark"},
            ),
        }
        # Round-robin, one call of each per round, so that all three see the same load.
        times: dict[str, list[float]] = {k: [] for k in calls}
        for i in range(-warm, n):
            for name, call in calls.items():
                t0 = time.perf_counter()
                result = await call(i)
                took = time.perf_counter() - t0
                if result.is_error:
                    raise RuntimeError(f"{name} failed: {result.content[0].text}")
                if i >= 0:
                    times[name].append(took)
        out.update({k: summary(v) for k, v in times.items()})
        await anyio.sleep(2.0)  # idle
        servers = [p for p in children_of(os.getpid()) if "placet serve" in cmdline(p)]
        rss: dict[str, int | None] = {}
        for spid in servers:
            rss["placet_serve_kib"] = rss_kib(spid)
            for child in children_of(spid):
                if "rclone" in cmdline(child):
                    rss["rclone_rcd_kib"] = rss_kib(child)
        out["idle_rss"] = rss

    phase("the same work in-process")
    out["core_in_process"] = core_timings(home, root, n)
    floor_p50 = out["floor_empty_tool"]["p50_ms"]
    out["ratio_p50_vs_floor"] = {
        k: round(out[k]["p50_ms"] / floor_p50, 2) for k in ("proposal_get", "propose_mkdir")
    }

    # ---- throughput through 4 placet serve processes ---------------------------------
    counts: list[int] = []
    errors: list[str] = []
    finished: list[float] = []
    ready: list[int] = []

    async def one(k: int, start: anyio.Event, stop_at: list[float]) -> None:
        async with Client(placet, client_info=info) as c:
            await c.call_tool("roots_list", {})
            warm = {"remote_parent": "", "name": f"w{k}", "reason": "warm up"}
            await c.call_tool("propose_mkdir", warm)
            ready.append(k)
            await start.wait()
            made = 0
            while time.perf_counter() < stop_at[0]:
                r = await c.call_tool(
                    "propose_mkdir",
                    {"remote_parent": "", "name": f"t{k}-{made:07d}", "reason": "benchmark"},
                )
                if r.is_error:
                    errors.append(r.content[0].text)  # type: ignore[union-attr]
                else:
                    made += 1
            finished.append(time.perf_counter())
            counts.append(made)

    from placet.config import load_settings
    from placet.store import open_store

    phase(f"throughput through {args.procs} placet serve processes")
    start = anyio.Event()
    stop_at = [0.0]
    async with anyio.create_task_group() as tg:
        for k in range(args.procs):
            tg.start_soon(one, k, start, stop_at)
        while len(ready) < args.procs:  # every server started and warmed up
            await anyio.sleep(0.05)
        t0 = time.perf_counter()
        stop_at[0] = t0 + args.seconds
        start.set()
    elapsed = max(finished) - t0  # the last call's return, not the clients' shutdown
    store = open_store(load_settings({"PLACET_HOME": str(home)}))
    stored = sum(1 for r in store.list(limit=RAISED_CAP) if r.request.get("name", "")[:1] == "t")
    store.close()
    made = sum(counts)
    out["throughput"] = {
        "procs": args.procs,
        "seconds": round(elapsed, 2),
        "proposals": made,
        "per_second": round(made / elapsed, 1),
        "in_database": stored,
        "lost": made - stored,
        "error_results": len(errors),
        "first_error": errors[0] if errors else None,
    }
    return out


def main() -> None:
    if "--floor-server" in sys.argv:
        floor_server()
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import anyio

    result = anyio.run(run, args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"machine: {result['machine']}; caps raised to {RAISED_CAP} in this run's config")
    for k in ("floor_empty_tool", "proposal_get", "propose_mkdir"):
        s = result[k]
        print(f"{k:18} p50 {s['p50_ms']:8.3f} ms  p99 {s['p99_ms']:8.3f} ms  (n={s['n']})")
    print(f"p50 vs floor: {result['ratio_p50_vs_floor']}")
    core = {k: v["p50_ms"] for k, v in result["core_in_process"].items()}
    print(f"same work without MCP (in-process p50 ms): {core}")
    print(f"idle RSS: {result['idle_rss']}")
    print(f"through {args.procs} placet serve: {result['throughput']}")


if __name__ == "__main__":
    main()
