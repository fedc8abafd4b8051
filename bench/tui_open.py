"""Time from `placet review` process start to its first painted queue, with 10,000 pending.

docs/design.md section 8: "`placet review` paints its queue of 10,000 pending proposals within
1 s of process start". The real entry point runs on a pseudo-terminal (xterm-256color,
160x48); the clock starts just before the fork and stops when the bytes of the first
row and of the count line ("10000 pending") have both been written. Import time is
reported separately (a fresh interpreter importing `placet.cli` and `placet.tui`, as the
command does), and so are the store reads behind each reload and the time to page in
the next page of 200 rows (End key to the count line saying "400 loaded"). On a busy
machine the wall times grow with the load; the CPU seconds the process used until its
first paint (from /proc) are reported beside them as the load-independent figure.

    .venv/bin/python bench/tui_open.py [--pending 10000] [--runs 5]

The caps (`pending_total`, `pending_per_session`) are raised in the benchmark's own
config.toml, since the defaults (1,000 / 100) would refuse the 10,000 proposals.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
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

PLACET = str(Path(sys.executable).parent / "placet")
ROOT = {"name": "proj", "path": "/home/owner/proj", "device": 1, "inode": 2}


def seed(home: Path, n: int) -> None:
    """`n` pending uploads through the real store, in one process."""
    from placet.config import load_settings
    from placet.store import open_store

    home.mkdir(parents=True, mode=0o700)
    (home / "config.toml").write_text(f"pending_total = {n + 10}\npending_per_session = {n + 10}\n")
    os.environ["PLACET_HOME"] = str(home)
    store = open_store(load_settings())
    now = datetime.now(UTC)
    for i in range(n):
        name = f"f{i:05d}.txt"
        request = {
            "kind": "upload", "root": ROOT, "local_path": f"src/{name}",
            "remote_parent": "bench", "name": name, "replace_existing": False,
        }  # fmt: skip
        evidence = {
            "local": {"size": 1000 + i, "mtime_ns": 1, "sha256": f"{i:064x}"},
            "remote": {"exists": False},
        }
        store.create_proposal(
            kind="upload", request=request, evidence=evidence, reason=f"bench proposal {i}",
            drive_spec="bench:", run_id=f"run-{i % 8}", client_name="bench",
            ttl_seconds=1800, now=now,
        )  # fmt: skip
    store.close()


def read_until(fd: int, buf: bytearray, needles: list[bytes], timeout: float) -> float | None:
    """Read the pty into `buf` until every needle appeared; the perf_counter time then."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return None
            buf += chunk
            if all(n in buf for n in needles):
                return time.perf_counter()
    return None


def drain(fd: int, buf: bytearray, seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                buf += os.read(fd, 1 << 16)
            except OSError:
                return


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (/proc/<pid>/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def one_run(env: dict[str, str], n: int) -> tuple[float, float, float | None]:
    """(wall seconds to first painted queue, CPU seconds the process used by then,
    wall seconds from End to the next page painted)."""
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        os.execve(PLACET, [PLACET, "review"], env)
    buf = bytearray()
    try:
        painted = read_until(fd, buf, [b"bench/f00000.txt", f"{n} pending".encode()], 60)
        if painted is None:
            raise SystemExit(f"no paint within 60 s; last output: {bytes(buf[-500:])!r}")
        cpu = cpu_seconds(pid)
        drain(fd, buf, 1.0)
        mark = len(buf)
        t_end = time.perf_counter()
        os.write(fd, b"\x1b[F")  # End: the cursor goes to row 200, the next page loads
        more = read_until(fd, buf, [b"400 loaded"], 30) if n > 400 else None
        del buf[:mark]
        os.write(fd, b"q")
        drain(fd, buf, 0.5)
    finally:
        if not _reaped(pid, 10):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return painted - t0, cpu, (more - t_end) if more is not None else None


def _reaped(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.05)
    return False


def import_seconds(env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds for a fresh interpreter to import what `placet review` needs."""
    code = (
        "import time; t = time.perf_counter(); c = time.process_time()\n"
        "import placet.cli, placet.store, placet.tui\n"
        "print(time.perf_counter() - t, time.process_time() - c)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def store_reads(n: int) -> tuple[float, float]:
    """Milliseconds for the queue's first-page read (201 rows) and for counts()."""
    from placet.config import load_settings
    from placet.store import open_store

    store = open_store(load_settings())
    try:
        t = time.perf_counter()
        rows = store.list(["pending", "approved", "executing"], limit=201)
        page = time.perf_counter() - t
        t = time.perf_counter()
        counts = store.counts()
        count = time.perf_counter() - t
        assert len(rows) == min(n, 201) and counts["pending"] == n
        return page * 1000, count * 1000
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        t = time.perf_counter()
        seed(home, args.pending)
        print(f"seeded {args.pending} pending proposals in {time.perf_counter() - t:.1f} s")
        env = dict(os.environ, PLACET_HOME=str(home), TERM="xterm-256color", LANG="C.UTF-8")
        imports = [import_seconds(env) for _ in range(args.runs)]
        page_ms, count_ms = store_reads(args.pending)
        paints, cpus, pages = [], [], []
        for _ in range(args.runs):
            paint, cpu, more = one_run(env, args.pending)
            paints.append(paint)
            cpus.append(cpu)
            if more is not None:
                pages.append(more)
    med = statistics.median
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(
        f"import placet.cli + store + tui: median {med(w for w, _ in imports):.3f} s wall, "
        f"{med(c for _, c in imports):.3f} s CPU"
    )
    print(f"store: first page (201 rows) {page_ms:.1f} ms, counts() {count_ms:.1f} ms")
    print(
        f"process start -> first painted queue ({args.pending} pending): median "
        f"{med(paints):.3f} s wall (min {min(paints):.3f}, max {max(paints):.3f}), "
        f"{med(cpus):.3f} s CPU ({args.runs} runs)"
    )
    if pages:
        print(f"End -> next 200 rows painted: median {statistics.median(pages):.3f} s")


if __name__ == "__main__":
    main()
