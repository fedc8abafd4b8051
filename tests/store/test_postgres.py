"""PostgreSQL as the store: the same named migrations reach the same schema as
on SQLite; the URL never carries a password; what the server reports of the schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, text
from sqlalchemy.types import DateTime, Integer, LargeBinary, String, TypeEngine

from placet.config import load_settings
from placet.errors import ConfigError, StoreError
from placet.store import open_store
from placet.store.db import make_engine, make_server_engine, prepare_db_file
from placet.store.migrations import MIGRATIONS, migrate, schema_version
from tests.support.postgres import PgServer, create_database

_FAMILIES: tuple[tuple[type[TypeEngine[Any]], str], ...] = (
    (Integer, "integer"),
    (DateTime, "datetime"),
    (LargeBinary, "binary"),
    (String, "text"),
)


def _family(t: TypeEngine[Any]) -> str:
    for cls, name in _FAMILIES:
        if isinstance(t, cls):
            return name
    raise AssertionError(f"a column type of no known family: {t!r}")


def _where(ix: dict[str, Any]) -> str | None:
    opts = ix.get("dialect_options", {})
    where = opts.get("sqlite_where")
    if where is None:
        where = opts.get("postgresql_where")
    if where is None:
        return None
    return " ".join(str(where).replace("(", "").replace(")", "").replace("::text", "").split())


def _schema(engine: Engine) -> dict[str, Any]:
    """Tables, their columns (name, type family, nullable), primary keys, indexes (name,
    columns, unique, partial WHERE), unique constraints, foreign keys and trigger names."""
    insp = inspect(engine)
    out: dict[str, Any] = {}
    for t in sorted(insp.get_table_names()):
        out[t] = {
            "columns": [
                (c["name"], _family(c["type"]), c["nullable"]) for c in insp.get_columns(t)
            ],
            "pk": insp.get_pk_constraint(t)["constrained_columns"],
            "indexes": sorted(
                (ix["name"], tuple(ix["column_names"]), bool(ix["unique"]), _where(dict(ix)))
                for ix in insp.get_indexes(t)
                if "duplicates_constraint" not in ix  # PostgreSQL's index of a UNIQUE
            ),
            "unique": sorted(
                (u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(t)
            ),
            "fks": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"])
                for f in insp.get_foreign_keys(t)
            ),
        }
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            q = "SELECT DISTINCT trigger_name FROM information_schema.triggers"
        else:
            q = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        out["triggers"] = sorted(r[0] for r in conn.execute(text(q)))
    return out


def test_both_backends_reach_the_same_schema(
    tmp_path: Path, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    db = tmp_path / "s.db"
    prepare_db_file(db)
    lite = make_engine(db)
    pg = make_server_engine(create_database(pg_server))
    try:
        assert migrate(lite, db_label="sqlite") == len(MIGRATIONS)
        assert migrate(pg, db_label="pg") == len(MIGRATIONS)
        assert migrate(pg, db_label="pg") == len(MIGRATIONS)  # a no-op the second time
        assert schema_version(pg) == schema_version(lite) == len(MIGRATIONS)
        a, b = _schema(lite), _schema(pg)
        assert sorted(a) == sorted(b)
        for table in a:
            assert a[table] == b[table], table
        assert "ux_proposal_pending_request" in {i[0] for i in a["proposal"]["indexes"]}
        with lite.connect() as c1, pg.connect() as c2:
            names = "SELECT version, name FROM schema_migration ORDER BY version"
            assert c1.execute(text(names)).all() == c2.execute(text(names)).all()
    finally:
        lite.dispose()
        pg.dispose()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://placet:secret@db.example:5432/placet",
        "postgresql://placet@db.example/placet?password=secret",
        "postgresql+psycopg://u:p@h/d",
    ],
)
def test_a_password_in_the_url_is_refused(url: str, placet_home: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings({"PLACET_HOME": str(placet_home), "PLACET_DB": url})
    assert e.value.error_code == "database_password_in_url"
    assert "secret" not in str(e.value) and "PGPASSWORD" in str(e.value)
    placet_home.mkdir(parents=True, exist_ok=True)
    (placet_home / "config.toml").write_text(f'database = "{url}"\n')
    with pytest.raises(ConfigError) as e:
        load_settings({"PLACET_HOME": str(placet_home)})
    assert e.value.error_code == "database_password_in_url"
    assert "config.toml" in str(e.value) and "secret" not in str(e.value)


def test_a_database_url_in_config_toml_selects_postgresql(
    placet_home: Path, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = create_database(pg_server)
    placet_home.mkdir(parents=True, exist_ok=True)
    (placet_home / "config.toml").write_text(f'database = "{url}"\n')
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    s = load_settings({"PLACET_HOME": str(placet_home)})
    assert s.database == url
    with open_store(s) as store:
        assert store.postgres and store.counts()["pending"] == 0
    assert not s.db_path.exists()
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("PGPASSFILE", str(placet_home / "absent"))
    with pytest.raises(StoreError, match="password"):
        open_store(s)


def test_sqlite_stays_the_default(placet_home: Path) -> None:
    s = load_settings({"PLACET_HOME": str(placet_home)})
    assert s.database is None
    with open_store(s) as store:
        assert not store.postgres
    assert s.db_path.exists()
