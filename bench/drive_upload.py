"""Upload of one large file to a local-folder remote: `RcloneDrive.upload_from_fd` vs
`rclone copyto`.

docs/design.md section 8: executing an accepted 1 GiB upload to a local-folder remote must be
within 1.1x of `rclone copyto` alone. This measures the drive's share of that: stream
from placet's descriptor into `rclone rcat` while hashing SHA-256, verify the temp
object's SHA-256 through rcd, move it into place. `rclone copyto` (default flags) copies
by name and checks md5 of both sides. The source is read once before timing so every run
reads from the page cache. The two are run alternately and each figure is the best of
`--runs` runs, so background load hits both alike; CPU seconds (this process, its
children and rcd) are printed beside wall seconds as the steadier figure on a busy box.

    .venv/bin/python bench/drive_upload.py [--size-mib 1024] [--runs 3]

`--per-size N` instead times N uploads of each size in `--sizes` (KiB) through both
upload paths, rcd (`operations/uploadfile`) and `rclone rcat`, by setting
`Transfers.rcd_upload_max`: where a per-file rcat process stops mattering, which is
how `RCD_UPLOAD_MAX` was chosen.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from placet.drive import RcloneDrive
from placet.drive.proc import child_env

RCLONE = Path(sys.executable).parent / "rclone"
CHUNK = 1 << 24


def _proc_cpu(pid: int | None) -> float:
    """user + system CPU seconds of a running process (rcd), 0 if unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(
    fn: Callable[[int], object], i: int, rcd: Callable[[], int | None]
) -> tuple[float, float]:
    """(wall, CPU) seconds of `fn(i)`: this process, its finished children, and rcd."""
    t, c, r = time.perf_counter(), _cpu(), _proc_cpu(rcd())
    fn(i)
    return time.perf_counter() - t, _cpu() - c + _proc_cpu(rcd()) - r


def make_source(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with path.open("wb") as f:
        left = size
        block = os.urandom(CHUNK)
        while left:
            part = block[: min(CHUNK, left)]
            f.write(part)
            h.update(part)
            left -= len(part)
    return h.hexdigest()


def per_size(n: int, sizes_kib: list[int]) -> None:
    """Per-file wall and CPU (ms) of `upload_from_fd` through rcd and through rcat."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        base = Path(tmp)
        root = base / "drive"
        root.mkdir()
        env = {"RCLONE_CONFIG": "/dev/null"}
        with RcloneDrive(str(root), rclone_path=RCLONE, env=env, run_dir=base / "run") as drive:
            drive.capabilities()
            print(
                f"{'size':>8} {'rcd wall':>9} {'CPU':>7} {'rcat wall':>10} {'CPU':>7}",
                "(ms per file)",
            )
            for kib in sizes_kib:
                src = base / f"src-{kib}"
                sha = make_source(src, kib << 10)
                row = []
                for limit in (kib << 10, -1):  # rcd, then rcat
                    drive.transfers.rcd_upload_max = limit
                    fd = os.open(src, os.O_RDONLY)

                    def up(
                        i: int, fd: int = fd, kib: int = kib, limit: int = limit, sha: str = sha
                    ) -> None:
                        drive.upload_from_fd(
                            fd, kib << 10, f"{kib}-{limit}-{i}", expected_sha256=sha
                        )

                    got = [timed(up, i, lambda: drive.rcd_pid) for i in range(n)]
                    os.close(fd)
                    row.append((sum(w for w, _ in got) / n * 1e3, sum(c for _, c in got) / n * 1e3))
                    for p in root.iterdir():
                        p.unlink()
                print(
                    f"{kib:>5} KiB {row[0][0]:>9.1f} {row[0][1]:>7.1f}"
                    f" {row[1][0]:>10.1f} {row[1][1]:>7.1f}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--per-size", type=int, default=0, help="files per size (0: off)")
    ap.add_argument("--sizes", default="1,64,256,1024,2048,4096,8192", help="KiB, comma-separated")
    args = ap.parse_args()
    if args.per_size:
        per_size(args.per_size, [int(x) for x in args.sizes.split(",")])
        return
    size = args.size_mib << 20
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        base = Path(tmp)
        src, root = base / "src.bin", base / "drive"
        root.mkdir()
        sha = make_source(src, size)
        env = child_env({"RCLONE_CONFIG": "/dev/null"})

        def copyto(i: int) -> None:
            subprocess.run(
                [str(RCLONE), "copyto", "--", str(src), str(root / f"copyto-{i}.bin")],
                env=env,
                check=True,
            )

        with RcloneDrive(
            str(root), rclone_path=RCLONE, env={"RCLONE_CONFIG": "/dev/null"}, run_dir=base / "run"
        ) as drive:
            drive.capabilities()

            def upload(i: int) -> None:
                fd = os.open(src, os.O_RDONLY)
                try:
                    r = drive.upload_from_fd(fd, size, f"placet-{i}.bin", expected_sha256=sha)
                finally:
                    os.close(fd)
                assert r.verification == "digest:sha256", r

            src.read_bytes()  # warm the page cache
            copy_runs, up_runs = [], []
            for i in range(args.runs):  # interleaved, so both see the same background load
                copy_runs.append(timed(copyto, i, lambda: None))
                up_runs.append(timed(upload, i, lambda: drive.rcd_pid))
                for p in root.iterdir():  # keep the disk footprint at one pair
                    if p.is_file():
                        p.unlink()
    mib = size / (1 << 20)
    t_copy, c_copy = min(w for w, _ in copy_runs), min(c for _, c in copy_runs)
    t_up, c_up = min(w for w, _ in up_runs), min(c for _, c in up_runs)
    print(f"file: {mib:.0f} MiB, best of {args.runs} (wall s / CPU s)")
    print(f"rclone copyto:              {t_copy:6.2f} / {c_copy:6.2f}  {mib / t_copy:7.1f} MiB/s")
    print(f"RcloneDrive.upload_from_fd: {t_up:6.2f} / {c_up:6.2f}  {mib / t_up:7.1f} MiB/s")
    print(
        f"ratio upload_from_fd / copyto: wall {t_up / t_copy:.2f}, CPU {c_up / c_copy:.2f}"
        " (target <= 1.10)"
    )


if __name__ == "__main__":
    main()
