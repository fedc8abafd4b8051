"""Migrations: a blank database reaches exactly the schema the declared tables have,
re-running is a no-op, and a database from a newer (or different) placet is refused."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from placet.config import Settings, ensure_data_dir
from placet.errors import SchemaTooNew, StoreError
from placet.store import open_store
from placet.store.db import make_engine, prepare_db_file
from placet.store.migrations import MIGRATIONS, code_version, migrate, schema_version


def _schema(db: Path) -> dict[str, Any]:
    """Tables, columns, indexes (with partial-index WHERE) and foreign keys of a database."""
    con = sqlite3.connect(db)
    try:
        out: dict[str, Any] = {}
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for t in sorted(tables):
            cols = [r[1:6] for r in con.execute(f"PRAGMA table_xinfo({t})")]
            idx = {}
            for _seq, name, unique, _origin, partial in con.execute(f"PRAGMA index_list({t})"):
                sql = con.execute(
                    "SELECT sql FROM sqlite_master WHERE type='index' AND name=?", (name,)
                ).fetchone()
                where = None
                if partial and sql and sql[0]:
                    where = " ".join(sql[0].split(" WHERE ", 1)[1].split())
                key = name if not name.startswith("sqlite_autoindex") else f"auto:{t}"
                idx[key] = (
                    unique,
                    [r[2] for r in con.execute(f"PRAGMA index_info({name})")],
                    where,
                )
            fks = sorted(r[2:5] for r in con.execute(f"PRAGMA foreign_key_list({t})"))
            out[t] = {"columns": cols, "indexes": idx, "foreign_keys": fks}
        return out
    finally:
        con.close()


def test_blank_database_reaches_the_exact_model_schema(tmp_path: Path) -> None:
    migrated = tmp_path / "migrated.db"
    prepare_db_file(migrated)
    engine = make_engine(migrated)
    assert migrate(engine, db_label="migrated") == code_version()
    engine.dispose()

    # The models' schema, with every placet module imported (a table declared anywhere
    # must have its migration), built by create_all in a fresh interpreter.
    declared = tmp_path / "declared.db"
    script = f"""
import importlib, pkgutil, sys, placet
for m in pkgutil.walk_packages(placet.__path__, "placet."):
    try:
        importlib.import_module(m.name)
    except Exception as e:  # another module's own problem; its tables are then unseen
        print("skipped", m.name, e, file=sys.stderr)
from sqlalchemy import create_engine
from placet.store.models import METADATA
METADATA.create_all(create_engine("sqlite:///{declared}"))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    got, want = _schema(migrated), _schema(declared)
    assert json.dumps(got, sort_keys=True, indent=1) == json.dumps(want, sort_keys=True, indent=1)
    assert "ux_proposal_pending_request" in got["proposal"]["indexes"]
    assert got["proposal"]["indexes"]["ux_proposal_pending_request"][2] == "status = 'pending'"


def test_rerun_is_a_no_op_and_versions_are_recorded(settings: Settings) -> None:
    open_store(settings).close()
    with open_store(settings) as store:
        assert schema_version(store.engine) == len(MIGRATIONS)
    con = sqlite3.connect(settings.db_path)
    rows = con.execute("SELECT version, name FROM schema_migration ORDER BY version").fetchall()
    con.close()
    assert rows == [(i + 1, m.name) for i, m in enumerate(MIGRATIONS)]


def test_newer_schema_is_refused_naming_both_versions(settings: Settings) -> None:
    open_store(settings).close()
    newer = len(MIGRATIONS) + 3
    con = sqlite3.connect(settings.db_path)
    con.execute(
        "INSERT INTO schema_migration (version, name, applied_at) "
        "VALUES (?, 'from_the_future', '2031-01-01 00:00:00.000000')",
        (newer,),
    )
    con.commit()
    con.close()
    with pytest.raises(SchemaTooNew) as e:
        open_store(settings)
    assert f"schema version {newer}" in e.value.message
    assert f"schema version {len(MIGRATIONS)}" in e.value.message
    assert e.value.details == {"db_version": newer, "code_version": len(MIGRATIONS)}
    assert e.value.exit_code == 6


def test_newer_schema_is_refused_by_the_cli(settings: Settings) -> None:
    open_store(settings).close()
    con = sqlite3.connect(settings.db_path)
    con.execute(
        "INSERT INTO schema_migration VALUES (99, 'from_the_future', '2031-01-01 00:00:00')"
    )
    con.commit()
    con.close()
    placet = Path(sys.executable).with_name("placet")
    r = subprocess.run([str(placet), "list"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 6
    assert "schema version 99" in r.stderr and f"schema version {len(MIGRATIONS)}" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_different_lineage_is_refused(settings: Settings) -> None:
    open_store(settings).close()
    con = sqlite3.connect(settings.db_path)
    con.execute("UPDATE schema_migration SET name = 'someone_elses' WHERE version = 1")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="someone_elses"):
        open_store(settings)


def test_an_appended_migration_runs_once_in_order(settings: Settings) -> None:
    from placet.store.migrations import Migration

    open_store(settings).close()
    extra = [*MIGRATIONS, Migration("add_test_table", ("CREATE TABLE t_extra (x INTEGER)",))]
    engine = make_engine(settings.db_path)
    assert migrate(engine, db_label="t", migrations=extra) == len(MIGRATIONS) + 1
    assert migrate(engine, db_label="t", migrations=extra) == len(MIGRATIONS) + 1
    assert schema_version(engine) == len(MIGRATIONS) + 1
    engine.dispose()
    # The code without that migration now sees a newer database.
    with pytest.raises(SchemaTooNew):
        open_store(settings)


def test_digest_cache_rows_of_nul_joined_root_keys_are_dropped(settings: Settings) -> None:
    """Rows under the old NUL-joined root key are dropped by the migration that made the key
    hex (`digest_cache_hex_root_keys`); rows under any other key stay."""
    ensure_data_dir(settings)
    engine = make_engine(settings.db_path)
    before = next(i for i, m in enumerate(MIGRATIONS) if m.name == "digest_cache_hex_root_keys")
    migrate(engine, db_label="t", migrations=MIGRATIONS[:before])
    engine.dispose()
    con = sqlite3.connect(settings.db_path)
    for key in ("/home/me/proj\x002049\x00131", "a" * 64):
        con.execute(
            "INSERT INTO sync_digest_cache (root_key, path, size, mtime_ns, inode, ctime_ns, "
            "sha256, verified, version) VALUES (?, 'f.txt', 1, 1, 1, 1, 'x', 1, 1)",
            (key,),
        )
    con.commit()
    con.close()
    open_store(settings).close()
    con = sqlite3.connect(settings.db_path)
    keys = [k for (k,) in con.execute("SELECT root_key FROM sync_digest_cache")]
    con.close()
    assert keys == ["a" * 64]
