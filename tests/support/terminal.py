"""Run a program under a real pseudo-terminal and keep every byte it writes.

The review UI's promise about untrusted text is about the bytes that reach the terminal
(docs/design.md section 9), and Textual's headless test driver writes none. So the hostile
text tests run the real `placet review` on a pty (TERM=xterm-256color, a fixed size),
press keys by writing to the pty's master side, and assert on the raw output.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import threading
import time
from collections.abc import Sequence

KEYS = {
    "down": b"\x1b[B",
    "up": b"\x1b[A",
    "enter": b"\r",
    "escape": b"\x1b",
    "tab": b"\t",
}


class PtyProcess:
    """`argv` on a pty of `cols` x `rows`; `output` holds everything written so far."""

    def __init__(
        self, argv: Sequence[str], env: dict[str, str], *, cols: int = 160, rows: int = 48
    ) -> None:
        self.output = bytearray()
        self._lock = threading.Lock()
        pid, fd = pty.fork()
        if pid == 0:  # child: size the terminal, then become the program
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.execve(argv[0], list(argv), env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.returncode: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if not ready:
                    if self.returncode is not None:
                        return
                    continue
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not chunk:
                return
            with self._lock:
                self.output += chunk

    def bytes(self) -> bytes:
        with self._lock:
            return bytes(self.output)

    def mark(self) -> int:
        """Current length of the output, to wait for something written after it."""
        with self._lock:
            return len(self.output)

    def wait_for(self, needle: bytes, timeout: float = 15.0, since: int = 0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if needle in self.output[since:]:
                    return True
            time.sleep(0.02)
        return False

    def send(self, *keys: str, gap: float = 0.15) -> None:
        """Type keys: names from KEYS, or literal text."""
        for key in keys:
            os.write(self.fd, KEYS.get(key, key.encode()))
            time.sleep(gap)

    def wait_exit(self, timeout: float = 15.0) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self._reader.join(timeout=2)
                return self.returncode
            time.sleep(0.05)
        return None

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.wait_exit(5)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def run_on_pty(
    argv: Sequence[str],
    env: dict[str, str],
    timeout: float,
    *,
    cols: int = 160,
    typed: str | None = None,
) -> tuple[int | None, str]:
    """Run `argv` on a pty; with `typed`, wait for `placet accept`'s "type the code "
    prompt and answer it. Returns (the exit code, None if it outlived `timeout` seconds
    and was killed; everything it wrote, decoded)."""
    p = PtyProcess(argv, env, cols=cols)
    try:
        if typed is not None:
            assert p.wait_for(b"type the code "), p.bytes().decode(errors="replace")
            p.send(typed + "\r")
        rc = p.wait_exit(timeout)
    finally:
        p.kill()
    return rc, p.bytes().decode(errors="replace")
