"""`sync_plan` through the service (index + remote listing + baseline + plan + store) on a
local-folder remote pair, beside `rclone check` and the remote listing alone.

docs/design.md section 8 and docs/decisions/0026-plan-memory.md: cold within 0.99x of
`rclone check`; a warm re-plan with a few files edited within 1.3x of the remote listing
alone (its floor: no plan can list the remote faster); the planning process and its rcd
at most 300 MiB at 1,000,000 files, and no more than `rclone check` on the same tree. The
tree: `--files` small files (64 to 2,063 bytes, 100 per folder) plus `--large` files of
`--large-mib` MiB, copied to a second folder that is the drive (rclone's `local` backend,
which computes digests by reading the files, so the remote digest cache matters).
Planning goes through `SyncService.make_plan`, the code `sync_plan` runs, with a fresh
data directory per run: cold = both digest caches empty; warm = the same service again;
one edit / a few edits = files edited here, the pair classified anew; warm, new process =
a fresh interpreter planning from the persistent caches alone. `rclone check` (default
flags: 8 checkers, md5 of both sides) runs on the same pair; the floor is one lean
recursive listing of the remote through rcd.

Each timed step runs after `os.sync()`; the load average is printed with it. Wall and CPU
seconds; CPU includes rclone rcd. Peak RSS: the planning process's VmHWM and its rcd's,
each reset before the step (/proc/PID/clear_refs); `rclone check`'s from wait4. With
`--repeat N` the whole sequence runs N times (fresh data directory each) and the medians
are printed. The bench's data directory sets `plan_entry_cap` to the tree's file count.

    .venv/bin/python bench/plan.py [--files 100000] [--large 4] [--large-mib 64]
        [--dir /tmp/placet-bench-plan] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
RCLONE = Path(sys.executable).parent / "rclone"
EDITS = 5
"""Files edited here for the "a few edits" step."""


def proc_figure(pid: int | None, field: str) -> float:
    if pid is None:
        return 0.0
    try:
        if field == "cpu":
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def reset_peak(pid: int | None) -> None:
    """Reset `pid`'s VmHWM to its RSS now."""
    if pid is not None:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def _cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def step(
    label: str, fn: Callable[[], T], rcd: Callable[[], int | None]
) -> tuple[T, dict[str, float]]:
    """Run `fn` as one timed step: wall, CPU (this process, children, rcd), load, peaks."""
    os.sync()
    reset_peak(os.getpid())
    reset_peak(rcd())
    load = os.getloadavg()[0]
    t, c, r = time.perf_counter(), _cpu(), proc_figure(rcd(), "cpu")
    out = fn()
    wall, cpu = time.perf_counter() - t, _cpu() - c + proc_figure(rcd(), "cpu") - r
    fig = {"wall": wall, "cpu": cpu, "load": load, "rss": proc_figure(os.getpid(), "rss"),
           "rcd_rss": proc_figure(rcd(), "rss")}  # fmt: skip
    show(label, fig)
    return out, fig


def show(label: str, f: dict[str, float]) -> None:
    rss = f"RSS {f['rss']:>5.0f} + rcd {f['rcd_rss']:>5.0f} MiB" if f.get("rss") else ""
    print(f"{label:<42}{f['wall']:>8.2f} s wall {f['cpu']:>7.2f} s CPU  load {f['load']:>4.1f}  "
          f"{rss}", flush=True)  # fmt: skip


def make_tree(base: Path, files: int, large: int, large_mib: int) -> tuple[Path, Path]:
    """`base/local` and its copy `base/remote`; reused when the parameters match."""
    local, remote, marker = base / "local", base / "remote", base / "params.json"
    params = {"files": files, "large": large, "large_mib": large_mib, "v": 1}
    if marker.exists() and json.loads(marker.read_text()) == params:
        return local, remote
    shutil.rmtree(base, ignore_errors=True)
    t = time.perf_counter()
    for d in range((files + 99) // 100):
        folder = local / f"d{d // 100:03d}" / f"e{d % 100:02d}"
        folder.mkdir(parents=True)
        for f in range(min(100, files - d * 100)):
            (folder / f"f{f:03d}.txt").write_bytes(os.urandom(64 + (f * 37 + d) % 2000))
    (local / "large").mkdir()
    for i in range(large):
        with open(local / "large" / f"big{i}.bin", "wb") as fh:
            for _ in range(large_mib):
                fh.write(os.urandom(1 << 20))
    subprocess.run(["cp", "-a", str(local), str(remote)], check=True)
    marker.write_text(json.dumps(params))
    print(f"generated the pair in {time.perf_counter() - t:.0f} s", flush=True)
    time.sleep(2.1)  # past the racily-clean window, so a warm index may trust its cache
    return local, remote


def bench_service(home: Path, local: Path, remote: Path) -> tuple[Any, Any, Any, Any]:
    from placet.config import load_settings
    from placet.drive import drive_for
    from placet.paths.roots import parse_root_spec
    from placet.proposals.context import ProposeContext
    from placet.store import open_store
    from placet.sync.service import SyncService

    env = {"PLACET_HOME": str(home), "PLACET_DRIVE": str(remote)}
    if not (home / "config.toml").exists():
        # The tree may hold more files than the default cap (100,000).
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        cap = min(1_000_000, max(110_000, sum(1 for _ in local.rglob("*"))))
        (home / "config.toml").write_text(f"plan_entry_cap = {cap}\n")
    settings = load_settings(env)
    store = open_store(settings)
    drive = drive_for(settings)
    root = parse_root_spec(f"bench={local}", settings.data_dir)
    ctx = ProposeContext(settings=settings, store=store, drive=drive, roots=(root,),
                         run_id="bench", drive_spec=drive.spec)  # fmt: skip
    svc = SyncService(store, settings)
    return svc, ctx, drive, store


def plan_root(svc: Any, ctx: Any) -> Any:
    return svc.make_plan(ctx, svc.folder(ctx, "", None), "", include_hidden=False,
                         allow_empty_side=False)  # fmt: skip


def child_warm(home: str, local: str, remote: str) -> None:
    """Run in a fresh interpreter: one warm plan from the persistent caches; prints JSON."""
    svc, ctx, drive, store = bench_service(Path(home), Path(local), Path(remote))
    drive.capabilities()  # start rcd outside the timing, as a running server has it
    os.sync()
    reset_peak(os.getpid())
    reset_peak(drive.rcd_pid)
    load = os.getloadavg()[0]
    t, c, r = time.perf_counter(), _cpu(), proc_figure(drive.rcd_pid, "cpu")
    plan_root(svc, ctx)
    wall, cpu = time.perf_counter() - t, _cpu() - c + proc_figure(drive.rcd_pid, "cpu") - r
    out = {"wall": wall, "cpu": cpu, "load": load, "rss": proc_figure(os.getpid(), "rss"),
           "rcd_rss": proc_figure(drive.rcd_pid, "rss"),
           "hashed": [svc.local_files_hashed, svc.remote_files_hashed]}  # fmt: skip
    print(json.dumps(out))
    drive.close()
    store.close()


_WAIT4 = (
    "import json, os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:])\n"
    "_, _, ru = os.wait4(p.pid, 0)\n"
    "print(json.dumps([ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024]))\n"
)
"""Runs a command and prints its CPU seconds and peak RSS (MiB) from wait4: a small
process forks it, since a child forked from this big one counts this one's pages until
it execs."""


def rclone_check(local: Path, remote: Path, home: Path) -> dict[str, float]:
    """`rclone check` of the pair: wall, CPU and peak RSS from wait4."""
    env = {"PATH": os.environ.get("PATH", ""), "RCLONE_CONFIG": "/dev/null", "HOME": str(home)}
    argv = [sys.executable, "-S", "-c", _WAIT4, str(RCLONE), "check", "-q", str(local),
            str(remote)]  # fmt: skip
    os.sync()
    load = os.getloadavg()[0]
    t = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    cpu, rss = json.loads(out.stdout.strip().splitlines()[-1])
    fig = {"wall": time.perf_counter() - t, "cpu": cpu, "load": load, "rss": rss,
           "rcd_rss": 0.0}  # fmt: skip
    show("rclone check (same pair, md5, 8 checkers)", fig)
    return fig


def edit(local: Path, n: int, salt: int) -> None:
    for i in range(n):
        (local / "d000" / f"e{i:02d}" / "f000.txt").write_bytes(os.urandom(100 + salt))


def restore(local: Path, remote: Path, n: int) -> None:
    for i in range(n):
        src = remote / "d000" / f"e{i:02d}" / "f000.txt"
        if src.exists():
            shutil.copy2(src, local / "d000" / f"e{i:02d}" / "f000.txt")
    time.sleep(2.1)  # past the racily-clean window, so the next run's warm plan trusts them


def one_run(args: argparse.Namespace, local: Path, remote: Path) -> dict[str, dict[str, float]]:
    """The whole sequence with a fresh data directory: each step's figures."""
    home = Path(tempfile.mkdtemp(prefix="placet-bench-home-"))
    figs: dict[str, dict[str, float]] = {}
    try:
        svc, ctx, drive, store = bench_service(home, local, remote)
        drive.capabilities()  # rcd up before timing, as in a running server

        def rcd() -> int | None:
            return drive.rcd_pid  # type: ignore[no-any-return]

        sp, figs["cold"] = step(
            "sync_plan cold (both caches empty)", lambda: plan_root(svc, ctx), rcd
        )
        assert sp.summary["skip"] >= args.files, sp.summary
        h = (svc.local_files_hashed, svc.remote_files_hashed)
        print(f"  hashed: {h[0]} local, {h[1]} remote")
        prof = cProfile.Profile() if args.profile else None
        if prof is not None:
            prof.enable()
        _, figs["warm"] = step("sync_plan warm (same process)", lambda: plan_root(svc, ctx), rcd)
        if prof is not None:
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        assert (svc.local_files_hashed, svc.remote_files_hashed) == h, "warm plan hashed files"
        figs["check"] = rclone_check(local, remote, home)
        edit(local, 1, 0)
        sp3, figs["edit"] = step("sync_plan warm, one file edited here",
                                 lambda: plan_root(svc, ctx), rcd)  # fmt: skip
        assert not sp3.reused and sp3.summary["conflict"] == 1, sp3.summary
        edit(local, EDITS, 1)
        sp4, figs["edits"] = step(f"sync_plan warm, {EDITS} files edited here",
                                  lambda: plan_root(svc, ctx), rcd)  # fmt: skip
        assert sp4.summary["conflict"] == EDITS, sp4.summary
        print(f"  hashed since cold: {svc.local_files_hashed - h[0]} local, "
              f"{svc.remote_files_hashed - h[1]} remote files")  # fmt: skip
        # Last: one recursive listing leaves rcd's heap grown for the steps after it.
        _, figs["floor"] = step("remote listing alone (rcd, no digests)",
                                lambda: len(drive.list_rows("")), rcd)  # fmt: skip
        drive.close()
        store.close()
        argv = [sys.executable, __file__, "--child", str(home), str(local), str(remote)]
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        child = json.loads(out.stdout.strip().splitlines()[-1])
        show("sync_plan warm, new process (persistent)", child)
        figs["child"] = child
    finally:
        shutil.rmtree(home, ignore_errors=True)
        restore(local, remote, EDITS)
    return figs


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=4)
    ap.add_argument("--large-mib", type=int, default=64)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-plan"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of the whole sequence")
    ap.add_argument("--profile", action="store_true", help="cProfile the warm plan")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_warm(*args.child)
        return 0
    local, remote = make_tree(args.dir, args.files, args.large, args.large_mib)
    runs = []
    for i in range(args.repeat):
        print(f"run {i + 1}/{args.repeat}: {args.files} files + {args.large} x {args.large_mib} "
              f"MiB", flush=True)  # fmt: skip
        runs.append(one_run(args, local, remote))

    def med(stepname: str, field: str) -> float:
        return statistics.median(r[stepname][field] for r in runs)

    print(f"medians of {len(runs)} runs (load {min(r[s]['load'] for r in runs for s in r):.1f}"
          f"-{max(r[s]['load'] for r in runs for s in r):.1f}):")  # fmt: skip
    for s in ("cold", "warm", "check", "floor", "edit", "edits", "child"):
        print(f"  {s:<8}{med(s, 'wall'):>8.2f} s wall {med(s, 'cpu'):>7.2f} s CPU  "
              f"RSS {med(s, 'rss'):>5.0f} + rcd {med(s, 'rcd_rss'):>5.0f} MiB")  # fmt: skip
    chk_w, chk_c = med("check", "wall"), med("check", "cpu")
    print(f"cold: {med('cold', 'wall') / chk_w:.2f}x rclone check's time by wall, "
          f"{med('cold', 'cpu') / chk_c:.2f}x by CPU (target <= 0.99x)")  # fmt: skip
    for s in ("edit", "edits", "warm", "child"):
        print(f"{s}: {med(s, 'wall') / med('floor', 'wall'):.2f}x the remote listing alone by "
              f"wall, {med(s, 'cpu') / med('floor', 'cpu'):.2f}x by CPU (target <= 1.3x); "
              f"{chk_w / med(s, 'wall'):.1f}x faster than rclone check")  # fmt: skip
    peaks = [max(r[s]["rss"] + r[s]["rcd_rss"] for s in r if s not in ("check", "floor"))
             for r in runs]  # fmt: skip
    alone = max(r[s]["rss"] for r in runs for s in r if s not in ("check", "floor"))
    print(
        f"peak RSS, planning process + rcd over all plans: {max(peaks):.0f} MiB; planning "
        f"process alone {alone:.0f} MiB; rclone check {med('check', 'rss'):.0f} MiB "
        "(target <= 300 MiB and <= rclone check)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
