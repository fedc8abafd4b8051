"""A real PostgreSQL server for the tests: Debian's `postgresql` package, started once per
session in a temporary directory, listening on 127.0.0.1 only.

The server refuses to run as root, so under root the data directory belongs to the
`postgres` user and the server runs as that user. It runs in the foreground as a child of
pytest with a parent-death signal (SIGQUIT: immediate shutdown), so a pytest killed with
-9 takes it along; the normal teardown stops it with SIGINT (fast shutdown). Password
authentication (scram-sha-256) on TCP, with the password from `PGPASSWORD`, the way the
owner's machines give it (docs/decisions/0020-postgresql-connections.md).

Each test gets its own database: `migrated_database` copies a template migrated once per
session (`CREATE DATABASE ... TEMPLATE`, ~0.1 s, where migrating costs ~0.3-1 s on a
loaded box), `create_database` gives a blank one (for the tests of migrating itself), and
`drop_database` removes one when its test ends, so the server never holds hundreds of
databases (stopping it and removing its directory then took a minute).

`restart_pg_server` restarts it in place (fast shutdown, as `pg_ctl restart`), for the
tests of a server that went away between two calls; `pg_server_down` keeps it stopped
for the length of a block (a server still restarting when a placet process starts);
`listening` and `terminate_listeners` find and end the sessions that wait in LISTEN.

Without PostgreSQL the tests that need it fail with a clear message when `CI` is set
(`.ci/run` installs it) and skip otherwise.
"""

from __future__ import annotations

import ctypes
import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PG_USER = "placet"
PG_PASSWORD = "placet-test-password"
_PR_SET_PDEATHSIG = 1
_counter = itertools.count(1)


@dataclass(frozen=True)
class PgServer:
    """A running server: connect with `url(dbname)` and `PGPASSWORD=password`."""

    host: str
    port: int
    password: str

    def url(self, dbname: str) -> str:
        return f"postgresql://{PG_USER}@{self.host}:{self.port}/{dbname}"


def pg_bin_dir() -> Path | None:
    """The directory holding `initdb`, `postgres` and `pg_ctl`: PATH first, then the
    newest /usr/lib/postgresql/*/bin (Debian keeps them off PATH)."""
    found = shutil.which("initdb")
    if found:
        real = Path(found).resolve().parent
        if (real / "postgres").exists():
            return real
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2] or 0))
    for d in reversed(dirs):
        if (Path(d) / "initdb").exists() and (Path(d) / "postgres").exists():
            return Path(d)
    return None


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required when CI is set: {why} (apt-get install postgresql)")
    pytest.skip(f"PostgreSQL not available: {why}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)


def _real_clock_env() -> dict[str, str]:
    """This environment without libfaketime (`LD_PRELOAD`, `FAKETIME*`): the server keeps
    the real clock, as a server on another machine would, when the calendar guard runs the
    tests 5 years ahead; under libfaketime its `lock_timeout` never fires."""
    return {
        k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("FAKETIME")
    }


def _wait_ready(bindir: Path, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited ({proc.returncode}): {log.read_text()[-2000:]}")
        ok = subprocess.run(
            [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)],
            check=False,
        )
        if ok.returncode == 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"postgres did not become ready in 60 s: {log.read_text()[-2000:]}")


def start_pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server, stopped when the generator closes (see the module docstring)."""
    bindir = pg_bin_dir()
    if bindir is None:
        _missing("no initdb/postgres on PATH or under /usr/lib/postgresql/*/bin")
        raise AssertionError("unreachable")
    as_root = os.geteuid() == 0
    user = None
    if as_root:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            _missing("running as root and there is no postgres user to run the server as")
            raise AssertionError("unreachable") from None
    top = Path(tempfile.mkdtemp(prefix="placet-pg-"))
    data = top / "data"
    pwfile = top / "pw"
    log = top / "server.log"
    pwfile.write_text(PG_PASSWORD + "\n")
    if user is not None:
        for p in (top, pwfile):
            os.chown(p, user.pw_uid, user.pw_gid)
    top.chmod(0o700)
    run_as = {"user": user.pw_uid, "group": user.pw_gid} if user else {}
    subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        cwd=top,
        env=_real_clock_env(),
        **run_as,  # type: ignore[arg-type]
    )
    port = _free_port()
    command = [
        str(bindir / "postgres"),
        "-D",
        str(data),
        "-k",
        str(top),
        "-c",
        "listen_addresses=127.0.0.1",
        "-p",
        str(port),
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "wal_level=minimal",
        "-c",
        "max_wal_senders=0",
        "-c",
        "max_connections=200",
    ]

    def stop(proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def launch() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=top,
                env=_real_clock_env(),
                preexec_fn=_die_with_parent,
                **run_as,  # type: ignore[arg-type]
            )
        try:
            _wait_ready(bindir, port, proc, log)
        except BaseException:
            stop(proc)
            raise
        return proc

    server = PgServer("127.0.0.1", port, PG_PASSWORD)
    running: list[subprocess.Popen[bytes]] = []

    def restart() -> None:
        stop(running.pop())
        running.append(launch())

    def halt() -> None:
        stop(running.pop())

    def resume() -> None:
        running.append(launch())

    try:
        running.append(launch())
        _restarts[server] = restart
        _downs[server] = (halt, resume)
        yield server
    finally:
        _restarts.pop(server, None)
        _downs.pop(server, None)
        for proc in running:
            stop(proc)
        shutil.rmtree(top, ignore_errors=True)


_restarts: dict[PgServer, Any] = {}
_downs: dict[PgServer, tuple[Any, Any]] = {}


def restart_pg_server(server: PgServer) -> None:
    """Stop `server` as `pg_ctl restart` does by default (fast shutdown: every session is
    ended, open transactions roll back) and start it again on the same port and data;
    returns once it accepts connections."""
    _restarts[server]()


@contextmanager
def pg_server_down(server: PgServer) -> Iterator[None]:
    """Stop `server` (fast shutdown) for the block; start it again on the same port and
    data when the block ends, returning once it accepts connections."""
    halt, resume = _downs[server]
    halt()
    try:
        yield
    finally:
        resume()


def listening(server: PgServer, url: str) -> list[int]:
    """The server pids of the sessions of the database `url` names whose last statement
    is placet's LISTEN (`placet.store.changes`): the change waiters connected now."""
    with _admin(server) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND query ILIKE 'LISTEN %%'",
            (url.rsplit("/", 1)[1],),
        ).fetchall()
    return sorted(int(pid) for (pid,) in rows)


def terminate_listeners(server: PgServer, url: str) -> list[int]:
    """End every LISTEN session of the database `url` names (`listening`), as a lost
    connection would, the server staying up; returns their pids."""
    pids = listening(server, url)
    with _admin(server) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return pids


def _admin(server: PgServer) -> Any:
    """An autocommit connection to the server's `postgres` database (psycopg)."""
    import psycopg

    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=PG_USER,
        password=server.password,
        dbname="postgres",
        autocommit=True,
    )


def create_database(server: PgServer, *, template: str | None = None) -> str:
    """A fresh database on `server`, empty or a copy of `template`; returns its URL (no
    password in it)."""
    name = f"placet_{os.getpid()}_{next(_counter)}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with _admin(server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    return server.url(name)


_templates: dict[PgServer, str] = {}


def migrated_database(server: PgServer) -> str:
    """A fresh database holding placet's schema (every migration applied), copied from a
    template migrated on first use in this process; returns its URL."""
    template = _templates.get(server)
    if template is None:
        from placet.store.db import make_server_engine
        from placet.store.migrations import migrate

        url = create_database(server)
        engine = make_server_engine(url.replace(f"{PG_USER}@", f"{PG_USER}:{server.password}@"))
        try:
            migrate(engine, db_label="the test template")
        finally:
            engine.dispose()
        template = _templates[server] = url.rsplit("/", 1)[1]
    return create_database(server, template=template)


def drop_database(server: PgServer, url: str) -> None:
    """Drop the database `url` names, closing whatever connections are still open to it."""
    name = url.rsplit("/", 1)[1]
    with _admin(server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
