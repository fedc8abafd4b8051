"""The owner's time to accept 10 proposals in `placet review`: one by one, or marked.

Ten real uploads (small files, a local-folder drive) are proposed through the core, then
accepted in the review app driven by Textual's Pilot, with the confirmation's real guard
(0.5 s) and the real executor:
* one by one: for each, `a`, wait for the guard, `y`, wait until it ran (one transfer at
  a time; the cursor stays where the accepted row was, on the next one);
* marked: `space` ten times, `a`, wait for the guard once, `y`, wait until all ran.
It prints the keys pressed, the guards waited, the time from the first key to the last
(the owner's part: one by one it includes waiting for each run, since the next accept
waits for the transfer) and to the last proposal `succeeded`, medians of `--runs`
(figures go to docs/performance.md).

    .venv/bin/python bench/accept_many.py [--proposals 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from placet.config import load_settings
from placet.drive import drive_for
from placet.paths.roots import parse_root_spec
from placet.proposals.context import ProposeContext
from placet.proposals.making import propose_upload
from placet.store import Store, open_store
from placet.tui import make_app
from placet.tui.confirm import GuardedConfirm


def seed(base: Path, n: int) -> tuple[Any, Store, list[int]]:
    """A fresh home with a local-folder drive and `n` pending uploads: (settings, store,
    ids)."""
    home, drive_dir, root = base / "home", base / "drive", base / "proj"
    for d in (home, drive_dir, root):
        d.mkdir(parents=True, mode=0o700)
    os.environ["PLACET_HOME"] = str(home)
    (home / "config.toml").write_text(f'drive = "{drive_dir}"\n')
    settings = load_settings()
    store = open_store(settings)
    drive = drive_for(settings)
    ctx = ProposeContext(
        settings=settings, store=store, drive=drive,
        roots=(parse_root_spec(f"proj={root}", settings.data_dir),),
        run_id="bench", drive_spec=str(drive_dir), client_name="bench",
    )  # fmt: skip
    ids = []
    try:
        for i in range(n):
            (root / f"report-{i:02d}.md").write_bytes(f"report {i}\n".encode() * 10)
            rec, _ = propose_upload(
                ctx, local_path=f"report-{i:02d}.md", remote_parent="reports", reason="bench"
            )
            ids.append(rec.id)
    finally:
        drive.close()
    return settings, store, ids


async def until(pilot: Any, predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the review app did not get there in time")
        await pilot.pause(0.02)


async def accept(n: int, marked: bool) -> tuple[int, int, float, float]:
    """(keys pressed, guards waited, seconds to the last key, seconds until all ran) to
    accept and run `n` proposals."""
    with tempfile.TemporaryDirectory() as tmp:
        settings, store, ids = seed(Path(tmp), n)
        app = make_app(settings, store)  # the real guard: 0.5 s
        keys = guards = 0

        def done() -> bool:
            return all(store.get(i).status == "succeeded" for i in ids)

        def armed() -> bool:
            return isinstance(app.screen, GuardedConfirm) and app.screen.armed

        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.queue_table.order) == n)
            start = time.perf_counter()
            if marked:
                for _ in ids:
                    await pilot.press("space")
                await pilot.press("a")
                await until(pilot, armed)
                await pilot.press("y")
                keys, guards = n + 2, 1
                last_key = time.perf_counter() - start
                await until(pilot, done)
            else:
                for pid in ids:
                    await until(pilot, lambda pid=pid: app.queue_table.selected_id() == pid)
                    await pilot.press("a")
                    await until(pilot, armed)
                    await pilot.press("y")
                    keys, guards = keys + 2, guards + 1
                    last_key = time.perf_counter() - start
                    await until(pilot, lambda pid=pid: app.transfer is None
                                and store.get(pid).status == "succeeded")  # fmt: skip
            wall = time.perf_counter() - start
            await until(pilot, lambda: app.transfer is None)
        store.close()
        return keys, guards, last_key, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proposals", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for marked in (False, True):
        runs = [asyncio.run(accept(args.proposals, marked)) for _ in range(args.runs)]
        keys, guards = runs[0][0], runs[0][1]
        last = statistics.median(r[2] for r in runs)
        walls = sorted(r[3] for r in runs)
        print(
            f"{'marked    ' if marked else 'one by one'}: {args.proposals} proposals, {keys} keys, "
            f"{guards} guard wait(s), last key at {last:.2f} s, all ran at "
            f"{statistics.median(walls):.2f} s (median of {', '.join(f'{w:.2f}' for w in walls)})"
        )


if __name__ == "__main__":
    main()
