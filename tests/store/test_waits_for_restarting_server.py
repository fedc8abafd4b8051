"""Opening the store while the PostgreSQL server restarts (placet.store.reconnect): a
command started then waits for the server, saying so on stderr, and goes on once it is
back; a server that stays down is waited for a bounded time, then refused with a
retryable StoreError; a login the server refuses (a wrong password) is not waited for."""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from placet.errors import StoreError
from placet.store.db import make_server_engine
from placet.store.migrations import migrate
from tests.support.postgres import PG_USER, PgServer, pg_server_down
from tests.support.rig import PLACET
from tests.support.web import free_port

pytestmark = pytest.mark.usefixtures("store_backend")
postgresql_only = pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)


def _stderr_line(proc: subprocess.Popen[str], seconds: float = 30) -> str:
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], seconds)
    assert ready, f"nothing on stderr within {seconds} s"
    return proc.stderr.readline()


@postgresql_only
@pytest.mark.timeout(120)
def test_a_command_started_while_the_server_restarts_waits_for_it(
    store_backend: str, pg_server: PgServer
) -> None:
    with pg_server_down(pg_server):
        proc = subprocess.Popen(
            [str(PLACET), "list"],
            env=dict(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = _stderr_line(proc)
            assert "is not accepting connections" in line, line
            assert "Connection refused" in line and "; trying again in " in line, line
            assert proc.poll() is None, proc.communicate()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "no proposals" in out.lower() or out.strip() == "", out


def test_a_server_that_stays_down_is_waited_for_a_bounded_time() -> None:
    url = f"postgresql://{PG_USER}:pw@127.0.0.1:{free_port()}/placet"
    engine = make_server_engine(url)
    said: list[str] = []
    started = time.monotonic()
    try:
        with pytest.raises(StoreError) as raised:
            migrate(engine, db_label="the test server", wait_s=1.0, say=said.append)
    finally:
        engine.dispose()
    took = time.monotonic() - started
    assert 1.0 <= took < 10, took
    assert raised.value.retryable and raised.value.error_code == "store_error"
    assert "still refused connections after 1s" in raised.value.message
    assert said and all("is not accepting connections" in line for line in said), said


@postgresql_only
def test_a_wrong_password_is_refused_at_once(store_backend: str, pg_server: PgServer) -> None:
    url = os.environ["PLACET_DB"].replace(f"{PG_USER}@", f"{PG_USER}:wrong@")
    engine = make_server_engine(url)
    said: list[str] = []
    try:
        with pytest.raises(StoreError, match="password authentication failed") as raised:
            migrate(engine, db_label="the test database", wait_s=30.0, say=said.append)
    finally:
        engine.dispose()
    assert said == [] and not raised.value.retryable
