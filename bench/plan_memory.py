"""Peak RSS of `sync_plan` at a size that is quick to iterate on, with both digest caches
treated as too big to keep (as at 1,000,000 files): cold, warm (same process), warm
with one file edited, and warm in a new process, each the planning process's VmHWM
(reset before each plan; rclone rcd not counted); with `--tracemalloc`, also the
peak of Python's traced allocations (slower).

The tree is `bench/plan.py`'s (`--files` small files, no large ones), generated under
`--dir` once and reused. `--memory-rows` sets `SyncData.memory_rows` (default 1,000:
every cache of the tree is read by each plan, as a 1,000,000-file one is).

    .venv/bin/python bench/plan_memory.py [--files 200000] [--dir /tmp/placet-bench-200k]
        [--memory-rows 1000] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import bench_service, make_tree, plan_root, proc_figure


def _rss() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process, MiB."""
    got = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            got[line[:5]] = int(line.split()[1]) / 1024
    return got["VmRSS"], got["VmHWM"]


def watch_phases() -> None:
    """Print RSS and the peak so far after each step of `make_plan` (the service's own
    functions, wrapped: what they do is unchanged)."""
    import placet.sync.service as service

    def wrap(owner: Any, name: str) -> None:
        fn = getattr(owner, name)

        def wrapped(*a: Any, **kw: Any) -> Any:
            out = fn(*a, **kw)
            rss, hwm = _rss()
            print(f"    after {name:<16} RSS {rss:>6.0f}  peak so far {hwm:>6.0f} MiB", flush=True)
            return out

        setattr(owner, name, wrapped)

    wrap(service.SyncService, "_merge")
    wrap(service, "bind_content")
    wrap(service.SyncData, "save_plan")


def _one(svc: Any, ctx: Any, traced: bool) -> tuple[float, float, float]:
    """One plan: (wall s, peak RSS MiB, traced peak MiB or 0)."""
    Path("/proc/self/clear_refs").write_text("5")
    if traced:
        tracemalloc.start()
    t = time.perf_counter()
    plan_root(svc, ctx)
    wall = time.perf_counter() - t
    peak = 0.0
    if traced:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return wall, proc_figure(os.getpid(), "rss"), peak


def child(home: str, local: str, remote: str, rows: int, traced: bool) -> None:
    svc, ctx, drive, store = bench_service(Path(home), Path(local), Path(remote))
    svc.data.memory_rows = rows
    drive.capabilities()
    wall, rss, peak = _one(svc, ctx, traced)
    print(json.dumps({"wall": wall, "rss": rss, "traced": peak}))
    drive.close()
    store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-200k"))
    ap.add_argument("--memory-rows", type=int, default=1000)
    ap.add_argument("--tracemalloc", action="store_true", help="also the traced peak (slower)")
    ap.add_argument("--phases", action="store_true", help="RSS after each step of a plan")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phases:
        watch_phases()
    if args.child:
        child(*args.child, args.memory_rows, args.tracemalloc)
        return 0
    local, remote = make_tree(
        args.dir, args.files, 0, 64
    )  # plan.py's default size: its tree is reused
    home = Path(tempfile.mkdtemp(prefix="placet-bench-home-"))
    edited = local / "d000" / "e00" / "f000.txt"
    try:
        svc, ctx, drive, store = bench_service(home, local, remote)
        svc.data.memory_rows = args.memory_rows
        drive.capabilities()
        start = proc_figure(os.getpid(), "rss")
        print(f"{args.files} files, memory_rows {args.memory_rows}, start RSS {start:.0f} "
              f"MiB, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        out = {}
        for label in ("cold", "warm", "edit"):
            if label == "edit":
                edited.write_bytes(os.urandom(100))
            out[label] = _one(svc, ctx, args.tracemalloc)
            w, rss, tr = out[label]
            print(f"{label:<12}{w:>8.2f} s  peak RSS {rss:>7.0f} MiB  traced {tr:>6.0f} MiB",
                  flush=True)  # fmt: skip
        drive.close()
        store.close()
        argv = [sys.executable, __file__, "--child", str(home), str(local), str(remote),
                "--memory-rows", str(args.memory_rows)]  # fmt: skip
        argv += ["--tracemalloc"] if args.tracemalloc else []
        argv += ["--phases"] if args.phases else []
        got = subprocess.run(argv, capture_output=True, text=True, check=True)
        print("".join(ln + "\n" for ln in got.stdout.splitlines()[:-1]), end="")
        c = json.loads(got.stdout.strip().splitlines()[-1])
        print(f"{'new process':<12}{c['wall']:>8.2f} s  peak RSS {c['rss']:>7.0f} MiB  "
              f"traced {c['traced']:>6.0f} MiB")  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)
        src = remote / "d000" / "e00" / "f000.txt"
        if src.exists():
            shutil.copy2(src, edited)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
