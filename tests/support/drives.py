"""Real rclone servers for tests: `rclone serve webdav` / `serve sftp` / `serve s3` on
127.0.0.1 with free ports. The fixtures over them (`webdav_server`, `sftp_server`,
`start_server`, `make_drive`, `local_drive`, `rclone_home`, `sub`) are in tests/conftest.py.

* `serve(kind, root, home)`: a started server (`served.stop()` ends it); kinds ``webdav``
  (no digests), ``sftp`` (md5 + sha1: the server runs md5sum/sha1sum) and ``s3``
  (`rclone serve s3`: md5 digests, no server-side move, so a replacement takes the direct
  path; objects live under `root / S3_BUCKET`).
* `served.spec(sub)`: a connection string for a sub-folder; `unique_sub()`: a fresh
  folder name, so tests sharing a session server do not see each other.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

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


def unique_sub() -> str:
    """A fresh folder name, so tests sharing a session server do not see each other."""
    return f"t-{uuid.uuid4().hex[:12]}"
