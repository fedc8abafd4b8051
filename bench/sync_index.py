"""Local indexing and pure planning at scale, beside `rclone check` on the same pair.

docs/design.md section 8: `sync_plan` on 100,000 local files with warm digest caches must be
at least 10x faster than `rclone check`, and cold within 1.2x. This bench measures the
two parts placet does itself, the indexer (cold: every file hashed, SHA-256 + SHA-1;
warm: digests from the cache) and the planner, on N small files in 1,000 folders, and
`rclone check` (local to local, which hashes both sides) on a copy of the tree. The
remote listing is given to the planner in memory (what the drive adapter returns is
measured by the drive's own bench). Times are wall / CPU seconds.

    .venv/bin/python bench/sync_index.py [--files 100000] [--dir /tmp/placet-bench]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from placet.sync import PlanCapabilities, RemoteEntry, plan
from placet.sync.cache import MemoryDigestCache
from placet.sync.indexer import index_local
from placet.sync.local_tree import LocalTree

T = TypeVar("T")


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(label: str, fn: Callable[[], T]) -> tuple[T, float]:
    t, c = time.perf_counter(), _cpu()
    out = fn()
    wall = time.perf_counter() - t
    print(f"{label:<34}{wall:>8.2f} s wall {_cpu() - c:>8.2f} s CPU")
    return out, wall


def make_tree(root: Path, files: int) -> None:
    per = max(files // 1000, 1)
    for d in range((files + per - 1) // per):
        folder = root / f"d{d:04d}"
        folder.mkdir(parents=True)
        for f in range(min(per, files - d * per)):
            (folder / f"f{f:04d}.txt").write_bytes(os.urandom(64 + (f * 37) % 2000))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench"))
    ap.add_argument("--rclone", default=str(Path(".venv/bin/rclone").absolute()))
    args = ap.parse_args()
    base = args.dir / f"tree-{args.files}"
    if not base.exists():
        make_tree(base, args.files)
    cap = args.files * 2
    cache = MemoryDigestCache()

    def index() -> list:  # type: ignore[type-arg]
        tree = LocalTree(
            base, "", digest_types=["sha1"], cache=cache, root_key="bench",
            now_ns=time.time_ns() + 10**10, entry_cap=cap,
        )  # fmt: skip
        res = index_local(tree)
        return list(res.entries)

    print(f"{args.files} files under {base}")
    entries, cold = timed("index, cold (sha256 + sha1)", index)
    entries, warm = timed("index, warm (cache hits)", index)
    remote = [
        RemoteEntry(e.path, "dir" if e.kind == "dir" else "file", e.size,
                    "2025-01-01T00:00:00Z", {"sha1": e.digest} if e.digest else {})
        for e in entries
    ]  # fmt: skip
    caps = PlanCapabilities(hash_types=("sha1",))
    _, planned = timed(
        "plan (everything equal)", lambda: plan(entries, remote, {}, caps, entry_cap=cap)
    )
    copy = args.dir / f"copy-{args.files}"
    if not copy.exists():
        shutil.copytree(base, copy)
    env = {"PATH": os.environ.get("PATH", ""), "RCLONE_CONFIG": "/dev/null", "HOME": str(args.dir)}
    _, check = timed(
        "rclone check (local to local)",
        lambda: subprocess.run(
            [args.rclone, "check", "-q", str(base), str(copy)], env=env, check=False
        ),
    )
    print(f"warm index + plan vs rclone check: {check / (warm + planned):.1f}x faster")
    print(f"cold index + plan vs rclone check: {(cold + planned) / check:.2f}x its time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
