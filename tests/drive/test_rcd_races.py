"""Adversarial races on `placet.drive.rcd.Rcd` with a real `rclone rcd`: threads calling
(stat, list, `upload`, `upload_stream`) while the daemon is closed, frozen, or loses its
socket directory. Every failure must be a typed `PlacetError` (or rclone's `RcFailure`),
never a raw `OSError`/`AttributeError`, and no call may outlive its timeout."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from placet.drive.rcd import Rcd, RcFailure
from placet.errors import PlacetError
from tests.support.drives import RCLONE

TEMP = ".placet-tmp-{:012x}-u"


@pytest.fixture
def root(tmp_path: Path) -> Path:
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


def _one_call(rcd: Rcd, root: Path, k: int, timeout: float = 10) -> None:
    """Thread `k`'s kind of call: stat, list, upload, or a streamed upload."""
    if k % 4 == 0:
        rcd.call("operations/stat", {"fs": str(root), "remote": "f.txt"}, timeout=timeout)
    elif k % 4 == 1:
        rcd.call("operations/list", {"fs": str(root), "remote": ""}, timeout=timeout)
    elif k % 4 == 2:
        rcd.upload(str(root), "", TEMP.format(k), [b"y" * 5000], timeout=timeout)
    else:
        rcd.upload_stream(
            str(root), "", TEMP.format(k), 3, lambda write: write(b"abc"), timeout=timeout
        )


class _Callers:
    """`n` threads calling `rcd` until stopped; raw (untyped) errors are kept."""

    def __init__(self, rcd: Rcd, root: Path, n: int) -> None:
        self.stop = threading.Event()
        self.strays: list[BaseException] = []
        self.calls = 0
        self._rcd, self._root = rcd, root
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
    root: Path, make_rcd: Callable[[], Rcd]
) -> None:
    """`Rcd.close` (the drive closed, e.g. at exit) while eight threads are mid-call:
    each sees its call succeed or a `PlacetError`, never a socket closed under it."""
    for rnd in range(30):
        rcd = make_rcd()
        callers = _Callers(rcd, root, 8)
        callers.settle(20 + rnd * 5)
        rcd.close()
        assert callers.join() == []
