"""Adversarial races on `placet.drive.rcd.Rcd` with a real `rclone rcd`: threads calling
(stat, list, `upload`, `upload_stream`) while the daemon is closed, frozen, or loses its
socket directory. Every failure must be a typed `PlacetError` (or rclone's `RcFailure`),
never a raw `OSError`/`AttributeError`, and no call may outlive its timeout."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from placet.drive.rcd import Rcd, RcFailure
from placet.drive.rcd_uploads import RcdUploads
from placet.errors import PlacetError
from tests.support.drives import RCLONE

TEMP = ".placet-tmp-{:012x}-u"


@pytest.fixture
def drive_dir(tmp_path: Path) -> Path:
    """A local folder with one file, the remote every call goes to."""
    r = tmp_path / "drive"
    r.mkdir()
    (r / "f.txt").write_bytes(b"x")
    return r


@pytest.fixture
def make_rcd(tmp_path: Path) -> Iterator[Callable[[], Rcd]]:
    """`make_rcd()`: a fresh client (closed at teardown)."""
    made: list[Rcd] = []

    def make() -> Rcd:
        rcd = Rcd(RCLONE, {"RCLONE_CONFIG": "/dev/null"}, tmp_path / "run")
        made.append(rcd)
        return rcd

    yield make
    for rcd in made:
        rcd.close()


@pytest.fixture
def fast_switches() -> Iterator[None]:
    """Thread switches forced every microsecond, to widen the races."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _one_call(rcd: Rcd, drive_dir: Path, k: int, timeout: float = 10) -> None:
    """Thread `k`'s kind of call: stat, list, upload, or a streamed upload."""
    if k % 4 == 0:
        rcd.call("operations/stat", {"fs": str(drive_dir), "remote": "f.txt"}, timeout=timeout)
    elif k % 4 == 1:
        rcd.call("operations/list", {"fs": str(drive_dir), "remote": ""}, timeout=timeout)
    elif k % 4 == 2:
        RcdUploads(rcd).upload(str(drive_dir), "", TEMP.format(k), [b"y" * 5000], timeout=timeout)
    else:
        RcdUploads(rcd).upload_stream(
            str(drive_dir), "", TEMP.format(k), 3, lambda write: write(b"abc"), timeout=timeout
        )


class _Callers:
    """`n` threads calling `rcd` until stopped; raw (untyped) errors are kept."""

    def __init__(self, rcd: Rcd, drive_dir: Path, n: int) -> None:
        self.stop = threading.Event()
        self.strays: list[BaseException] = []
        self.calls = 0
        self._rcd, self._root = rcd, drive_dir
        self.threads = [threading.Thread(target=self._work, args=(k,)) for k in range(n)]
        for t in self.threads:
            t.start()

    def _work(self, k: int) -> None:
        while not self.stop.is_set():
            try:
                _one_call(self._rcd, self._root, k)
                self.calls += 1
            except (PlacetError, RcFailure):
                pass
            except BaseException as e:
                self.strays.append(e)
                return

    def settle(self, calls: int, timeout: float = 30) -> None:
        """Wait until `calls` more calls succeeded (or a stray appeared)."""
        start, deadline = self.calls, time.monotonic() + timeout
        while self.calls - start < calls and not self.strays and time.monotonic() < deadline:
            time.sleep(0.001)

    def join(self) -> list[str]:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        assert not any(t.is_alive() for t in self.threads), "a caller hung"
        return [f"{type(e).__name__}: {e}" for e in self.strays]


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("fast_switches")
def test_close_while_threads_call_gives_typed_errors_only(
    drive_dir: Path, make_rcd: Callable[[], Rcd]
) -> None:
    """`Rcd.close` (the drive closed, e.g. at exit) while eight threads are mid-call:
    each sees its call succeed or a `PlacetError`, never a socket closed under it."""
    for rnd in range(30):
        rcd = make_rcd()
        callers = _Callers(rcd, drive_dir, 8)
        callers.settle(20 + rnd * 5)
        rcd.close()
        assert callers.join() == []


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("fast_switches")
def test_kills_under_every_call_kind_give_typed_errors_and_bounded_descriptors(
    drive_dir: Path, make_rcd: Callable[[], Rcd]
) -> None:
    """rcd killed 20 times while eight threads stat, list, upload and stream uploads:
    typed errors only, and the descriptors held stay bounded by the live threads (a
    dead daemon's connection is kept open for its own thread to close, one per thread
    at most), then all are released once the threads end and the drive is closed."""
    rcd = make_rcd()
    rcd.call("rc/noop", {}, timeout=10)
    before = _open_fds()
    callers = _Callers(rcd, drive_dir, 8)
    try:
        for _ in range(20):
            callers.settle(10)
            pid = rcd.pid
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        callers.settle(10)
        during = _open_fds() - before
    finally:
        strays = callers.join()
    assert strays == []
    # 8 threads' connections and the daemon's own (directory fd, pipes): never one per kill
    assert during <= 8 + 6, during
    rcd.close()
    assert _open_fds() <= before, (before, _open_fds())


def _wait_stopped(pid: int, timeout: float = 20) -> None:
    """Until every thread of `pid` is stopped (state T): kill(SIGSTOP) returns before
    a busy process's threads have all stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = set()
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                states.add((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        if states <= {"T", "t"}:
            return
        time.sleep(0.01)
    raise AssertionError(f"rclone rcd {pid} did not stop within {timeout} s")


@pytest.mark.timeout(120)
def test_a_frozen_daemon_fails_each_call_within_its_timeout_then_serves_again(
    drive_dir: Path, make_rcd: Callable[[], Rcd]
) -> None:
    """rcd stopped (SIGSTOP) under four threads, one per call kind, each with a 2 s
    timeout: every call ends with a `PlacetError` well before 2 s + slack (none waits on
    a frozen daemon forever); after SIGCONT the same client serves every kind again."""
    rcd = make_rcd()
    rcd.call("rc/noop", {}, timeout=10)
    results: dict[int, tuple[str, float]] = {}

    def frozen_call(k: int) -> None:
        t0 = time.monotonic()
        try:
            _one_call(rcd, drive_dir, k, timeout=2)
            results[k] = ("answered", time.monotonic() - t0)
        except PlacetError as e:
            results[k] = (type(e).__name__, time.monotonic() - t0)
        except BaseException as e:  # a raw error is the defect under test
            results[k] = (f"raw {type(e).__name__}: {e}", time.monotonic() - t0)

    for k in range(4):  # every thread holds a live keep-alive connection first
        _one_call(rcd, drive_dir, k)
    pid = rcd.pid  # the daemon that answered last
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        _wait_stopped(pid)
        threads = [threading.Thread(target=frozen_call, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a call outlived its timeout"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert {k: r[0] for k, r in results.items()} == dict.fromkeys(range(4), "DriveUnavailable")
    assert max(r[1] for r in results.values()) < 2 + 10, results
    for k in range(4):
        _one_call(rcd, drive_dir, k)


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("fast_switches")
def test_socket_directory_removed_under_callers_starts_a_fresh_daemon(
    drive_dir: Path, make_rcd: Callable[[], Rcd], tmp_path: Path
) -> None:
    """The daemon's socket directory removed (a cleaner of the run dir) five times while
    eight threads call: typed errors only, and the client goes on working."""
    rcd = make_rcd()
    rcd.call("rc/noop", {}, timeout=10)
    first = rcd.pid
    callers = _Callers(rcd, drive_dir, 8)
    try:
        for _ in range(5):
            callers.settle(20)
            for d in (tmp_path / "run").glob("rcd-*"):
                shutil.rmtree(d, ignore_errors=True)
        callers.settle(20)
    finally:
        strays = callers.join()
    assert strays == []
    assert callers.calls > 100
    assert rcd.pid not in (None, first)
    rcd.call("operations/stat", {"fs": str(drive_dir), "remote": "f.txt"}, timeout=10)


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # the collected client's sockets
def test_idle_threads_keep_one_descriptor_each_across_closed_clients(tmp_path: Path) -> None:
    """Four long-lived threads (a server's worker pool) call each of ten clients once,
    and each client is closed while they idle: their connections are theirs to close, so
    they stay open until the thread calls again or the closed client is collected, one
    per thread at most, never one per thread per client (a closed client kept alive,
    e.g. by its atexit hook, would hold four more each time)."""
    before = _open_fds()
    with ThreadPoolExecutor(4) as pool:
        for _ in range(10):
            rcd = Rcd(RCLONE, {"RCLONE_CONFIG": "/dev/null"}, tmp_path / "run")
            everyone = threading.Barrier(4)  # each of the four threads makes one call

            def call(_: int, rcd: Rcd = rcd, everyone: threading.Barrier = everyone) -> None:
                everyone.wait(30)
                rcd.call("rc/noop", {}, timeout=10)

            list(pool.map(call, range(4)))
            rcd.close()
            del rcd, call
            gc.collect()
            assert _open_fds() - before <= 4 + 2
