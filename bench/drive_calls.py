"""Per-call cost of rclone metadata calls: a fresh `rclone` process vs a warm `rclone rcd`.

This decides how `placet.drive` talks to rclone for listings and metadata
(docs/decisions/0006-rcd-and-uploads.md). Each figure is the median of
`--runs` calls, in milliseconds, on a local-folder remote with `--entries` small files.

    .venv/bin/python bench/drive_calls.py [--runs 30] [--entries 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from placet.drive import RcloneDrive
from placet.drive.proc import COMMON_FLAGS, child_env

RCLONE = Path(sys.executable).parent / "rclone"


def median_ms(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--entries", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "drive"
        root.mkdir()
        for i in range(args.entries):
            (root / f"f{i:03d}.txt").write_bytes(os.urandom(4096))
        env = child_env({"RCLONE_CONFIG": "/dev/null"})

        def cli(*a: str) -> None:
            subprocess.run(
                [str(RCLONE), *COMMON_FLAGS, *a], env=env, check=True, capture_output=True
            )

        rows = [
            ("subprocess `rclone version`", lambda: cli("version")),
            (
                "subprocess `rclone lsjson --stat` (one file)",
                lambda: cli("lsjson", "--stat", "--", f"{root}/f000.txt"),
            ),
            (
                f"subprocess `rclone lsjson` ({args.entries} entries)",
                lambda: cli("lsjson", "--", str(root)),
            ),
        ]
        with RcloneDrive(
            str(root),
            rclone_path=RCLONE,
            env={"RCLONE_CONFIG": "/dev/null"},
            run_dir=Path(tmp) / "run",
        ) as drive:
            t = time.perf_counter()
            drive.capabilities()
            start_ms = (time.perf_counter() - t) * 1000
            rows += [
                ("rcd `rc/noop` (unix socket)", lambda: drive.calls.rcd.call("rc/noop", {})),
                ("rcd `RcloneDrive.stat` (one file)", lambda: drive.stat("f000.txt")),
                (
                    f"rcd `RcloneDrive.list_folder` ({args.entries} entries)",
                    lambda: drive.list_folder(""),
                ),
                (
                    "rcd `RcloneDrive.stat(include_digest)` (sha256+sha1+md5, 4 KiB)",
                    lambda: drive.stat("f000.txt", include_digest=True),
                ),
            ]
            print(f"rcd start + first call (fsinfo): {start_ms:.1f} ms")
            for name, fn in rows:
                print(f"{name}: {median_ms(args.runs, fn):.2f} ms")


if __name__ == "__main__":
    main()
