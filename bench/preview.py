"""What content previews cost when proposing: `propose_upload` with and without them, and
a 10,000-op `propose_sync` with them (seconds and database growth), plus opening one op.

Upload: `--uploads` 64 KiB text files are proposed through the core the MCP tool runs
(`placet.proposals.making.propose_upload`: hash for the evidence, one pending row, and
with previews the file's first 64 KiB kept by that same read and stored), alternating a
context with previews (`preview_op_bytes` 65536, the default) and one without (0) over
one store and one local-folder drive, after `--warmup` of each. Target: p50
with previews <= 1.3x p50 without.

Sync: `--files` small files in a root, planned through `SyncService` (untimed), then
`propose_sync` timed, with previews on and off (a fresh data directory each): seconds,
and the database file's growth (`-wal` included) from before the proposal to after it.
A sync's previews are read op by op when opened, so proposing stores none; opening
`--opens` ops' previews (`open_preview` + `render_op`: a bounded local read checked
against the evidence) is timed after it.

    .venv/bin/python bench/preview.py [--uploads 300] [--files 10000] [--opens 200]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from placet.config import load_settings
from placet.drive import drive_for
from placet.executor import op_at
from placet.paths.roots import parse_root_spec
from placet.preview.model import render_op
from placet.preview.opening import open_preview
from placet.proposals.context import ProposeContext
from placet.proposals.making import propose_upload
from placet.store import open_store
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService

ROOMY = {"pending_total": 1_000_000, "pending_per_session": 1_000_000}


def _setup(home: Path, **changes: Any) -> tuple[Any, Any, Any, Path]:
    local, remote = home / "local", home / "drive"
    local.mkdir(parents=True)
    remote.mkdir()
    home.chmod(0o700)
    settings = load_settings({"PLACET_HOME": str(home / "placet"), "PLACET_DRIVE": str(remote)})
    settings = settings.model_copy(update={**ROOMY, **changes})
    store = open_store(settings)
    drive = drive_for(settings)
    root = parse_root_spec(f"bench={local}", settings.data_dir)
    ctx = ProposeContext(settings=settings, store=store, drive=drive, roots=(root,),
                         run_id="bench", drive_spec=drive.spec)  # fmt: skip
    return ctx, store, drive, local


def _text(i: int, size: int) -> bytes:
    line = f"line {i:06d}: the quick brown fox jumps over the lazy dog, row ".encode()
    out = (line * (size // len(line) + 1))[: size - 1] + b"\n"
    return out


def uploads(n: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ctx, store, drive, local = _setup(Path(tmp))
        off = ProposeContext(**{**ctx.owner_fields(), "settings": ctx.settings.model_copy(
            update={"preview_op_bytes": 0})})  # fmt: skip
        times: dict[str, list[float]] = {"with": [], "without": []}
        for i in range(2 * (n + warmup)):
            name = f"f{i:06d}.txt"
            (local / name).write_bytes(_text(i, 64 * 1024))
            mode = "with" if i % 2 == 0 else "without"
            t = time.perf_counter()
            propose_upload(ctx if mode == "with" else off, local_path=name, remote_parent="",
                           reason="bench")  # fmt: skip
            if i >= 2 * warmup:
                times[mode].append(time.perf_counter() - t)
        size = os.path.getsize(ctx.settings.db_path)
        drive.close()
        store.close()
    p50 = {k: statistics.median(v) * 1000 for k, v in times.items()}
    p99 = {k: sorted(v)[int(len(v) * 0.99) - 1] * 1000 for k, v in times.items()}
    print(
        f"propose_upload of a 64 KiB text file ({n} each, alternating): p50 with previews "
        f"{p50['with']:.2f} ms, without {p50['without']:.2f} ms: "
        f"{p50['with'] / p50['without']:.2f}x "
        f"(target <= 1.3x); p99 {p99['with']:.2f} / {p99['without']:.2f} ms; database "
        f"{size / 2**20:.1f} MiB after {2 * (n + warmup)} proposals",
        flush=True,
    )


def _db_bytes(db: Path) -> int:
    return sum(os.path.getsize(p) for p in (db, Path(f"{db}-wal")) if p.exists())


def sync(files: int, opens: int, previews: bool) -> None:
    cap = 64 * 1024 if previews else 0
    with tempfile.TemporaryDirectory() as tmp:
        ctx, store, drive, local = _setup(Path(tmp), preview_op_bytes=cap)
        for i in range(files):
            folder = local / f"d{i // 100:04d}"
            folder.mkdir(exist_ok=True)
            (folder / f"file-{i:06d}.txt").write_bytes(_text(i, 200 + i % 3000))
        svc = SyncService(store, ctx.settings)
        stored = svc.make_plan(ctx, svc.folder(ctx, "", None), "", include_hidden=False,
                               allow_empty_side=False)  # fmt: skip
        svc.wait_for_writes()
        before = _db_bytes(ctx.settings.db_path)
        t = time.perf_counter()
        rec, created = propose_sync(svc, ctx, plan_id=stored.id, decisions={}, reason="bench")
        wall = time.perf_counter() - t
        assert created
        growth = _db_bytes(ctx.settings.db_path) - before
        n = store.op_count(rec.id)
        stored_previews = store.preview_bytes(rec.id)
        took: list[float] = []
        kinds: dict[str, int] = {}
        for index in random.Random(1).sample(range(n), min(opens, n)):
            t = time.perf_counter()
            op = op_at(store, rec, index)
            shown = render_op(open_preview(store, ctx.settings, rec, op, lambda: drive))
            took.append(time.perf_counter() - t)
            kinds[shown.title.split(",")[0]] = kinds.get(shown.title.split(",")[0], 0) + 1
        drive.close()
        store.close()
    label = "with" if previews else "without"
    opened = (
        f"; opening one op's preview: p50 {statistics.median(took) * 1000:.2f} ms, max "
        f"{max(took) * 1000:.2f} ms ({len(took)} ops: {kinds})"
        if previews
        else ""
    )
    print(
        f"propose_sync of {n} ops {label} previews: {wall:.2f} s, database +{growth / 2**20:.2f} "
        f"MiB, previews stored {stored_previews} B{opened}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--uploads", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--opens", type=int, default=200)
    args = ap.parse_args()
    uploads(args.uploads, args.warmup)
    for previews in (True, False):
        sync(args.files, args.opens, previews)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
