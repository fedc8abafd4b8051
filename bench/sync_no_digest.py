"""Plan-time cost of binding a sync's transfers to content on a remote without digests
(`placet.sync.content`).

`rclone serve webdav` of a local folder on 127.0.0.1 (no digests) holds `--files` new
files of `--size` bytes each, so a plan of an empty local folder has that many
downloads, each read once while planning to record its SHA-256. Timed, in one run and
on fresh plan services (medians of `--runs`):

- `plan, bound`: `SyncService.make_plan` as placet runs it (list, classify, read every
  download's bytes through rcd's `operations/hashsumfile`, store);
- `plan, not read`: the same with a read budget of 0 files, so every download is
  reported `unbound` and nothing is read (the plan as it cost before, less the ops);
- per file, one read through rcd (`Drive.content_sha256`) and one through `rclone cat`
  into /dev/null (`Drive.download_to_fd`, what a single download proposal reads with),
  medians over `--per-file` files.

    .venv/bin/python bench/sync_no_digest.py [--files 200] [--size 4096] [--runs 3]
        [--per-file 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from placet.config import load_settings
from placet.drive import RcloneDrive
from placet.store import open_store
from placet.sync.content import ReadBudget
from placet.sync.service import SyncService

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: `tests`

from tests.support.drives import RCLONE, serve
from tests.support.rig import make_rig


def _median(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--per-file", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["PLACET_HOME"] = str(base / "home")
        served = serve("webdav", base / "served", base / "server-home")
        try:
            folder = served.root / "bench"
            folder.mkdir()
            for i in range(args.files):
                (folder / f"d{i % 10}").mkdir(exist_ok=True)
                (folder / f"d{i % 10}/f{i:04d}.bin").write_bytes(os.urandom(args.size))
            drive = RcloneDrive(
                served.spec("bench"),
                rclone_path=RCLONE,
                env={"RCLONE_CONFIG": "/dev/null"},
                run_dir=base / "run",
            )
            settings = load_settings()
            rig = make_rig(settings, drive, base, folder)
            store = open_store(rig.settings)

            tick = iter(range(1_000_000))

            def plan(budget: ReadBudget) -> int:
                # A new mtime on one file: a new listing, so no identical stored plan
                # is handed out again (`SyncData.find_plan`) and every run plans.
                t = 1_700_000_000 + next(tick)
                os.utime(folder / "d0/f0000.bin", (t, t))
                svc = SyncService(store, rig.settings)
                svc.read_budget = budget
                p = svc.make_plan(
                    rig.ctx,
                    svc.folder(rig.ctx, "", None),
                    "",
                    include_hidden=False,
                    allow_empty_side=False,
                )
                return len(p.plan.content)

            assert plan(ReadBudget()) == args.files  # warm rcd and the server
            bound = _median(args.runs, lambda: plan(ReadBudget()))
            unread = _median(args.runs, lambda: plan(ReadBudget(files=0)))
            names = [f"d{i % 10}/f{i:04d}.bin" for i in range(args.per_file)]
            it = iter(names * args.runs)
            rcd = _median(len(names), lambda: drive.content_sha256(next(it)))

            def cat() -> None:
                fd = os.open(os.devnull, os.O_WRONLY)
                try:
                    drive.download_to_fd(next(it2), fd)
                finally:
                    os.close(fd)

            it2 = iter(names)
            cli = _median(len(names), cat)
            drive.close()
            store.close()
        finally:
            served.stop()
    n, kib = args.files, args.size / 1024
    print(f"webdav on 127.0.0.1, {n} new remote files of {kib:g} KiB, median of {args.runs}")
    print(f"plan, bound (reads {n} files): {bound:.2f} s")
    print(f"plan, not read (budget 0):     {unread:.2f} s")
    per = (bound - unread) / n * 1000
    print(f"  bound / not read: {bound / unread:.1f}x; {per:.0f} ms more per bound file")
    print(f"one read through rcd (hashsumfile): {rcd * 1000:.0f} ms")
    print(f"one read through rclone cat:        {cli * 1000:.0f} ms ({cli / rcd:.1f}x)")


if __name__ == "__main__":
    main()
