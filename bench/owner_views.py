"""The owner's views of a 100,000-op sync proposal: the review UI and `placet show`.

Review UI (`placet review` on a pseudo-terminal, xterm-256color, 160x48, as
bench/tui_open.py runs it): the queue holds one upload (selected at start) and the
sync. The clock starts when the Down key that selects the sync is written and stops
when the op table's first rows and its caption ("of 100,000") have been painted; then
the time until placet's risk flags (computed in a worker over every op) are painted;
then Tab Tab (focus: the detail pane, then its op table) and End: the time until the
last op's path is painted. Again with Tab Tab End sent right after the table painted,
while the flags worker still reads the ops (`busy`).
CPU seconds of the review process over the whole run are printed beside the walls.

`placet show ID` (the summary), `--all` and `--json`: wall seconds, bytes written,
and the peak RSS of the `placet` process (ru_maxrss of the waited child).

    .venv/bin/python bench/owner_views.py [--ops 100000] [--runs 3]

Targets: the op table painted < 0.5 s after selecting; `show` a summary, `--all`/`--json` streamed.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PLACET = str(Path(sys.executable).parent / "placet")
ROOT = {"name": "proj", "path": "/home/owner/proj", "device": 1, "inode": 2}
DRIVE = "bench:"


def seed(home: Path, n: int) -> int:
    """One pending upload, then a pending sync of `n` ops (one flagged); the sync's id."""
    from placet.config import load_settings
    from placet.store import open_store

    home.mkdir(parents=True, mode=0o700)
    (home / "config.toml").write_text(f'drive = "{DRIVE}"\n')
    os.environ["PLACET_HOME"] = str(home)
    store = open_store(load_settings())
    now = datetime.now(UTC)
    absent = {"exists": False, "is_dir": False, "size": None, "mtime": None,
              "digest_type": None, "digest": None}  # fmt: skip
    store.create_proposal(
        kind="upload",
        request={"kind": "upload", "root": ROOT, "local_path": "a.txt", "remote_parent": "up",
                 "name": "a.txt", "replace_existing": False},
        evidence={"local": {"size": 5, "mtime_ns": 1, "sha256": "ab" * 32}, "remote": absent},
        reason="one upload first", drive_spec=DRIVE, run_id="bench", ttl_seconds=1800, now=now,
    )  # fmt: skip
    ops: list[dict[str, Any]] = [
        {"index": 0, "kind": "mkdir", "local_path": None, "remote_path": "big", "size": None,
         "expected_local": None, "expected_remote": absent, "replace": False, "reason": "new"}
    ]  # fmt: skip
    for i in range(1, n):
        path = f"big/dir-{i // 100:04d}/file-{i:06d}.txt" if i != n // 2 else "big/.bashrc"
        ops.append({
            "index": i, "kind": "upload", "local_path": path, "remote_path": path,
            "size": 100 + i % 2000, "replace": False, "reason": "new here",
            "expected_remote": absent,
            "expected_local": {"size": 100 + i % 2000, "mtime_ns": 1, "sha256": f"{i:064x}",
                               "digest_type": None, "digest": None},
        })  # fmt: skip
    rec, _ = store.create_proposal(
        kind="sync",
        request={"kind": "sync", "plan_id": 1, "root": ROOT, "local_path": "", "remote_path": "",
                 "decisions": {}, "ops": ops},
        evidence={"plan": {"id": 1}}, reason="sync everything", drive_spec=DRIVE,
        run_id="bench", ttl_seconds=1800, now=now,
    )  # fmt: skip
    store.close()
    return rec.id


def read_until(fd: int, buf: bytearray, needles: list[bytes], timeout: float) -> float | None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if all(n in buf for n in needles):
            return time.perf_counter()
        import select

        ready, _, _ = select.select([fd], [], [], 0.02)
        if ready:
            try:
                buf += os.read(fd, 1 << 16)
            except OSError:
                return None
    return time.perf_counter() if all(n in buf for n in needles) else None


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def review_run(env: dict[str, str], n: int, *, busy: bool = False) -> dict[str, float]:
    """One `placet review`: Down, then (unless `busy`) the flags painted, then Tab Tab
    End. `busy`: Tab Tab End right after the table painted, while the flags worker runs
    (the owner scrolling while placet checks the ops)."""
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        os.execve(PLACET, [PLACET, "review"], env)
    buf = bytearray()
    out: dict[str, float] = {}
    try:
        if read_until(fd, buf, [b"up/a.txt", b"2 pending"], 60) is None:
            raise SystemExit(f"no first paint; last output {bytes(buf[-300:])!r}")
        time.sleep(1.0)  # let the first frame and the upload's detail settle
        read_until(fd, buf, [b"\x00never"], 0.2)
        buf.clear()
        t = time.perf_counter()
        os.write(fd, b"\x1b[B")  # Down: select the sync
        painted = read_until(fd, buf, [b"file-000001.txt", f"of {n:,}".encode()], 60)
        if painted is None:
            raise SystemExit(f"op table not painted; last output {bytes(buf[-300:])!r}")
        out["table"] = painted - t
        if not busy:
            flagged = read_until(fd, buf, [b"risk flags (1)"], 120)
            out["flags"] = (flagged - t) if flagged is not None else float("nan")
        buf.clear()
        t = time.perf_counter()
        os.write(fd, b"\t\t")  # focus: the detail pane, then its op table
        time.sleep(0.05)
        os.write(fd, b"\x1b[F")  # End: the last op
        last = read_until(fd, buf, [f"file-{n - 1:06d}.txt".encode()], 60)
        out["end"] = (last - t) if last is not None else float("nan")
        out["cpu"] = cpu_seconds(pid)
        os.write(fd, b"q")
        read_until(fd, buf, [b"\x00never"], 0.5)
    finally:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return out


def show_run(env: dict[str, str], args: list[str]) -> tuple[float, int, float]:
    """(wall seconds, bytes written, peak RSS MiB) of `placet show ...` (this process
    stays small: the seeding ran in a child, so the fork's image does not count)."""
    t = time.perf_counter()
    proc = subprocess.Popen([PLACET, "show", *args], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    size = 0
    while chunk := proc.stdout.read(1 << 16):
        size += len(chunk)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    assert status == 0, status
    return wall, size, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", metavar="HOME", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.seed:
        print(seed(Path(args.seed), args.ops))
        return
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        t = time.perf_counter()
        sid = int(subprocess.run([sys.executable, __file__, "--ops", str(args.ops), "--seed",
                                  str(home)], check=True, capture_output=True, text=True,
                                 ).stdout.split()[-1])  # fmt: skip
        print(f"seeded a {args.ops}-op sync in {time.perf_counter() - t:.1f} s", flush=True)
        env = dict(os.environ, PLACET_HOME=str(home), TERM="xterm-256color", LANG="C.UTF-8")
        runs = [review_run(env, args.ops) for _ in range(args.runs)]
        busy = [review_run(env, args.ops, busy=True) for _ in range(args.runs)]
        vals = [r["end"] for r in busy]
        print(f"review: Down, at once Tab Tab End -> last op painted (flags worker busy): "
              f"median {med(vals):.3f} s (max {max(vals):.3f})")  # fmt: skip
        steps = (("table", "Down -> op table painted"), ("end", "Tab End -> last op painted"),
                 ("flags", "Down -> risk flags painted (worker)"))  # fmt: skip
        for key, what in steps:
            vals = [r[key] for r in runs]
            print(f"review: {what}: median {med(vals):.3f} s (min {min(vals):.3f}, "
                  f"max {max(vals):.3f}; {args.runs} runs)")  # fmt: skip
        print(
            f"review: CPU seconds of the process per run: median {med(r['cpu'] for r in runs):.2f}"
        )
        for extra in ([], ["--all"], ["--json"]):
            res = [show_run(env, [str(sid), *extra]) for _ in range(args.runs)]
            print(
                f"placet show {sid} {' '.join(extra)}: median {med(w for w, _, _ in res):.2f} s, "
                f"{res[0][1]:,} bytes, peak RSS {max(r for _, _, r in res):.0f} MiB",
                flush=True,
            )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
