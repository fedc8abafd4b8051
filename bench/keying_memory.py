"""Memory of keying two listings (`read_listings`, as a plan does it: shared strings, the
heap's free pages returned between the sides) over synthetic entries, without a drive:
the peak of Python's traced allocations and the process's peak RSS above the start.

Local entries come in path order (as the index gives them), remote ones per top-level
folder, its subfolders first and then their files (as rclone lists a piece), so the
remote fingerprint sorts a copy. A 31 MiB block is freed first, which raises glibc's mmap
threshold as a long plan's earlier steps do (big tables then come from the heap).

    .venv/bin/python bench/keying_memory.py [--entries 1000000] [--no-release]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path

from placet.sync.entries import (
    LocalEntry,
    OneDigest,
    PlanCapabilities,
    RemoteEntry,
    new_local_entry,
    new_remote_entry,
)
from placet.sync.heap import release_free_heap
from placet.sync.listings import read_listings

DIGEST = "ab" * 32
MTIME = "2025-01-01T00:00:00Z"


def _rss() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process, MiB."""
    got = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            got[line[:5]] = int(line.split()[1]) / 1024
    return got["VmRSS"], got["VmHWM"]


def listings(files: int) -> tuple[tuple[LocalEntry, ...], list[RemoteEntry]]:
    """`files` files, 100 a folder, 10 folders a top-level folder; both sides alike."""
    loc: list[LocalEntry] = []
    for i in range(files // 100):
        top = f"d{i // 10:03d}"
        if i % 10 == 0:
            loc.append(new_local_entry(top, top, "dir", 0, 0, None, None, None, False, ""))
        sub = f"{top}/e{i % 10:02d}"
        loc.append(new_local_entry(sub, sub, "dir", 0, 0, None, None, None, False, ""))
        for j in range(100):
            p = f"{sub}/f{i * 100 + j:07d}.txt"
            loc.append(new_local_entry(p, p, "file", 64, 1, DIGEST, "sha256", DIGEST, True, ""))
    by_top: dict[str, list[LocalEntry]] = {}
    for e in loc:
        by_top.setdefault(e.path.split("/")[0], []).append(e)
    rem = [
        new_remote_entry(e.path, e.kind, e.size, MTIME, OneDigest("sha256", DIGEST))
        if e.kind == "file"
        else new_remote_entry(e.path, e.kind, 0, MTIME, {})
        for es in by_top.values()
        for e in sorted(es, key=lambda e: e.kind != "dir")
    ]
    return tuple(loc), rem


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000, help="files a side")
    ap.add_argument("--no-release", action="store_true", help="keep the heap's free pages")
    args = ap.parse_args()
    block = bytearray(31 * 2**20)
    del block
    loc, rem = listings(args.entries)
    caps = PlanCapabilities(hash_types=("sha256",))
    hook = None if args.no_release else release_free_heap
    Path("/proc/self/clear_refs").write_text("5")
    start, _ = _rss()
    cpu = time.process_time()
    got = read_listings(loc, rem, caps, share=True, entry_cap=10**8, between_sides=hook)
    cpu = time.process_time() - cpu
    after, peak = _rss()
    del got
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    read_listings(loc, rem, caps, share=True, entry_cap=10**8, between_sides=hook)
    traced = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    tracemalloc.stop()
    print(f"{len(loc):,} entries a side: RSS peak +{peak - start:.0f} MiB (held after "
          f"+{after - start:.0f}), traced peak {traced:.1f} MiB, {cpu:.2f} s CPU")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
