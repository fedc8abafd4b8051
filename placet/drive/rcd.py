"""The long-lived `rclone rcd` on a private unix socket, and placet's client for it.

The daemon listens on a unix socket in a fresh 0700 folder under the run dir, with random
credentials in its environment, started lazily from a keeper thread (so it dies with
placet, `placet.drive.proc`) and replaced if it died. Socket and credentials are read
under the client's lock, so a restart never hands a call half of each daemon. Each thread
keeps one keep-alive connection of its own, so requests need no lock; a drive's close
leaves live threads' connections to them. Uploads build on this client in
`placet.drive.rcd_uploads`."""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from placet.drive.proc import COMMON_FLAGS, adopted, spawn, stop
from placet.errors import DriveError, DriveUnavailable

_SOCKET_NAME = "rc.sock"
_JOB_EXPIRY = ("--rc-job-expire-duration", "5s", "--rc-job-expire-interval", "2s")
"""rcd keeps each finished job, with its output, this long (its default: 60 s): every
call of a `job/batch` is a job, so the listings of a plan's last minute stayed in rcd's
heap (~500 MiB over 1,000,000 files). placet starts no job it polls later."""
_MAX_SUN_PATH = 100


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the unix socket at `path`."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)  # host only fills the Host header
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class RcFailure(Exception):
    """An rc call answered with an error: HTTP status and rclone's (unredacted) message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class Rcd:
    """A lazily started `rclone rcd` on a private unix socket, and a client for it.

    `flags` are rclone's global flags (default `COMMON_FLAGS`; a drive adds its
    ``--password-command``).

    Thread-safe: every call opens its own connection to a socket path and credentials
    read under the lock, so a restart by another thread never hands a call half of the
    old daemon and half of the new one; the first call starts the daemon. If the daemon
    died, the next call starts a new one, and a failed connection tears down only the
    daemon it was made to (not one another thread has started since).
    """

    def __init__(
        self,
        rclone_path: Path,
        env: Mapping[str, str],
        run_dir: Path,
        redact: Callable[[str], str] = lambda s: s,
        *,
        flags: Sequence[str] = COMMON_FLAGS,
    ) -> None:
        self._redact = redact
        self._flags = tuple(flags)
        self._rclone = rclone_path
        self._env = dict(env)
        self._run_dir = run_dir
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._dir_fd: int | None = None
        self._auth = ""
        self._closed = False
        self._tls = threading.local()  # this thread's keep-alive connection
        self._conns: list[tuple[threading.Thread, UnixHTTPConnection]] = []  # under _lock
        atexit.register(self.close)

    @property
    def pid(self) -> int | None:
        """The daemon's pid while it runs, else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _socket_path(self) -> str:
        assert self._dir is not None and self._dir_fd is not None
        path = str(self._dir / _SOCKET_NAME)
        # sun_path holds ~108 bytes; a deep PLACET_HOME goes through the directory's fd.
        return path if len(path) < _MAX_SUN_PATH else f"/proc/self/fd/{self._dir_fd}/{_SOCKET_NAME}"

    def _start(self) -> None:
        self._run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        d = Path(tempfile.mkdtemp(prefix="rcd-", dir=self._run_dir))  # 0700
        self._dir, self._dir_fd = d, os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        user, password = secrets.token_hex(8), secrets.token_urlsafe(24)
        self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        env = dict(self._env, RCLONE_RC_USER=user, RCLONE_RC_PASS=password)
        argv = [str(self._rclone), "rcd", *self._flags, *_JOB_EXPIRY, "--rc-addr",
                f"unix://{_SOCKET_NAME}"]  # fmt: skip
        log = open(d / "rcd.log", "wb")  # noqa: SIM115 - owned by the daemon's lifetime
        box: list[subprocess.Popen[bytes] | BaseException] = []
        ready = threading.Event()

        def keeper() -> None:
            # PR_SET_PDEATHSIG fires when the *thread* that forked exits, so the daemon is
            # started from this thread, which lives exactly as long as the daemon.
            try:
                proc = spawn(
                    argv,
                    env,
                    cwd=d,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            except BaseException as e:  # handed to the starting thread
                box.append(e)
                ready.set()
                return
            box.append(proc)
            ready.set()
            proc.wait()
            log.close()

        threading.Thread(target=keeper, name="placet-rcd-keeper", daemon=True).start()
        ready.wait()
        if isinstance(box[0], BaseException):
            log.close()
            raise DriveError(
                f"could not start rclone ({self._rclone}): {box[0]}; check `placet drive show`"
            ) from box[0]
        self._proc = box[0]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                text = self._redact((d / "rcd.log").read_text(errors="replace")[-2000:])
                raise DriveError(
                    f"rclone rcd exited at start (code {self._proc.returncode}): "
                    f"{text.strip()}; run `placet drive show` to check rclone",
                    details={"rclone_message": text.strip()},
                )
            if (d / _SOCKET_NAME).exists():
                try:
                    self._post("rc/noop", {}, timeout=5, where=(self._socket_path(), self._auth))
                    return
                except (OSError, RcFailure):
                    pass
            time.sleep(0.005)
        stop(self._proc)
        raise DriveUnavailable("rclone rcd did not answer within 15 s; try again")

    def _teardown(self) -> None:
        """Stop the daemon and remove its socket directory (under `_lock`).

        A connection is closed only by its own thread (`_drop`, `_connection`, `_ensure`
        once the drive is closed), or here once its thread has ended: closing one under
        a thread in the middle of a request left it a socket that was None or gave EBADF
        outside its error handling (an upload's temporary object was left behind that
        way), also when the drive was closed while threads still called. The others
        fail on their next use, as the daemon is gone, and are replaced then (or closed,
        once the drive is); a live thread holds one at most.
        """
        me = threading.current_thread()
        keep = []
        for thread, conn in self._conns:
            if thread is me or not thread.is_alive():
                conn.close()
            else:
                keep.append((thread, conn))
        self._conns = keep
        if self._proc is not None:
            stop(self._proc)
            self._proc = None
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _ensure(self) -> tuple[subprocess.Popen[bytes], str, str]:
        """The running daemon, its socket path and auth header (started if needed)."""
        with self._lock:
            if self._closed:
                held = getattr(self._tls, "conn", None)
                if held is not None:
                    self._drop(held[1])
                raise DriveError("the drive was closed; open it again")
            if self._proc is None or self._proc.poll() is not None:
                self._teardown()
                self._start()
            assert self._proc is not None
            return self._proc, self._socket_path(), self._auth

    def _connection(self, path: str, timeout: float) -> tuple[UnixHTTPConnection, bool]:
        """This thread's keep-alive connection to `path`, and whether it was used before.

        One per thread (never shared, so no lock around a request); a connection to an
        older daemon's socket, and those of threads that ended, are closed here.
        """
        held: tuple[str, UnixHTTPConnection] | None = getattr(self._tls, "conn", None)
        if held is not None and held[0] == path:
            conn = held[1]
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
                return conn, True
            return conn, False  # closed after a `Connection: close` answer: reconnects
        conn = UnixHTTPConnection(path, timeout)
        me = threading.current_thread()
        with self._lock:
            keep = []
            for thread, c in self._conns:
                if thread is not me and thread.is_alive():
                    keep.append((thread, c))
                else:
                    c.close()
            self._conns = [*keep, (me, conn)]
        self._tls.conn = (path, conn)
        return conn, False

    def _drop(self, conn: UnixHTTPConnection) -> None:
        """Close `conn` and forget it (its state after a failed exchange is unknown)."""
        conn.close()
        held = getattr(self._tls, "conn", None)
        if held is not None and held[1] is conn:
            self._tls.conn = None

    @staticmethod
    def _exchange(
        conn: UnixHTTPConnection,
        target: str,
        parts: Sequence[bytes],
        headers: Mapping[str, str],
    ) -> tuple[int, bytes, bool]:
        """One POST of `parts` on `conn`: (status, body, the server closes the connection)."""
        conn.putrequest("POST", target, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(sum(len(p) for p in parts)))
        conn.endheaders()
        for part in parts:
            conn.sock.sendall(part)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, raw, resp.will_close

    @staticmethod
    def decode(status: int, raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"error": raw.decode(errors="replace").strip()}
        if status != 200:
            raise RcFailure(status, str(body.get("error", "")) if isinstance(body, dict) else "")
        return body if isinstance(body, dict) else {"result": body}

    def _post(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        timeout: float,
        where: tuple[str, str],
    ) -> dict[str, Any]:
        """One call on a fresh connection (the start-up probe)."""
        path, auth = where
        conn = UnixHTTPConnection(path, timeout)
        try:
            conn.connect()
            headers = {"Content-Type": "application/json", "Authorization": auth}
            status, raw, _ = self._exchange(
                conn, "/" + method, [json.dumps(params).encode()], headers
            )
        finally:
            conn.close()
        return self.decode(status, raw)

    def send(
        self,
        method: str,
        target: str,
        parts: Sequence[bytes],
        headers: Mapping[str, str],
        *,
        timeout: float,
        abortable: bool = False,
    ) -> tuple[int, bytes]:
        """POST `parts` to `target` on this thread's connection: (status, raw body),
        which `decode` turns into the answer or rclone's `RcFailure`; other errors as
        for `call`.

        A keep-alive connection the daemon closed meanwhile is replaced once at no cost;
        a failure on a fresh connection restarts a dead daemon once. With `abortable`,
        `Children.kill_all` of the thread's group shuts the socket down mid-request.
        """
        restarted = False
        group = adopted() if abortable else None
        while True:
            proc, path, auth = self._ensure()
            conn, reused = self._connection(path, timeout)
            try:
                if conn.sock is None:
                    conn.connect()
                abort = functools.partial(conn.sock.shutdown, socket.SHUT_RDWR)
                with group.abortable(abort) if group is not None else contextlib.nullcontext():
                    status, raw, closing = self._exchange(
                        conn, target, parts, {**headers, "Authorization": auth}
                    )
            except TimeoutError as e:
                self._drop(conn)
                raise DriveUnavailable(
                    f"rclone did not answer {method} within {timeout:.0f} s; try again later",
                    details={"method": method},
                ) from e
            except (OSError, http.client.HTTPException) as e:
                self._drop(conn)
                if group is not None and group.killed:
                    raise DriveError(
                        f"{method} was stopped: the transfers were cancelled",
                        code="cancelled",
                    ) from e
                if reused:
                    continue  # the daemon closed an idle connection: a fresh one next
                if restarted or not isinstance(
                    e, ConnectionError | FileNotFoundError | http.client.HTTPException
                ):
                    raise DriveError(f"lost contact with rclone rcd during {method}: {e}") from e
                restarted = True
                with self._lock:  # the daemon died under us: start a fresh one once
                    if self._proc is proc:
                        self._teardown()
                continue
            if closing:
                self._drop(conn)
            return status, raw

    def call(
        self, method: str, params: Mapping[str, Any], *, timeout: float = 300
    ) -> dict[str, Any]:
        """POST one rc call; returns the JSON body.

        Raises:
            RcFailure: rclone answered with an error status (the caller maps it).
            DriveUnavailable: no answer within `timeout` seconds.
            DriveError: the daemon cannot be started or reached.
        """
        body = json.dumps(params).encode()
        headers = {"Content-Type": "application/json"}
        return self.decode(*self.send(method, "/" + method, [body], headers, timeout=timeout))

    def call_raw(self, method: str, params: Mapping[str, Any], *, timeout: float = 300) -> bytes:
        """`call`, a successful answer's JSON body returned undecoded: a thread that only
        waits for the answer then holds the interpreter lock for no decoding."""
        body = json.dumps(params).encode()
        headers = {"Content-Type": "application/json"}
        status, raw = self.send(method, "/" + method, [body], headers, timeout=timeout)
        if status != 200:
            self.decode(status, raw)  # raises RcFailure
        return raw

    def fresh_connection(self, timeout: float) -> tuple[UnixHTTPConnection, str]:
        """A new connection to the daemon (not this thread's keep-alive one) and the auth
        header; a daemon that died is replaced once.

        Raises:
            DriveError: the daemon cannot be started or reached.
        """
        proc, path, auth = self._ensure()
        for attempt in (1, 2):
            conn = UnixHTTPConnection(path, timeout)
            try:
                conn.connect()
                return conn, auth
            except OSError as e:
                conn.close()
                if attempt == 2 or not isinstance(e, ConnectionError | FileNotFoundError):
                    raise DriveError(f"lost contact with rclone rcd: {e}") from e
                with self._lock:  # the daemon died under us: start a fresh one once
                    if self._proc is proc:
                        self._teardown()
                proc, path, auth = self._ensure()
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop the daemon and remove its socket directory. Idempotent."""
        with self._lock:
            self._closed = True
            self._teardown()
        atexit.unregister(self.close)
