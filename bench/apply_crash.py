"""A kill -9 in the middle of a large sync's apply, then the same proposal accepted again.

The deep tree of `bench/sync_apply.py` (`--files` files, 1-10 per folder, 6 levels) is
planned and proposed through the real code, then `placet accept ID --yes` runs as a child
on a local-folder drive (`--drive sftp`: `rclone serve sftp` of a local folder). Once
`--kill-at` of the ops are journaled the child alone gets SIGKILL (a crash of placet, not
of its children): rcd and every rclone it started must die with it. Accepted again, the
run is checked and printed: each planned op is journaled exactly once in the new attempt;
an op whose target was absent after the kill is `done` there, every other op
`already_done` (among them those in place but not journaled at the kill); every op done
before the kill left its target in place; `rclone check` finds the drive equal to the tree
(nothing missing, nothing extra); no `.placet-tmp-` name left on the drive or in the tree;
no rclone process left. Exit status 1 when a check fails. `--names hostile` plans a flat
tree instead (`hostile_tree`): about 50 files in each of `--files`/50 folders, every name
built from what filters, regexes and normal forms trip on.

    .venv/bin/python bench/apply_crash.py [--files 100000] [--kill-at 0.5] [--drive local]
        [--names deep|hostile]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: sync_apply

from accept_memory import propose
from sync_apply import RCLONE, Sftp, deep_tree

PLACET = Path(sys.executable).parent / "placet"
TEMP = ".placet-tmp-"
HOSTILE = (
    "a.b", "a|b", "(x)", "[x]", "{{x}}", "x}}", "}}{{", "^$", "*", "?", "+", "#x", "!x",
    "x-", "a;b", "`q`", "K", "Kelvin", "café", "Ωμέγα", "日本語", "naïve 🎉", "a b", "%2F",
    "'q'", '"q"', "x$", "{x", "(?=x)", "**", "x.*", "]x[", "x+?", "|", "{1,2}",
)  # fmt: skip
"""Name pieces hostile to rclone filters (globs, `{{regexp}}`), regexes and normal forms
(``K``, ``;`` and a backquote are NFC images of other characters); non-ASCII ones NFC.
None holds what a plan refuses (`skipped_special`: ``:``, a leading ``-``, a backslash),
so the drive must end equal to the tree."""


def hostile_tree(folder: Path, files: int, seed: int = 26) -> None:
    """About 50 files of 64 B-4 KiB per folder in `files` // 50 folders named from
    `HOSTILE`, each file name a piece, a piece with a suffix, or a 200-byte name, plus
    a folder holding only ``K.txt``: the same bytes for the same `files` and `seed`."""
    rng = random.Random(seed)
    (folder / "only-K").mkdir(parents=True)
    (folder / "only-K" / "K.txt").write_bytes(b"K")
    for k in range(max(1, files // 50)):
        d = folder / f"{HOSTILE[k % len(HOSTILE)]}{k // len(HOSTILE) or ''}"
        d.mkdir()
        names = {HOSTILE[(k + i) % len(HOSTILE)] + (f".{i}" if i else "") for i in range(49)}
        names.add((HOSTILE[k % len(HOSTILE)] + "é" * 100).encode()[:200].decode(errors="ignore"))
        for name in sorted(names):
            (d / name).write_bytes(rng.randbytes(rng.randint(64, 4096)))


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def journal(db: Path, pid: int, attempt: int) -> dict[int, tuple[str, Any]]:
    """Op index -> (outcome, op) of attempt `attempt`'s journal (read-only); an op
    journaled in progress has outcome ``in_progress``."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT op_index, CASE WHEN json_extract(detail, '$.code') = 'in_progress' "
            "THEN 'in_progress' ELSE outcome END, op FROM op_result "
            "WHERE proposal_id = ? AND attempt = ?",
            (pid, attempt),
        ).fetchall()
    finally:
        con.close()
    out: dict[int, tuple[str, Any]] = {}
    for i, outcome, op in rows:
        if i in out:
            raise SystemExit(f"op {i} journaled twice in attempt {attempt}")
        out[i] = (outcome, json.loads(op))
    return out


def ended(db: Path, pid: int) -> int:
    """Ops of attempt 1 journaled as ended (not the `in_progress` row an op gets before
    its transfer starts, naming its temporary names)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT count(*) FROM op_result WHERE proposal_id = ? AND attempt = 1 AND NOT "
            "(outcome = 'failed' AND json_extract(detail, '$.code') = 'in_progress')",
            (pid,),
        ).fetchone()
    finally:
        con.close()
    return int(row[0])


def tally(rows: dict[int, tuple[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for o, _ in rows.values():
        counts[o] = counts.get(o, 0) + 1
    return ", ".join(f"{n:,} {o}" for o, n in sorted(counts.items())) or "empty"


def planned(db: Path, pid: int) -> dict[int, Any]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT op_index, op FROM proposal_op WHERE proposal_id = ?", (pid,)
        ).fetchall()
    finally:
        con.close()
    return {i: json.loads(op) for i, op in rows}


def processes() -> dict[int, tuple[int, str]]:
    """Pid -> (parent pid, command line) of every process now."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[int(d.name)] = (ppid, cmd)
    return out


def descendants(root: int) -> dict[int, str]:
    procs = processes()
    out: dict[int, str] = {}
    todo = [root]
    while todo:
        p = todo.pop()
        for pid, (ppid, cmd) in procs.items():
            if ppid == p and pid not in out:
                out[pid] = cmd
                todo.append(pid)
    return out


def alive(pids: dict[int, str]) -> dict[int, str]:
    """Those of `pids` still running with the same command line (zombies count as gone)."""
    procs = processes()
    left = {}
    for pid, cmd in pids.items():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and procs.get(pid, (0, ""))[1] == cmd:
            left[pid] = cmd
    return left


def rclone_under(folder: Path) -> dict[int, str]:
    """rclone processes whose command line or environment names a path under `folder`."""
    out = {}
    for pid, (_, cmd) in processes().items():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            env = ""
        if "rclone" in cmd and (str(folder) in cmd or str(folder) in env):
            out[pid] = cmd
    return out


def temps(folder: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        out += [os.path.join(dirpath, n) for n in dirnames + filenames if n.startswith(TEMP)]
    return out


def accept(pid: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(PLACET), "accept", str(pid), "--yes"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # no controlling terminal
    )


def wait_gone(pids: dict[int, str], seconds: float) -> dict[int, str]:
    deadline = time.monotonic() + seconds
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--kill-at", type=float, default=0.5, help="fraction of ops journaled")
    ap.add_argument("--drive", choices=("local", "sftp"), default="local")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-apply-crash"))
    ap.add_argument("--names", choices=("deep", "hostile"), default="deep")
    ap.add_argument("--keep-tree", action="store_true", help="reuse the tree in --dir")
    args = ap.parse_args()
    tree, home = args.dir / "tree", args.dir / "home"
    if not (args.keep_tree and tree.is_dir()):
        shutil.rmtree(args.dir, ignore_errors=True)
        t = time.perf_counter()
        (hostile_tree if args.names == "hostile" else deep_tree)(tree, args.files)
        print(f"tree: {args.files:,} files in {time.perf_counter() - t:.0f} s", flush=True)
    for d in (home, args.dir / "drive", args.dir / "sftp"):
        shutil.rmtree(d, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACET_")}
    server = None
    if args.drive == "sftp":
        server = Sftp(args.dir / "sftp")
        target = server.root / "drive"
        target.mkdir()
        spec = server.spec(target)
        env["RCLONE_CONFIG"] = os.environ["RCLONE_CONFIG"] = str(server.config)
    else:
        target = args.dir / "drive"
        target.mkdir()
        spec = str(target)
    env |= {"PLACET_HOME": str(home), "PLACET_DRIVE": spec}
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failures.append(what)

    try:
        print(f"load average {load()}; {os.cpu_count()} CPUs; drive {args.drive}", flush=True)
        t = time.perf_counter()
        pid = propose(home, spec, tree)  # config.toml: allow_yes, drive; 4 transfers
        db = home / "placet.db"
        ops = planned(db, pid)
        n = len(ops)
        print(f"proposal {pid}: {n:,} ops planned and proposed in {time.perf_counter() - t:.1f} s")
        log = args.dir / "accept.log"
        os.sync()
        t = time.perf_counter()
        child = accept(pid, env, log)
        goal = max(1, int(n * args.kill_at))
        while (done := ended(db, pid)) < goal and child.poll() is None:
            time.sleep(0.05)
        kids = descendants(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        killed_after = time.perf_counter() - t
        names = ", ".join(" ".join(c.split()[:2]).rsplit("/", 1)[-1] for c in kids.values())
        print(f"kill -9 after {killed_after:.1f} s at {done:,} ops journaled ended "
              f"({done / n:.0%}); load {load()}; its children then: {names or 'none'}",
              flush=True)  # fmt: skip
        check(child.returncode == -signal.SIGKILL, "the child died of the kill, not before it")
        left = wait_gone(kids, 30)
        check(not left, f"its {len(kids)} children died with it within 30 s (left: {left})")
        for p in left:
            os.kill(p, signal.SIGKILL)
        first = journal(db, pid, 1)
        present = {str(p.relative_to(target)) for p in target.rglob("*") if TEMP not in p.name}
        crash_temps = temps(target)
        lost = {
            i for i, op in ops.items()
            if op.get("remote_path") in present and first.get(i, ("",))[0] != "done"
        }  # fmt: skip
        print(f"after the kill: attempt 1 journal {tally(first)}; {len(lost):,} ops in"
              f" place but not journaled done; {len(crash_temps)} temporary names on the"
              " drive")  # fmt: skip
        t = time.perf_counter()
        again = accept(pid, env, log)
        rc = again.wait()
        took = time.perf_counter() - t
        print(f"re-accept: exit {rc} in {took:.1f} s; load {load()}", flush=True)
        check(rc == 0, f"re-accept exits 0 (log {log})")
        second = journal(db, pid, 2)
        print(f"attempt 2 journal: {tally(second)}")
        check(set(second) == set(ops), f"attempt 2 journals every planned op ({len(second):,} "
              f"of {len(ops):,})")  # fmt: skip
        check(all(second[i][1] == op for i, op in ops.items() if i in second),
              "each journal row holds its op as planned")  # fmt: skip
        twice = [i for i in ops if first.get(i, ("",))[0] == "done" and second[i][0] == "done"]
        check(not twice, f"no op done in both attempts ({len(twice)})")
        wrong = [
            i for i, op in ops.items()
            if second.get(i, ("",))[0] != ("already_done" if op.get("remote_path") in present
                                           else "done")
        ]  # fmt: skip
        check(not wrong, f"done exactly where the target was absent after the kill, else "
              f"already_done ({len(wrong)} wrong, e.g. {wrong[:3]})")  # fmt: skip
        check(
            all(second[i][0] == "already_done" for i in lost),
            f"the {len(lost):,} ops in place but not journaled report already_done",
        )
        gone = [i for i, (o, op) in first.items() if o == "done" and op.get("remote_path")
                not in present]  # fmt: skip
        check(not gone, f"every op done before the kill left its target ({len(gone)} missing)")
        t = time.perf_counter()
        rcheck = subprocess.run(
            [str(RCLONE), "check", str(tree), str(target), "--config", "/dev/null"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        tail = rcheck.stderr.strip().splitlines()[-3:]
        print(f"rclone check: {time.perf_counter() - t:.1f} s; {' | '.join(tail)}")
        check(rcheck.returncode == 0, "rclone check: the drive equals the tree, no file "
              "missing or extra")  # fmt: skip
        left_temps = temps(target) + temps(tree)
        check(not left_temps, f"no temporary name on the drive or in the tree ({left_temps[:3]})")
        stray = rclone_under(args.dir)
        if server is not None:
            stray.pop(server.proc.pid, None)
        check(not stray, f"no rclone process left ({stray})")
    finally:
        if server is not None:
            server.close()
    print(f"load average {load()}; {'all checks passed' if not failures else 'FAILED'}")
    if not failures:
        shutil.rmtree(args.dir / "drive", ignore_errors=True)
        shutil.rmtree(args.dir / "sftp", ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
