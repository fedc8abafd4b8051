"""Every reply fits a host, at 100,000 files (issue 11): the scenario of
tests/server/test_reply_budget.py at sizes too slow for a test, timed.

A fresh data directory and a local-folder drive; `--files` small generated files (4-10
bytes, 250 per folder) under the root. Through the official MCP client and a real
`placet serve`: local_index (every page), sync_plan (every page), propose_sync,
proposal_get x2, proposal_list, proposal_wait, proposal_ops (every page), then
drive_changes (every page) after as many files appeared on the drive. Each reply's
text and structured content (UTF-8 JSON) is checked against the 40,000-byte budget, and
the paged ops against the plan (`tests/support/budget.py`). With `--apply` the owner
then accepts (`placet accept --yes`, timed) and the ops paged again are the ops that ran.

Printed: seconds per stage, calls and the largest text / structured reply per tool.

    .venv/bin/python bench/reply_budget.py [--files 100000] [--apply] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: `tests`

from tests.support.budget import (  # the tests' scenario, shared
    Measured,
    check_ran,
    make_tree,
    plan_and_propose,
)
from tests.support.mcp import PLACET, connect, make_workspace


async def run(files: int, apply: bool, base: Path) -> dict[str, Any]:
    home = base / "home"
    home.mkdir(parents=True)
    ws = make_workspace(base, home)
    ws.write_config(allow_yes=True, plan_entry_cap=max(100_000, files))
    stages: dict[str, float] = {}
    last = time.monotonic()

    def tick(what: str) -> None:
        nonlocal last
        now = time.monotonic()
        stages[what] = round(now - last, 2)
        last = now
        print(f"  {what}: {stages[what]} s", flush=True)

    make_tree(ws.root / "big", files)
    (ws.drive / "big").mkdir()
    tick("generate files")
    async with connect(ws) as client:
        m = Measured(client)
        last = time.monotonic()
        anchor = (await m.call("drive_changes", path="big"))["anchor"]
        proposed = await plan_and_propose(m, "big", "big", files, tick)
        make_tree(ws.drive / "big" / "copied", files)
        last = time.monotonic()
        added = [c for p in await m.pages("drive_changes", path="big", since_anchor=anchor)
                 for c in p["changes"]]  # fmt: skip
        assert len(added) == len(proposed.paged) + 1  # the files, their folders, "copied"
        tick("drive_changes (every page)")
        if apply:
            r = subprocess.run(  # no timeout: applying is the executor's pace
                [PLACET, "accept", "--yes", str(proposed.pid)],
                env={**os.environ, **ws.env}, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if r.returncode != 0:
                raise SystemExit(f"placet accept failed: {r.stderr}")
            tick("placet accept (applying)")
            await check_ran(m, proposed, "big", ws.drive)
            tick("proposal_wait + proposal_ops after the run")
    return {
        "files": files,
        "ops": len(proposed.paged),
        "seconds": stages,
        "calls": m.calls,
        "largest_text_structured": m.largest,
        "budget": m.budget,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--apply", action="store_true", help="accept and run it, then check")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp dir)")
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="placet-bench-reply-"))
    try:
        out = asyncio.run(run(args.files, args.apply, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
