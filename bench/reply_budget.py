"""What an agent reads to plan and propose a sync, at 100,000 files and on a real tree: the
scenario of tests/server/test_reply_budget.py at sizes too slow for a test, timed.

Trees, each in a fresh data directory with a local-folder drive: `--files` small
generated files (4-10 bytes, 250 per folder), and with `--site-packages` a copy of this
environment's own site-packages (a real tree nobody here wrote: thousands of files in
hundreds of folders, a few bytes to tens of MiB). Through the official MCP client and a
real `placet serve`, for each tree: an agent following the tool descriptions plans and
proposes (sync_plan, again while it answers in_progress, then propose_sync), first with
no conflict, then with `--conflicts` remote files made to conflict and decided
keep_local. The whole task's bytes are what a host hands the model
(`tests.support.budget.model_bytes`: the structured content as compact JSON, an error's
text); the targets are 20,000 bytes with no conflict and 60,000 with 50 conflicts.
Then, outside the task, the plan's ops are listed by kind and checked against the
proposal's, each once, and every reply is checked against the 40,000-byte budget. With
`--apply` the owner accepts the last proposal (`placet accept --yes`, timed) and the
ops paged again are the ops that ran.

Printed: per tree and conflict count, the task's bytes and replies, seconds per stage,
the largest text / structured reply per tool, and the bytes of `tools/list` (a reply
too, within the same budget).

    .venv/bin/python bench/reply_budget.py [--files 100000] [--conflicts 50]
        [--site-packages] [--apply] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: `tests`

from tests.support.budget import (  # the tests' scenario, shared
    Measured,
    Proposed,
    check_ran,
    make_conflicts,
    make_tree,
    plan_and_propose,
    tools_list_bytes,
)
from tests.support.mcp import PLACET, connect, make_workspace

TASK_TARGET = {0: 20_000, 50: 60_000}


def copy_site_packages(dest: Path) -> list[str]:
    """A copy of this environment's site-packages at `dest`; the relative paths of its
    regular files with names placet syncs (no hidden name on the way)."""
    shutil.copytree(sysconfig.get_paths()["purelib"], dest, symlinks=True)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(dest):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if not name.startswith(".") and p.is_file() and not p.is_symlink():
                out.append(p.relative_to(dest).as_posix())
    return out


async def run_tree(
    tree: str, files: int | None, conflicts: int, apply: bool, base: Path
) -> dict[str, Any]:
    home = base / "home"
    home.mkdir(parents=True)
    ws = make_workspace(base, home)
    ws.write_config(allow_yes=True, plan_entry_cap=max(100_000, files or 0))
    stages: dict[str, float] = {}
    last = time.monotonic()

    def tick(what: str) -> None:
        nonlocal last
        now = time.monotonic()
        stages[what] = round(now - last, 2)
        last = now
        print(f"  {tree}: {what}: {stages[what]} s", flush=True)

    if files is None:
        paths = copy_site_packages(ws.root / "big")
    else:
        paths = make_tree(ws.root / "big", files)
    (ws.drive / "big").mkdir()
    tick(f"make the tree ({len(paths)} files)")
    tasks: dict[str, Any] = {}
    async with connect(ws) as client:
        m = Measured(client)
        listing = tools_list_bytes(await client.list_tools())
        print(f"  {tree}: tools/list is {listing:,} bytes", flush=True)
        if listing > m.budget:
            raise SystemExit(f"tools/list is {listing} bytes, over the {m.budget}-byte budget")
        last = time.monotonic()
        anchor = (await m.call("drive_changes", path="big"))["anchor"]
        proposed: Proposed | None = None
        for k in (0, conflicts) if conflicts else (0,):
            chosen = paths[:: max(1, len(paths) // k)][:k] if k else []
            make_conflicts(ws.drive / "big", chosen)
            proposed = await plan_and_propose(
                m, "big", "big", None, lambda w, k=k: tick(f"{k} conflicts: {w}"),
                conflicts=chosen,
            )  # fmt: skip
            tasks[f"{k} conflicts"] = {
                "task_bytes": proposed.task_bytes,
                "task_replies": proposed.task_replies,
                "target": TASK_TARGET.get(k),
                "ops": len(proposed.paged),
            }
            print(f"  {tree}: {k} conflicts: the task read {proposed.task_bytes:,} bytes in "
                  f"{proposed.task_replies} replies", flush=True)  # fmt: skip
        assert proposed is not None
        last = time.monotonic()
        summary = await m.call("drive_changes", path="big", since_anchor=anchor)
        tick("drive_changes (summary)")
        tasks["drive_changes summary bytes"] = len(json.dumps(summary, separators=(",", ":")))
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
        "tree": tree,
        "files": len(paths),
        "task": tasks,
        "seconds": stages,
        "calls": m.calls,
        "largest_text_structured": m.largest,
        "tools_list_bytes": listing,
        "budget": m.budget,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000, help="generated files (0: none)")
    ap.add_argument("--conflicts", type=int, default=50, help="conflicts of the second run")
    ap.add_argument("--site-packages", action="store_true", help="also a site-packages copy")
    ap.add_argument("--apply", action="store_true", help="accept and run it, then check")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp dir)")
    args = ap.parse_args()
    trees: list[tuple[str, int | None]] = []
    if args.files:
        trees.append((f"{args.files} generated files", args.files))
    if args.site_packages:
        trees.append(("site-packages copy", None))
    out = []
    for i, (tree, files) in enumerate(trees):
        base = (args.dir or Path(tempfile.mkdtemp(prefix="placet-bench-reply-"))) / f"t{i}"
        try:
            out.append(asyncio.run(run_tree(tree, files, args.conflicts, args.apply, base)))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
