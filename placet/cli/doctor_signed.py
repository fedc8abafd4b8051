"""`placet doctor`'s lines for signed mode: can this host approve, and run what is approved?

With `approvals = "signed"` an approval runs only when the passkey that signed it is
pinned on the host that runs it (`placet.config.pins`): pins live beside each host's
`config.toml`, never in the database. So a passkey registered on one host of a shared
queue (PostgreSQL) approves nothing that another host runs until it is pinned there too,
and that host's executor refuses the owner's genuine approvals (`passkey_not_pinned`).
Checked: at least one registered, unrevoked passkey pinned here (else ``FAIL``); on a
shared queue, each registered passkey pinned here with the key the database holds (else
``warn``, naming it); and pins kept outside the database's folder. The passkeys are read
from the SQLite file (read-only) or the PostgreSQL server; nothing is written.
"""

from __future__ import annotations

import sqlite3

from placet.config import Settings, approvals_mode
from placet.config.pins import pins_path, read_pins
from placet.errors import ConfigError
from placet.text import inert

CheckRow = tuple[str, str, str, str]
Passkey = tuple[int, str, str, bytes]
"""(id, name, credential id, COSE public key) of a registered, unrevoked passkey."""

_KEYS_SQL = (
    "SELECT id, name, credential_id, public_key FROM web_passkey WHERE revoked_at IS NULL "
    "ORDER BY id"
)


def registered_passkeys(settings: Settings) -> list[Passkey]:
    """The unrevoked passkeys in the database ([] when it, or its passkey table, does not
    exist yet or cannot be read: the database's own check reports that)."""
    if settings.database is not None:
        from sqlalchemy import text

        from placet.store.db import make_server_engine

        engine = make_server_engine(settings.database)
        try:
            with engine.connect() as conn:
                rows = conn.execute(text(_KEYS_SQL)).all()
        except Exception:  # any failure to connect or read: reported by the database check
            return []
        finally:
            engine.dispose()
        return [(int(i), str(n), str(c), bytes(k)) for i, n, c, k in rows]
    if not settings.db_path.exists():
        return []
    try:
        con = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
        try:
            return [(int(i), str(n), str(c), bytes(k)) for i, n, c, k in con.execute(_KEYS_SQL)]
        finally:
            con.close()
    except sqlite3.Error:
        return []


def approval_checks(settings: Settings) -> list[CheckRow]:
    """The doctor's lines for signed mode (module docstring); none in terminal mode."""
    try:
        if approvals_mode(settings) != "signed":
            return []
        pins = read_pins(settings.config_file)
    except ConfigError as e:
        return [("approvals", "FAIL", e.message, "correct or remove the file named above")]
    keys = registered_passkeys(settings)
    shared = settings.database is not None
    problems = [(i, n, why) for i, n, c, k in keys if (why := pins.problem(c, k, active=True))]
    pinned = len(keys) - len(problems)
    out: list[CheckRow] = []
    if not pinned and shared:
        out.append(("approvals", "FAIL",
                    'approvals = "signed" on a shared queue, but no registered passkey is '
                    "pinned on this host: its executor refuses every approval run here, "
                    "the owner's too (passkey_not_pinned); each host needs the owner's "
                    "passkey pinned in its own pinned-passkeys.json",
                    "at this host's terminal: `placet keys` (the owner's passkey shows NOT "
                    "PINNED), then `placet keys pin ID`"))  # fmt: skip
    elif not pinned:
        out.append(("approvals", "FAIL",
                    'approvals = "signed", but no registered passkey is pinned: nothing can '
                    "be approved",
                    "run `placet web`, then `placet web pair` in another terminal and open "
                    "its link (or `placet keys pin ID` for a passkey `placet keys` lists "
                    "NOT PINNED)"))  # fmt: skip
    else:
        where = " on this host" if shared else ""
        out.append(("approvals", "ok", f"signed, {pinned} pinned passkey(s){where}", ""))
    if shared and pinned:
        for pid, name, why in problems:
            out.append(("pins", "warn",
                        f"passkey {pid} ({inert(name)}) {why}: approvals it signs fail on "
                        "this host",
                        f"if it is the owner's: `placet keys pin {pid}` at this host's "
                        f"terminal; if not: `placet keys revoke {pid}`"))  # fmt: skip
    folder = pins_path(settings.config_file).parent
    if not shared and folder.resolve() == settings.db_path.parent.resolve():
        out.append(("pins", "warn",
                    f"{inert(str(folder))} holds both the pinned passkeys and the "
                    "database: a process that can write the database can pin a key of "
                    "its own",
                    "unset PLACET_HOME (config.toml and the pins then live in your "
                    "config folder), or move the database with PLACET_DB"))  # fmt: skip
    return out
