"""Hashing throughput: placet's one-pass `hash_fd` beside `openssl dgst` on one file.

docs/design.md section 8: hashing one digest type must be within 10% of `openssl dgst` of
that type on the same file; both types together are reported. The file is read once
before timing so every run reads from the page cache (the comparison is of hashing, not
of the disk). Each figure is the best of `--runs` runs, in MB/s (10^6 bytes per second),
by wall clock and by CPU time (user + system, openssl's counted as a child's): on a
shared machine the CPU figure is the steadier one.

    .venv/bin/python bench/hash.py [--size-mib 1024] [--runs 3] [--file PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from placet.sync.digests import hash_fd

TYPES = ("sha256", "sha1", "md5")
Timing = tuple[float, float]  # (wall seconds, CPU seconds)


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def best_of(runs: int, fn: Callable[[], object]) -> Timing:
    walls, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), _cpu()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(_cpu() - c)
    return min(walls), min(cpus)


def placet_hash(path: Path, types: tuple[str, ...]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        hash_fd(fd, types)
    finally:
        os.close(fd)


def openssl(path: Path, t: str) -> None:
    subprocess.run(["openssl", "dgst", f"-{t}", str(path)], check=True, capture_output=True)


def make_file(size: int) -> Path:
    fd, name = tempfile.mkstemp(prefix="placet-hash-bench-", dir="/tmp")
    with os.fdopen(fd, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    return Path(name)


def row(label: str, mb: float, o: Timing, p: Timing, note: str = "") -> None:
    print(
        f"{label:<14}{mb / o[0]:>7.0f} /{mb / o[1]:>5.0f}{mb / p[0]:>9.0f} /{mb / p[1]:>5.0f}"
        f"{o[0] / p[0]:>9.2f} /{o[1] / p[1]:>5.2f}{note}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--file", type=Path, help="an existing file instead of a fresh random one")
    args = ap.parse_args()
    if shutil.which("openssl") is None:
        print("openssl not found", file=sys.stderr)
        return 1
    path = args.file or make_file(args.size_mib << 20)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:  # warm the page cache
            while f.read(1 << 24):
                pass
        mb = size / 1e6
        print(f"file: {size >> 20} MiB, best of {args.runs}; MB/s as wall / CPU")
        print(f"{'type':<14}{'openssl':>13}{'placet':>15}{'placet/openssl':>16}")
        single = {t: best_of(args.runs, lambda t=t: openssl(path, t)) for t in TYPES}
        for t in TYPES:
            row(t, mb, single[t], best_of(args.runs, lambda t=t: placet_hash(path, (t,))))
        for combo in (("sha256", "sha1"), ("sha256", "md5")):
            o = (sum(single[t][0] for t in combo), sum(single[t][1] for t in combo))
            p = best_of(args.runs, lambda c=combo: placet_hash(path, c))
            row("+".join(combo), mb, o, p, "  (openssl: two runs; placet: one pass)")
    finally:
        if args.file is None:
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
