"""`propose_sync` of a stored plan of N ops, at two sizes, and the ratio between them.

The plan is synthetic but stored and proposed through the real code: a plan of `n`
uploads (a long path each, SHA-256 and SHA-1 evidence; one folder per 100 files, so
mkdir ops too) is saved with `SyncData.save_plan` for the pair (root folder, local-folder
drive), then `placet.sync.propose.propose_sync` turns it into a pending proposal (what
the MCP tool `propose_sync` runs: load the plan, build the ops, write the proposal and
its op rows in one transaction). Each size gets a fresh data directory. Also printed:
`Store.get` of the proposal (what every `proposal_get` / `proposal_wait` pays), and a
page of 200 ops through `Store.ops`.

    .venv/bin/python bench/propose.py [--sizes 10000,100000] [--runs 3] [--profile]

The same script runs against an older placet tree as the peer (`PYTHONPATH=<tree>`):
there a page of ops is a slice of `Store.get`'s inline list.

Target: 100k/10k <= 12, i.e. linear in ops.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

PER_FOLDER = 100


def build(home: Path, n: int) -> tuple[Any, Any, int]:
    """A store, service and context in a fresh `home`, and a stored plan of `n` ops."""
    from placet.config import load_settings
    from placet.drive import drive_for
    from placet.paths.roots import parse_root_spec
    from placet.proposals.context import ProposeContext
    from placet.store import open_store
    from placet.sync.entries import LocalEntry
    from placet.sync.model import PlanOp, SyncPlan
    from placet.sync.service import SyncService
    from placet.sync.tables import Pair

    local, remote = home / "local", home / "drive"
    local.mkdir(parents=True)
    remote.mkdir()
    home.chmod(0o700)
    settings = load_settings({"PLACET_HOME": str(home / "placet"), "PLACET_DRIVE": str(remote)})
    store = open_store(settings)
    drive = drive_for(settings)
    root = parse_root_spec(f"bench={local}", settings.data_dir)
    ctx = ProposeContext(settings=settings, store=store, drive=drive, roots=(root,),
                         run_id="bench", drive_spec=drive.spec)  # fmt: skip
    svc = SyncService(store, settings)
    folders = (n + PER_FOLDER - 1) // PER_FOLDER
    ops = [PlanOp(f"project-folder-{f:05d}", "mkdir", None, "missing on the drive")
           for f in range(folders)]  # fmt: skip
    for i in range(n - folders):
        path = f"project-folder-{i // PER_FOLDER:05d}/some-longer-file-name-{i:07d}.txt"
        h = hashlib.sha256(path.encode()).hexdigest()
        entry = LocalEntry(path, path, "file", 64 + i % 2000, 1_700_000_000_000_000_000 + i,
                           h, "sha1", h[:40], True)  # fmt: skip
        ops.append(PlanOp(path, "upload", entry.size, "new here", entry, None))
    plan = SyncPlan(tuple(ops), (), {"upload": n - folders, "mkdir": folders}, "l" * 64, "r" * 64)
    stored = svc.data.save_plan(
        pair=Pair(str(root.path), "", drive.spec, ""), root_name="bench", options={},
        plan=plan, baseline_generation=0, meta={"digest_type": "sha1"}, skips=[],
    )  # fmt: skip
    return svc, ctx, stored.id


def one(n: int, profile: bool) -> dict[str, float]:
    from placet.sync.propose import propose_sync

    with tempfile.TemporaryDirectory() as tmp:
        svc, ctx, plan_id = build(Path(tmp), n)
        # A fresh service, as a new `placet serve` would load the plan from the store.
        prof = cProfile.Profile() if profile else None
        t, c = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        rec, created = propose_sync(svc, ctx, plan_id=plan_id, decisions={}, reason="bench")
        if prof:
            prof.disable()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        store = ctx.store
        by_reference = hasattr(store, "op_count")  # False: a placet that stores ops inline (peer)
        assert (
            created and (store.op_count(rec.id) if by_reference else len(rec.request["ops"])) == n
        )
        t = time.perf_counter()
        store.get(rec.id)
        get = time.perf_counter() - t
        t = time.perf_counter()
        page = (store.ops(rec.id, start=n // 2, limit=200) if by_reference
                else store.get(rec.id).request["ops"][n // 2 : n // 2 + 200])  # fmt: skip
        page_s = time.perf_counter() - t
        assert len(page) == 200
        size = os.path.getsize(ctx.settings.db_path)
        ctx.drive.close()
        ctx.store.close()
        if prof:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return {"wall": wall, "cpu": cpu, "get": get, "page": page_s, "db_mb": size / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    med: dict[int, dict[str, float]] = {}
    for n in sizes:
        runs = [one(n, args.profile) for _ in range(args.runs)]
        med[n] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        m = med[n]
        print(
            f"propose_sync {n:>7} ops: median {m['wall']:.2f} s wall, {m['cpu']:.2f} s CPU "
            f"({args.runs} runs; min {min(r['wall'] for r in runs):.2f}); Store.get "
            f"{m['get'] * 1000:.1f} ms; a page of 200 ops {m['page'] * 1000:.1f} ms; "
            f"database {m['db_mb']:.0f} MiB",
            flush=True,
        )
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        print(
            f"ratio {hi}/{lo} ops: {med[hi]['wall'] / med[lo]['wall']:.1f}x wall, "
            f"{med[hi]['cpu'] / med[lo]['cpu']:.1f}x CPU (linear: {hi / lo:.0f}x; target <= 12)"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
