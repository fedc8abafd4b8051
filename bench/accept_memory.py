"""`placet accept` of a big sync: peak RSS and time to the first transfer.

A tree of `--ops` small files (4-40 bytes, 100 per folder) is planned and proposed
through `SyncService` / `propose_sync` (the code the MCP tools run; not timed) into a
fresh data directory with a local-folder drive and ``allow_yes = true``. Then
`placet accept ID --yes` runs as a child process (stderr a pipe: one line per op
result). Printed: seconds from the start of the child to its first op result line
(a folder), to the first file op's result line (the first transfer), to exit; and the
child's peak RSS (ru_maxrss of the waited child, MiB: the largest of placet and the
rclone processes it waited for), placet's own peak RSS (VmRSS sampled every 50 ms) and
that peak by the first file's result, and placet's CPU seconds by then (the wall
times depend on the load of the box; the CPU seconds much less). With `--peer DIR`, the same is
run again with the placet package found in DIR (e.g. an exported tree of the base
commit: `git archive BASE | tar -x -C DIR`), on a copy of the same database, in the
same run.

    .venv/bin/python bench/accept_memory.py [--ops 100000] [--peer /tmp/peer]
        [--dir /tmp/placet-bench-accept]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def make_tree(base: Path, n: int) -> Path:
    tree = base / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    for d in range((n + 99) // 100):
        folder = tree / f"d{d:04d}"
        folder.mkdir(parents=True)
        for f in range(min(100, n - d * 100)):
            (folder / f"f{f:03d}.txt").write_bytes(os.urandom(4 + (f * 7 + d) % 37))
    return tree


def propose(home: Path, drive_dir: Path | str, tree: Path) -> int:
    """A fresh data directory `home` holding one pending sync of `tree` to drive
    `drive_dir` (a folder or an rclone path); its id."""
    from placet.config import load_settings
    from placet.drive import drive_for
    from placet.paths.roots import parse_root_spec
    from placet.proposals.context import ProposeContext
    from placet.store import open_store
    from placet.sync.propose import propose_sync
    from placet.sync.service import SyncService

    home.mkdir(parents=True, mode=0o700)
    (home / "config.toml").write_text(f'allow_yes = true\ndrive = "{drive_dir}"\n')
    settings = load_settings({"PLACET_HOME": str(home)})
    store = open_store(settings)
    drive = drive_for(settings)
    try:
        root = parse_root_spec(f"bench={tree}", settings.data_dir)
        ctx = ProposeContext(settings=settings, store=store, drive=drive, roots=(root,),
                             run_id="bench", drive_spec=drive.spec)  # fmt: skip
        svc = SyncService(store, settings)
        plan = svc.make_plan(ctx, svc.folder(ctx, "", None), "", include_hidden=False,
                             allow_empty_side=False)  # fmt: skip
        rec, _ = propose_sync(svc, ctx, plan_id=plan.id, decisions={}, reason="bench")
        return rec.id
    finally:
        drive.close()
        store.close()


def _cpu_of(pid: int) -> float:
    """CPU seconds of process `pid` so far (its own, not its children's)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def accept(home: Path, pid: int, pythonpath: str | None) -> dict[str, Any]:
    """Run `placet accept PID --yes` in `home`; times and the child's peak RSS."""
    env = {**os.environ, "PLACET_HOME": str(home)}
    env.pop("PLACET_DRIVE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    argv = [sys.executable, "-m", "placet", "accept", str(pid), "--yes"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=home if pythonpath else None)  # fmt: skip
    first_op = first_file = None
    lines = 0
    rss = {"now": 0.0, "peak": 0.0, "at_first_file": 0.0, "cpu_first_file": 0.0}
    stop = threading.Event()

    def sample() -> None:  # the placet process's own RSS (rcd and rclone children apart)
        while not stop.wait(0.05):
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                return
            for row in status.splitlines():
                if row.startswith("VmRSS:"):
                    rss["now"] = int(row.split()[1]) / 1024
                    rss["peak"] = max(rss["peak"], rss["now"])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    for raw in proc.stderr:
        line = raw.decode("utf-8", "replace")
        if "] #" not in line:
            continue
        lines += 1
        now = time.perf_counter() - t0
        if first_op is None:
            first_op = now
        if first_file is None and ".txt" in line:
            first_file = now
            rss["at_first_file"] = rss["peak"]
            rss["cpu_first_file"] = _cpu_of(proc.pid)
    stop.set()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "first_op": first_op, "first_file": first_file,
            "wall": wall, "rss_mib": usage.ru_maxrss / 1024, "results": lines,
            "cpu": usage.ru_utime + usage.ru_stime, "rss_first": rss["at_first_file"],
            "rss_own": rss["peak"], "cpu_first": rss["cpu_first_file"]}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000, help="files in the tree")
    ap.add_argument("--peer", type=Path, help="a tree holding another placet/ to compare")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-accept"))
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    t = time.perf_counter()
    tree = make_tree(args.dir, args.ops)
    seed = args.dir / "seed"
    pid = propose(seed, args.dir / "drive-seed", tree)
    print(f"tree of {args.ops} files planned and proposed in {time.perf_counter() - t:.1f} s")
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average before: {' '.join(load)}; {os.cpu_count()} CPUs")
    runs = [("this tree", None)] + ([("peer", str(args.peer.resolve()))] if args.peer else [])
    print(f"{'code':<10} {'rc':>3} {'first op':>9} {'first file':>11} {'its CPU':>9}"
          f" {'wall':>9} {'CPU':>9}"
          f" {'peak RSS':>10} {'own peak':>10} {'by 1st file':>11} {'results':>8}")  # fmt: skip
    for label, path in runs:
        work = Path(tempfile.mkdtemp(prefix="run-", dir=args.dir))
        home = work / "home"
        shutil.copytree(seed, home)
        drive_dir = args.dir / "drive-seed"
        shutil.rmtree(drive_dir, ignore_errors=True)
        drive_dir.mkdir()
        got = accept(home, pid, path)

        def s(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f} s"

        print(f"{label:<10} {got['rc']:>3} {s(got['first_op']):>9} {s(got['first_file']):>11}"
              f" {s(got['cpu_first']):>9}"
              f" {s(got['wall']):>9} {s(got['cpu']):>9} {got['rss_mib']:>6.0f} MiB"
              f" {got['rss_own']:>6.0f} MiB {got['rss_first']:>7.0f} MiB"
              f" {got['results']:>8}", flush=True)  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average after: {' '.join(load)}")
    shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
