"""Time from the owner's accept to the first op, in `placet accept`, the review UI and
`placet web`.

docs/design.md section 8: the first op starts within 1 s of the accept
for syncs up to 100,000 ops. A tree of `--ops` small files (100 per folder, so the sync
also creates `--ops`/100 folders, which run first) is planned and proposed through
`SyncService` / `propose_sync` (the code the MCP tools run; not timed) into a fresh data
directory with a local-folder drive. Then, for each front end:

- `cli`: `placet accept ID --yes` as a child process. The decision is the approval's
  audit event (its commit time); everything before it (reading, checking and showing
  the ops) is the owner's wait before deciding and is printed apart.
- `tui`: the review UI (`make_app`, Textual's headless driver) selects the proposal,
  `a` opens the confirmation (a large sync's ops are read and checked first), the
  proposal id is typed and, once the confirmation is drawn, Enter pressed: the
  decision is that key press.
- `web`: `placet web` served in this process (uvicorn on 127.0.0.1) and a software
  passkey (`tests.support.passkey`): the proposal's page is read, then the accept's
  challenge (every op read and checked); the decision is the POST of the passkey's
  answer, as the owner's touch sends it.

The first op has started when its folder shows on the drive (a thread lists the drive's
folder every 2 ms); the accept is stopped there (the rest is bench/sync_apply.py's).
Printed per front end and size: seconds from start to the decision, and from the
decision to the first op (the target: <= 1 s), with the box's load average.

    .venv/bin/python bench/first_op.py [--ops 10000,100000] [--fronts cli,tui,web]
        [--dir /tmp/placet-bench-first-op]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: accept_memory
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests

from accept_memory import make_tree, propose


class FirstEntry:
    """Watches folder `drive` until something appears in it; `seen` is the wall time."""

    def __init__(self, drive: Path) -> None:
        self.drive = drive
        self.seen: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            with os.scandir(self.drive) as it:
                if any(True for _ in it):
                    self.seen = time.time()
                    return
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _approved_at(home: Path, pid: int) -> float:
    """Wall time of proposal `pid`'s approval audit event."""
    from placet.config import load_settings
    from placet.store import open_store

    with open_store(load_settings({"PLACET_HOME": str(home)})) as store:
        events = [e for e in store.audit_events(proposal_id=pid) if e.to_status == "approved"]
    at: datetime = events[-1].at
    return at.timestamp()


def run_cli(home: Path, drive: Path, pid: int) -> dict[str, Any]:
    env = {**os.environ, "PLACET_HOME": str(home)}
    env.pop("PLACET_DRIVE", None)
    watch = FirstEntry(drive)
    t0 = time.time()
    argv = [sys.executable, "-m", "placet", "accept", str(pid), "--yes"]
    quiet = subprocess.DEVNULL
    proc = subprocess.Popen(argv, env=env, stdout=quiet, stderr=quiet)
    while watch.seen is None and proc.poll() is None:
        time.sleep(0.01)
    watch.stop()
    proc.send_signal(signal.SIGINT)  # the first op ran: stop cleanly, as the owner would
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    decided = _approved_at(home, pid)
    return {"to_decision": decided - t0, "decision_to_first_op": (watch.seen or 0) - decided}


def run_tui(home: Path, drive: Path, pid: int) -> dict[str, Any]:
    from placet.config import load_settings
    from placet.store import open_store
    from placet.tui import make_app
    from tests.support.review import confirm_accept, until

    settings = load_settings({"PLACET_HOME": str(home)})
    store = open_store(settings)
    app = make_app(settings, store, confirm_guard_seconds=0.0)
    got: dict[str, Any] = {}

    async def drive_it() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            t0 = time.time()
            assert await until(pilot, lambda: app.queue_table.selected() is not None, 120)
            screen = await confirm_accept(pilot, pid, decide=False)
            watch = FirstEntry(drive)
            decided = time.time()
            await pilot.press("enter" if screen.typed_required else "y")
            assert await until(pilot, lambda: watch.seen is not None, 600)
            watch.stop()
            got["to_decision"] = decided - t0
            got["decision_to_first_op"] = (watch.seen or 0) - decided
            got["approval_to_first_op"] = (watch.seen or 0) - _approved_at(home, pid)
            if app.transfer is not None:
                app.transfer[1].set()  # stop the run cleanly: the rest is not measured
            await until(pilot, lambda: app.transfer is None, 600)

    try:
        asyncio.run(drive_it())
    finally:
        store.close()
    return got


def run_web(home: Path, drive: Path, pid: int) -> dict[str, Any]:
    import json

    from placet.config import load_settings
    from placet.store import open_store
    from tests.support.passkey import SoftKey
    from tests.support.pins import register_pinned
    from tests.support.web import get, serve

    settings = load_settings({"PLACET_HOME": str(home)})
    store = open_store(settings)
    key = SoftKey()
    cid = "YmVuY2gtcGFzc2tleQ"
    session = store.open_session(register_pinned(store, cid, key.cose(), "bench").id)
    got: dict[str, Any] = {}
    try:
        with serve(store, settings) as served:
            record = store.get(pid)
            t0 = time.time()
            status, _ = get(served.url(f"/p/{pid}"), session, timeout=600)
            assert status == 200, status
            got["page"] = time.time() - t0
            shown = {"request_hash": record.request_hash, "skip_ops": []}
            status, text = served.post(f"/p/{pid}/challenge", shown, session=session, timeout=600)
            assert status == 200, text
            opts = json.loads(text)
            credential = key.assertion(opts, cid, origin=served.origin)
            watch = FirstEntry(drive)
            decided = time.time()
            body = {**shown, "nonce": opts["nonce"], "credential": credential}
            status, text = served.post(f"/p/{pid}/accept", body, session=session, timeout=600)
            assert status == 200, text
            while watch.seen is None and served.runs.running(pid):
                time.sleep(0.01)
            watch.stop()
            got["to_decision"] = decided - t0
            got["decision_to_first_op"] = (watch.seen or 0) - decided
    finally:  # leaving `serve` stopped the run (`Runs.stop`)
        store.close()
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ops", default="10000,100000", help="tree sizes, comma-separated")
    ap.add_argument("--fronts", default="cli,tui,web", help="cli, tui, web")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-first-op"))
    args = ap.parse_args()
    runs = {"cli": run_cli, "tui": run_tui, "web": run_web}
    fronts = [f for f in args.fronts.split(",") if f]
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    print(f"{'ops':>8} {'front':<5} {'to decision':>12} {'decision to first op':>21} {'load':>16}")
    for n in (int(x) for x in args.ops.split(",")):
        tree = make_tree(args.dir, n)
        for front in fronts:
            home, drive = args.dir / f"home-{front}", args.dir / f"drive-{front}"
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(drive, ignore_errors=True)
            drive.mkdir()
            pid = propose(home, drive, tree)
            got = runs[front](home, drive, pid)
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            print(f"{n:>8} {front:<5} {got['to_decision']:>10.2f} s"
                  f" {got['decision_to_first_op']:>19.2f} s {load:>16}", flush=True)  # fmt: skip
    shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
