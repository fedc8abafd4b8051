"""The PostgreSQL fixture itself: a real server on 127.0.0.1, password authentication."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.postgres import PG_USER, PgServer, create_database


def test_server_answers_with_the_password_only(pg_server: PgServer) -> None:
    url = create_database(pg_server)
    with psycopg.connect(url, password=pg_server.password) as conn:
        row = conn.execute("SELECT current_setting('listen_addresses'), version()").fetchone()
    assert row is not None and row[0] == "127.0.0.1" and "PostgreSQL" in row[1]
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(url, password="wrong", user=PG_USER).close()
