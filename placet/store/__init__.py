"""placet's store: proposals, their lifecycle, op results and the audit chain in SQLite
(the embedded default) or PostgreSQL (`database = "postgresql://..."`, one queue for
several machines).

`open_store(settings)` is the one way in: it prepares the data directory (0700) and the
database file (0600), builds the engine (WAL, busy_timeout, foreign keys), applies the
named migrations, and returns a `Store`. See `placet.store.store.Store` for the API and
`placet.store.lifecycle` for the rules.
"""

from __future__ import annotations

from placet.config import Settings, ensure_data_dir
from placet.store.db import BUSY_TIMEOUT_MS, make_engine, make_server_engine, prepare_db_file
from placet.store.migrations import migrate
from placet.store.models import AuditRecord, OpResultRecord, ProposalRecord
from placet.store.records import AuditVerification, LeaseHolder, SweepResult
from placet.store.store import Store

__all__ = [
    "AuditRecord",
    "AuditVerification",
    "LeaseHolder",
    "OpResultRecord",
    "ProposalRecord",
    "Store",
    "SweepResult",
    "open_store",
]


def open_store(settings: Settings, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Store:
    """Open (creating and migrating as needed) the database: the PostgreSQL server of
    `settings.database` when set, else the SQLite file `settings.db_path`.

    `busy_timeout_ms` is how long one statement waits for another process's lock before
    the store's own bounded retry takes over (tests shorten it).

    Raises:
        ConfigError: the data directory is not private to this user.
        SchemaTooNew: the database was written by a newer placet (both versions named).
        StoreError: the file is unusable (not a regular file, network filesystem, corrupt),
            or the server refused (unreachable, no password in PGPASSWORD or ~/.pgpass).
        ConfigError: the data directory's host id file is unreadable or edited
            (`placet.store.host`).
    """
    ensure_data_dir(settings)
    if settings.database is not None:
        engine = make_server_engine(settings.database, busy_timeout_ms=busy_timeout_ms)
        label = engine.url.render_as_string(hide_password=True)
    else:
        prepare_db_file(settings.db_path)
        engine = make_engine(settings.db_path, busy_timeout_ms=busy_timeout_ms)
        label = str(settings.db_path)
    try:
        migrate(engine, db_label=label)
        return Store(engine, settings)
    except BaseException:
        engine.dispose()
        raise
