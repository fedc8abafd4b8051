"""`sync_plan` through the service (index + remote listing + baseline + plan + store) on a
local-folder remote pair, beside `rclone check` on the same pair.

docs/design.md section 8: with warm digest caches at least 10x faster than `rclone check`;
cold within 1.2x of it. The tree: `--files` small files (64 to 2,063 bytes, 100 per
folder) plus `--large` files of `--large-mib` MiB, copied to a second folder that is the
drive (rclone's `local` backend, which computes digests by reading the files, so the
remote digest cache matters). Planning goes through `SyncService.make_plan`, the code
`sync_plan` runs, with a fresh data directory: cold = both digest caches empty; warm =
the same service again (a `placet serve` planning twice; both listings are taken and
fingerprinted, and an unchanged pair is answered with the stored plan); warm with one
file edited here (the pair is classified again and a new plan stored); warm, new
process = a fresh interpreter planning from the persistent caches alone. `rclone check`
(default flags: 8 checkers, md5 of both sides) runs on the same pair.

Wall and CPU seconds are printed; CPU includes rclone rcd and other children. Peak RSS
is the planning process's VmHWM per plan (reset before each through
/proc/self/clear_refs); rcd's is printed beside it. The bench's data directory sets
`plan_entry_cap` to the tree's file count (100,004 files by default, over the default cap;
at most 1,000,000, the setting's bound).

    .venv/bin/python bench/plan.py [--files 100000] [--large 4] [--large-mib 64]
        [--dir /tmp/placet-bench-plan] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
RCLONE = Path(sys.executable).parent / "rclone"


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


def _cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(label: str, fn: Callable[[], T], rcd: Callable[[], int | None]) -> tuple[T, float, float]:
    t, c, r = time.perf_counter(), _cpu(), proc_figure(rcd(), "cpu")
    out = fn()
    wall, cpu = time.perf_counter() - t, _cpu() - c + proc_figure(rcd(), "cpu") - r
    print(f"{label:<44}{wall:>8.2f} s wall {cpu:>8.2f} s CPU", flush=True)
    return out, wall, cpu


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
    t, c, r = time.perf_counter(), _cpu(), proc_figure(drive.rcd_pid, "cpu")
    plan_root(svc, ctx)
    wall, cpu = time.perf_counter() - t, _cpu() - c + proc_figure(drive.rcd_pid, "cpu") - r
    hashed = [svc.local_files_hashed, svc.remote_files_hashed]
    out = {"wall": wall, "cpu": cpu, "hashed": hashed, "peak_mib": proc_figure(os.getpid(), "rss")}
    print(json.dumps(out))
    drive.close()
    store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=4)
    ap.add_argument("--large-mib", type=int, default=64)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-plan"))
    ap.add_argument("--profile", action="store_true", help="cProfile the warm plan")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_warm(*args.child)
        return 0
    local, remote = make_tree(args.dir, args.files, args.large, args.large_mib)
    home = Path(tempfile.mkdtemp(prefix="placet-bench-home-"))
    try:
        svc, ctx, drive, store = bench_service(home, local, remote)
        drive.capabilities()  # rcd up before timing, as in a running server

        def rcd() -> int | None:
            return drive.rcd_pid  # type: ignore[no-any-return]

        def run(label: str) -> tuple[Any, float, float, float]:
            """One timed plan and this process's peak RSS (MiB) during it."""
            Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the RSS now
            sp, wall, cpu = timed(label, lambda: plan_root(svc, ctx), rcd)
            return sp, wall, cpu, proc_figure(os.getpid(), "rss")

        load = os.getloadavg()[0]
        print(f"{args.files} files + {args.large} x {args.large_mib} MiB; load {load:.1f}")
        sp, cold_w, cold_c, cold_rss = run("sync_plan cold (both caches empty)")
        assert sp.summary["skip"] >= args.files, sp.summary
        print(f"  hashed: {svc.local_files_hashed} local, {svc.remote_files_hashed} remote")
        h = (svc.local_files_hashed, svc.remote_files_hashed)
        prof = cProfile.Profile() if args.profile else None
        if prof is not None:
            prof.enable()
        sp2, warm_w, warm_c, warm_rss = run("sync_plan warm (same process)")
        if prof is not None:
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        assert (svc.local_files_hashed, svc.remote_files_hashed) == h, "warm plan hashed files"
        print(f"  plan {sp2.id} reused: {sp2.reused}")
        env = {"PATH": os.environ.get("PATH", ""), "RCLONE_CONFIG": "/dev/null"}
        env["HOME"] = str(home)
        argv = [str(RCLONE), "check", "-q", str(local), str(remote)]
        _, chk_w, chk_c = timed(
            "rclone check (same pair, md5, 8 checkers)",
            lambda: subprocess.run(argv, env=env, check=False),
            rcd,
        )
        _, warm2_w, warm2_c, _ = run("sync_plan warm again")
        # The floor: the remote listing alone, one lean recursive listing through rcd,
        # which a plan cannot do without (the drive is "any rclone remote").
        listed, list_w, list_c = timed(
            "remote listing alone (rcd, no digests)", lambda: drive.list_rows(""), rcd
        )
        del listed
        edited = local / "d000" / "e00" / "f000.txt"
        edited.write_bytes(os.urandom(100))  # one local edit: the plan is classified anew
        sp3, edit_w, edit_c, edit_rss = run("sync_plan warm, one file edited here")
        assert not sp3.reused and sp3.summary["conflict"] == 1, sp3.summary
        print(
            f"  hashed since cold: {svc.local_files_hashed - h[0]} local, "
            f"{svc.remote_files_hashed - h[1]} remote files"
        )
        rcd_rss = proc_figure(drive.rcd_pid, "rss")
        drive.close()
        store.close()
        child_argv = [sys.executable, __file__, "--child", str(home), str(local), str(remote)]
        out = subprocess.run(child_argv, capture_output=True, text=True, check=True)
        child = json.loads(out.stdout.strip().splitlines()[-1])
        label = "sync_plan warm, new process (persistent)"
        print(
            f"{label:<44}{child['wall']:>8.2f} s wall {child['cpu']:>8.2f} s CPU "
            f"(hashed {child['hashed']})"
        )
        warm_w, warm_c = min(warm_w, warm2_w), min(warm_c, warm2_c)
        print(
            f"warm: {chk_w / warm_w:.1f}x faster than rclone check by wall, "
            f"{chk_c / warm_c:.1f}x by CPU (target >= 10x)"
        )
        print(
            f"warm, new process: {chk_w / child['wall']:.1f}x by wall, "
            f"{chk_c / child['cpu']:.1f}x by CPU"
        )
        print(f"warm, one edit: {chk_w / edit_w:.1f}x by wall, {chk_c / edit_c:.1f}x by CPU")
        print(
            f"remote listing alone: {chk_w / list_w:.1f}x faster than rclone check by wall, "
            f"{chk_c / list_c:.1f}x by CPU (no plan can beat this ratio)"
        )
        print(
            f"cold: {cold_w / chk_w:.2f}x rclone check's time by wall, "
            f"{cold_c / chk_c:.2f}x by CPU (target <= 1.2x)"
        )
        print(
            f"peak RSS of the planning process (target < 300 MiB): cold {cold_rss:.0f}, "
            f"warm {warm_rss:.0f}, one edit {edit_rss:.0f}, new-process warm "
            f"{child['peak_mib']:.0f} MiB; rclone rcd {rcd_rss:.0f} MiB"
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f} (start {load:.1f})")
    finally:
        shutil.rmtree(home, ignore_errors=True)
        src = remote / "d000" / "e00" / "f000.txt"
        if src.exists():
            shutil.copy2(src, local / "d000" / "e00" / "f000.txt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
