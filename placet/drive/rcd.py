"""The long-lived `rclone rcd` on a private unix socket, and placet's client for it.

The daemon listens on a unix socket in a fresh 0700 folder under the run dir, with random
credentials in its environment, started lazily from a keeper thread (so it dies with
placet, `placet.drive.proc`) and replaced if it died. Socket and credentials are read
under the client's lock, so a restart never hands a call half of each daemon. Each thread
keeps one keep-alive connection of its own, so requests need no lock; a drive's close
leaves live threads' connections to them. `Rcd.upload` sends bytes already read and
approved as one `operations/uploadfile`; `Rcd.upload_stream` sends a big file's body as
placet reads it, and a stopped stream waits for rclone's answer before the caller
deletes the object (docs/decisions/0006-rcd-and-uploads.md)."""

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
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from placet.drive.proc import COMMON_FLAGS, adopted, spawn, stop
from placet.errors import DriveError, DriveUnavailable

_SOCKET_NAME = "rc.sock"
_MAX_SUN_PATH = 100


def _contains(chunks: Sequence[bytes], marker: bytes) -> bool:
    """`marker` occurs in the concatenation of `chunks` (also across their borders)."""
    tail = b""
    for c in chunks:
        if marker in tail + c[: len(marker)] or marker in c:
            return True
        tail = (tail + c[-(len(marker) - 1) :])[-(len(marker) - 1) :]
    return False


def _part_head(boundary: str, name: str) -> bytes:
    """The multipart header of one file part named `name` (RFC 2231 ``filename*``)."""
    quoted = urllib.parse.quote(name, safe="")
    return (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f"filename*=UTF-8''{quoted}\r\nContent-Type: application/octet-stream\r\n\r\n"
    ).encode()


class _SendFailed(Exception):
    """The socket refused part of a streamed body (rcd answered early, went away, or
    `Children.kill_all` closed the sending side)."""


_ABORT_WAIT_SECONDS = 60.0


class _UnixHTTPConnection(http.client.HTTPConnection):
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
        self._conns: list[tuple[threading.Thread, _UnixHTTPConnection]] = []  # under _lock
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
        argv = [str(self._rclone), "rcd", *self._flags, "--rc-addr", f"unix://{_SOCKET_NAME}"]
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

    def _connection(self, path: str, timeout: float) -> tuple[_UnixHTTPConnection, bool]:
        """This thread's keep-alive connection to `path`, and whether it was used before.

        One per thread (never shared, so no lock around a request); a connection to an
        older daemon's socket, and those of threads that ended, are closed here.
        """
        held: tuple[str, _UnixHTTPConnection] | None = getattr(self._tls, "conn", None)
        if held is not None and held[0] == path:
            conn = held[1]
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
                return conn, True
            return conn, False  # closed after a `Connection: close` answer: reconnects
        conn = _UnixHTTPConnection(path, timeout)
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

    def _drop(self, conn: _UnixHTTPConnection) -> None:
        """Close `conn` and forget it (its state after a failed exchange is unknown)."""
        conn.close()
        held = getattr(self._tls, "conn", None)
        if held is not None and held[1] is conn:
            self._tls.conn = None

    @staticmethod
    def _exchange(
        conn: _UnixHTTPConnection,
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
    def _decode(status: int, raw: bytes) -> dict[str, Any]:
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
        conn = _UnixHTTPConnection(path, timeout)
        try:
            conn.connect()
            headers = {"Content-Type": "application/json", "Authorization": auth}
            status, raw, _ = self._exchange(
                conn, "/" + method, [json.dumps(params).encode()], headers
            )
        finally:
            conn.close()
        return self._decode(status, raw)

    def _request(
        self,
        method: str,
        target: str,
        parts: Sequence[bytes],
        headers: Mapping[str, str],
        *,
        timeout: float,
        abortable: bool = False,
    ) -> dict[str, Any]:
        """POST `parts` to `target` on this thread's connection; see `call` for errors.

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
            return self._decode(status, raw)

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
        return self._request(method, "/" + method, [body], headers, timeout=timeout)

    def upload(
        self, fs: str, folder: str, name: str, chunks: Sequence[bytes], *, timeout: float
    ) -> dict[str, Any]:
        """`operations/uploadfile`: store `chunks` as object `name` in `folder` of `fs`.

        One multipart/form-data part whose file name is `name` (RFC 2231
        ``filename*=UTF-8''<percent-encoded>``, so any UTF-8 name survives the header);
        rclone stores it at `folder`/`name` (rclone docs: rc, operations/uploadfile, "each
        part in body represents a file to be uploaded"; it pipes the part through `Rcat`).
        The boundary is 128 random bits, checked absent from the content. The whole body
        is in `chunks` already: a request cut short is committed by rclone as a smaller
        file when it is below `--streaming-upload-cutoff`, so callers must only send
        bytes they have approved, and only to a temporary name. `Children.kill_all` of
        the calling thread's group shuts the request's socket down.

        Raises: as `call` (``cancelled`` when the group was killed).
        """
        return self.upload_many(fs, folder, [(name, chunks)], timeout=timeout)

    def upload_many(
        self,
        fs: str,
        folder: str,
        files: Sequence[tuple[str, Sequence[bytes]]],
        *,
        timeout: float,
    ) -> dict[str, Any]:
        """`upload` of several (name, chunks) files into `folder` as one request, one
        multipart part each (rclone stores every part of the body; on an error some may
        be stored and others not, so the caller removes them all). Same rules as
        `upload`: approved bytes only, temporary names only.

        rclone buffers each part up to its streaming cutoff (allocating the whole
        buffer per part), so the request sets the cutoff (`_config`
        ``StreamingUploadCutoff``) just above the largest part: still one known-size
        Put per file, and ~1 ms less CPU per small file than the daemon's 2 MiB cutoff
        (bench/sync_apply.py in docs/performance.md). It also skips rclone's own read-back of each
        object (``IgnoreChecksum``, as `rclone rcat --ignore-checksum` does): the caller
        verifies the stored object against the digest of the bytes it sent. And it sets
        ``LowLevelRetries`` to 1 for the request: rclone's `Copy`, which takes each part,
        tries a failed upload again that many times (deleting between tries) on top of
        the backend's own retries, which made a dead WebDAV server take three PUTs and
        ~10 s to fail; now the PUT is tried once, as `rclone rcat` tries it.

        Raises: as `call` (``cancelled`` when the group was killed).
        """
        every = [c for _, chunks in files for c in chunks]
        boundary = secrets.token_hex(16)
        while _contains(every, boundary.encode()):  # 2**-128 per try for real data
            boundary = secrets.token_hex(16)
        parts: list[bytes] = []
        for name, chunks in files:
            parts.append(_part_head(boundary, name))
            parts.extend(chunks)
            parts.append(b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        largest = max((sum(len(c) for c in chunks) for _, chunks in files), default=0)
        config = json.dumps(
            {"StreamingUploadCutoff": largest + 1, "IgnoreChecksum": True, "LowLevelRetries": 1}
        )
        query = urllib.parse.urlencode(
            {"fs": fs, "remote": folder, "_config": config}, quote_via=urllib.parse.quote
        )
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        return self._request(
            "operations/uploadfile",
            "/operations/uploadfile?" + query,
            [b"".join(parts)] if len(files) > 1 else parts,  # one send for many small ones
            headers,
            timeout=timeout,
            abortable=True,
        )

    def upload_stream(
        self,
        fs: str,
        folder: str,
        name: str,
        size: int,
        pump: Callable[[Callable[[bytes], None]], object],
        *,
        timeout: float,
    ) -> dict[str, Any]:
        """`operations/uploadfile` of one file of `size` bytes, sent as `pump(write)`
        produces it: nothing is held in memory, and the body goes out while placet reads
        and hashes the file. `pump` must call `write` with exactly `size` bytes in all,
        and raises to stop (a changed file, a local read error).

        rclone pipes the part through `Rcat`: it buffers the first
        `--streaming-upload-cutoff` bytes and streams the rest with `PutStream` (size
        unknown), so callers use this only on backends where an upload of unknown size
        costs nothing more (`placet.drive.routes.RCD_STREAM_BACKENDS`). rclone's own
        read-back is skipped (``IgnoreChecksum``): the caller verifies the stored object.

        A stopped body is never an approved upload: when `pump` raises or the socket
        refuses a write, the sending side is closed, rclone's answer is awaited (up to
        60 s) so that it is done with the object, and the error is raised. rclone may
        have stored what it got (a body cut short within the cutoff is stored as a
        smaller file), so `name` must be a temporary name the caller deletes and never
        moves unverified. A `KeyboardInterrupt` (the owner's second Ctrl-C, "quit at
        once") is raised without waiting: a stalled remote can keep rcd from answering,
        and the caller journaled the temporary name for the next attempt to remove.
        The boundary is 128 random bits, not checked against the content: a boundary
        inside it would end the part early, and the caller's size and digest check of
        the stored object refuses the result. The connection is a
        fresh one (a streamed body cannot be sent twice); `Children.kill_all` of the
        calling thread's group closes its sending side.

        Raises:
            whatever `pump` raised (after rclone answered).
            RcFailure: rclone answered with an error.
            DriveError: ``cancelled`` when the group was killed; the daemon could not be
                reached or stopped reading.
            DriveUnavailable: no progress within `timeout` seconds.
        """
        boundary = secrets.token_hex(16)
        head, tail = _part_head(boundary, name), f"\r\n--{boundary}--\r\n".encode()
        query = urllib.parse.urlencode(
            {"fs": fs, "remote": folder, "_config": json.dumps({"IgnoreChecksum": True})},
            quote_via=urllib.parse.quote,
        )
        group = adopted()
        conn, auth = self._fresh_connection(timeout)
        try:
            sock = conn.sock
            close_sending = functools.partial(sock.shutdown, socket.SHUT_WR)

            def write(data: bytes) -> None:
                try:
                    sock.sendall(data)
                except OSError as e:
                    raise _SendFailed(str(e)) from e

            with group.abortable(close_sending) if group is not None else contextlib.nullcontext():
                try:
                    conn.putrequest(
                        "POST", "/operations/uploadfile?" + query, skip_accept_encoding=True
                    )
                    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
                    conn.putheader("Authorization", auth)
                    conn.putheader("Content-Length", str(len(head) + size + len(tail)))
                    try:
                        conn.endheaders()
                    except OSError as e:
                        raise _SendFailed(str(e)) from e
                    write(head)
                    pump(write)
                    write(tail)
                except BaseException as e:
                    with contextlib.suppress(OSError):
                        close_sending()
                    if not isinstance(e, Exception):  # Ctrl-C twice: quit, never wait on rcd
                        raise
                    answer = self._answer_after_abort(conn)
                    if group is not None and group.killed:
                        raise DriveError(
                            "operations/uploadfile was stopped: the transfers were cancelled",
                            code="cancelled",
                        ) from e
                    if not isinstance(e, _SendFailed):
                        raise
                    if answer is not None and answer[0] != 200:
                        self._decode(*answer)  # raises rclone's RcFailure
                    if isinstance(e.__cause__, TimeoutError):
                        raise DriveUnavailable(
                            f"rclone did not take the upload within {timeout:.0f} s; "
                            "try again later",
                            details={"method": "operations/uploadfile"},
                        ) from e
                    raise DriveError(
                        f"lost contact with rclone rcd during operations/uploadfile: {e}"
                    ) from e
                try:
                    resp = conn.getresponse()
                    status, raw = resp.status, resp.read()
                except TimeoutError as e:
                    raise DriveUnavailable(
                        f"rclone did not answer operations/uploadfile within {timeout:.0f} s; "
                        "try again later",
                        details={"method": "operations/uploadfile"},
                    ) from e
                except (OSError, http.client.HTTPException) as e:
                    raise DriveError(
                        f"lost contact with rclone rcd during operations/uploadfile: {e}"
                    ) from e
        finally:
            conn.close()
        return self._decode(status, raw)

    def _fresh_connection(self, timeout: float) -> tuple[_UnixHTTPConnection, str]:
        """A new connection to the daemon (not this thread's keep-alive one) and the auth
        header; a daemon that died is replaced once.

        Raises:
            DriveError: the daemon cannot be started or reached.
        """
        proc, path, auth = self._ensure()
        for attempt in (1, 2):
            conn = _UnixHTTPConnection(path, timeout)
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

    @staticmethod
    def _answer_after_abort(conn: _UnixHTTPConnection) -> tuple[int, bytes] | None:
        """rclone's answer to a request whose body was cut short (status, body), read
        within `_ABORT_WAIT_SECONDS`; None when none came."""
        try:
            if conn.sock is not None:
                conn.sock.settimeout(_ABORT_WAIT_SECONDS)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException):
            return None

    def close(self) -> None:
        """Stop the daemon and remove its socket directory. Idempotent."""
        with self._lock:
            self._closed = True
            self._teardown()
        atexit.unregister(self.close)
