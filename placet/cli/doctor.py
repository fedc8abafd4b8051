"""`placet doctor`: one line per thing placet depends on, and the fix when it is wrong.

Checked in the order a broken setup fails: the config file, the data directory (yours,
0700), the rclone binary, the rclone config and its keyring password, the drive and its
capabilities, the database (mode, schema version, journal; on PostgreSQL the server,
docs/decisions/0020-postgresql-connections.md) and, in signed mode, the pinned passkeys
(docs/design.md section 12; on a shared queue on this host too, `placet.cli.doctor_signed`).
A Proton Drive remote gets a warning with what is known of rclone's Proton backend.

Nothing is changed: the database is opened read-only, a missing data directory or
default drive folder is reported, not created (asking the remote borrows a scratch run
folder). Each line is ``ok``, ``warn`` or ``FAIL`` with a ``fix:`` line; the exit status
is 1 when any check failed."""

from __future__ import annotations

import argparse
import os
import sqlite3
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from placet.config import Settings, data_dir_from_env, load_settings
from placet.errors import EXIT_OK, EXIT_OP_FAILED, ConfigError, PlacetError
from placet.text import inert

PROTON_NOTE = (
    "Proton Drive through rclone is reported failing since August 2026: logins refused "
    'with "This version of the app is no longer supported" (rclone#9764), and '
    "files made by Proton's newer apps unreadable, uploads failing (rclone#9622)"
)
PROTON_FIX = (
    "if this drive fails, follow those rclone issues and meanwhile use a remote that works "
    "(e.g. `placet drive set gdrive:Agents`, or an SFTP or WebDAV remote)"
)


def is_proton(name: str | None, backend: str | None) -> bool:
    """A drive spec naming rclone's Proton Drive backend (`protondrive:`, `:protondrive:`)."""
    return "protondrive" in ((name or "").lower(), (backend or "").lower())


@dataclass(frozen=True)
class Check:
    """One line of the report: `status` is ok, warn or FAIL; `fix` says what to do."""

    name: str
    status: str
    text: str
    fix: str = ""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `doctor` to the `placet` parser."""
    p = subparsers.add_parser("doctor", help="check rclone, the drive, the database, keyring")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks()
    width = max(len(c.name) for c in checks)
    for c in checks:
        sys.stdout.write(f"{c.status:<5} {c.name:<{width}}  {inert(c.text)}\n")
        if c.fix:
            sys.stdout.write(f"{'':<5} {'':<{width}}  fix: {inert(c.fix)}\n")
    sys.stdout.flush()
    return EXIT_OP_FAILED if any(c.status == "FAIL" for c in checks) else EXIT_OK


def run_checks(environ: dict[str, str] | None = None) -> list[Check]:
    """Every check, in order (see the module docstring)."""
    env = dict(os.environ) if environ is None else environ
    out: list[Check] = []
    try:
        settings = load_settings(env)
        shown = settings.config_file if settings.config_file.exists() else "none (defaults)"
        out.append(Check("config", "ok", f"{shown}"))
    except ConfigError as e:
        out.append(Check("config", "FAIL", e.message, "correct or remove the file named above"))
        settings = _defaults(env)
    out.append(_data_dir(settings))
    rclone = _guard(out, "rclone", lambda: _rclone(settings))
    out.append(_keyring(settings, rclone, env))
    if rclone is not None:
        _drive(out, settings, env)
    out += _database(settings)
    out += _approvals(settings)
    out.append(_rules(settings, env))
    out += _notify(settings, env)
    return out


def _approvals(settings: Settings) -> list[Check]:
    """Signed mode: can this host approve and run (`placet.cli.doctor_signed`)."""
    from placet.cli.doctor_signed import approval_checks

    return [Check(*row) for row in approval_checks(settings)]


def _rules(settings: Settings, env: dict[str, str]) -> Check:
    """The rules file (`placet.rules`): absent, usable, or refused and why (no rule then
    applies). The roots checked are those the recent proposals used."""
    from placet.rules.loading import load_rules

    roots: list[Path] = []
    if settings.database is None and settings.db_path.exists():
        try:
            con = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
            try:
                rows = con.execute(_ROOTS_SQL).fetchall()
            finally:
                con.close()
            roots = [Path(str(p)) for (p,) in rows if p]
        except sqlite3.Error:
            roots = []  # no proposal table yet (the database check above says why)
    state = load_rules(settings, roots=roots, env=env)
    if state.status == "refused":
        fix = "see the message; no standing rule approves anything until then"
        return Check("rules", "FAIL", state.line(), fix)
    if state.status == "absent" and env.get("PLACET_HOME"):
        why = "PLACET_HOME is set: rules apply only from placet's default config folder"
        fix = "unset PLACET_HOME to use rules.toml (PLACET_DB still moves the database)"
        return Check("rules", "warn", why, fix)
    return Check("rules", "ok", state.line())


_ROOTS_SQL = (
    "SELECT DISTINCT json_extract(request, '$.root.path') FROM "
    "(SELECT request FROM proposal ORDER BY id DESC LIMIT 1000)"
)


def _notify(settings: Settings, env: dict[str, str]) -> list[Check]:
    """One line per notification channel (`placet.notify.status`)."""
    from placet.notify.status import channel_checks

    return [Check(*row) for row in channel_checks(settings, env)]


def _defaults(env: dict[str, str]) -> Settings:
    """Default settings at the environment's locations (when config.toml is broken)."""
    data = data_dir_from_env()
    db = Path(env["PLACET_DB"]).expanduser().absolute() if env.get("PLACET_DB") else None
    return Settings(
        data_dir=data,
        db_path=db or data / "placet.db",
        config_file=data / "config.toml",
        drive=env.get("PLACET_DRIVE") or None,
    )


def _guard(out: list[Check], name: str, fn: Callable[[], tuple[Check, Path]]) -> Path | None:
    try:
        check, value = fn()
    except PlacetError as e:
        out.append(Check(name, "FAIL", e.message, _fix_for(e)))
        return None
    out.append(check)
    return value


def _fix_for(e: PlacetError) -> str:
    return {
        "drive_locked": "run `placet drive login` (stores the config password in the keyring)",
        "drive_misconfigured": "define the remote with `rclone config`, or `placet drive set`",
        "drive_unavailable": "check the network and the remote's status; `placet drive show`",
        "no_keyring": "install a keyring backend or set RCLONE_CONFIG_PASS",
    }.get(e.error_code, "see the message")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _data_dir(settings: Settings) -> Check:
    d = settings.data_dir
    if not d.exists():
        return Check("data dir", "ok", f"{d} (not created yet; made 0700 on first use)")
    st = d.stat()
    if st.st_uid != os.getuid():
        return Check("data dir", "FAIL", f"{d} is owned by uid {st.st_uid}, not you",
                     f"point PLACET_HOME at a directory you own, or chown {d}")  # fmt: skip
    if _mode(d) != 0o700:
        return Check("data dir", "FAIL", f"{d} has mode {_mode(d):o}; it must be 700",
                     f"chmod 700 {d}")  # fmt: skip
    return Check("data dir", "ok", f"{d} (mode 700, yours)")


def _rclone(settings: Settings) -> tuple[Check, Path]:
    from placet.drive.proc import rclone_version, resolve_rclone_path

    path = resolve_rclone_path(settings.rclone_path)
    version = rclone_version(path)
    return Check("rclone", "ok", f"{path} ({version})"), path


def _keyring(settings: Settings, rclone: Path | None, env: dict[str, str]) -> Check:
    from placet.config.password import NO_KEYRING_HELP, load_config_password
    from placet.drive.credentials import config_is_encrypted, rclone_config_path

    conf = rclone_config_path(env, rclone or Path(sys.executable).parent / "rclone")
    encrypted = config_is_encrypted(conf)
    state = "encrypted" if encrypted else "not encrypted" if conf.exists() else "absent"
    where = f"rclone config {conf} ({state})"
    try:
        import keyring
        from keyring.backends import fail

        backend = keyring.get_keyring()
        name = f"{type(backend).__module__}.{type(backend).__name__}"
        missing = isinstance(backend, fail.Keyring)
    except Exception as e:  # a broken PYTHON_KEYRING_BACKEND raises at first use
        return Check("keyring", "FAIL", f"the keyring cannot be loaded: {e}",
                     "fix or unset PYTHON_KEYRING_BACKEND / keyringrc.cfg")  # fmt: skip
    if env.get("RCLONE_CONFIG_PASS"):
        return Check("keyring", "ok", f"{where}; password from RCLONE_CONFIG_PASS")
    if missing:
        if encrypted:
            return Check("keyring", "FAIL", f"{where}; no keyring backend", NO_KEYRING_HELP)
        return Check("keyring", "warn", f"{where}; no keyring backend (not needed now)",
                     "only needed for an encrypted rclone config: " + NO_KEYRING_HELP)  # fmt: skip
    if not encrypted:
        return Check("keyring", "ok", f"{where}; backend {name}")
    try:
        stored = load_config_password()
    except ConfigError as e:
        return Check("keyring", "FAIL", f"{where}; {e.message}", "unlock the keyring")
    if not stored:
        return Check("keyring", "FAIL", f"{where}; backend {name} holds no password",
                     "run `placet drive login`")  # fmt: skip
    return Check("keyring", "ok", f"{where}; password in backend {name}")


def _drive(out: list[Check], settings: Settings, env: dict[str, str]) -> None:
    from placet.cli.drive import local_folder_problem
    from placet.drive import configured_spec, default_drive_spec, validate_spec

    spec = configured_spec(settings)
    try:
        parsed = validate_spec(spec)
    except PlacetError as e:
        out.append(Check("drive", "FAIL", f"{spec}: {e.message}", "`placet drive set SPEC`"))
        return
    if is_proton(parsed.name, parsed.backend_hint):
        out.append(Check("proton", "warn", PROTON_NOTE, PROTON_FIX))
    problem = local_folder_problem(parsed)
    if problem is not None:
        if spec == default_drive_spec(settings) and not Path(spec).exists():
            out.append(Check("drive", "ok", f"{spec} (the default; not created yet, made "
                             "0700 on first use)"))  # fmt: skip
        else:
            fix = f"create it or run `placet drive set {spec} --create`"
            if Path(parsed.root).exists():
                fix = f"give a folder: `placet drive set FOLDER`, not {spec}"
            out.append(Check("drive", "FAIL", f"{spec}: {problem}", fix))
        return
    with tempfile.TemporaryDirectory(prefix="placet-doctor-") as scratch:
        # rclone rcd's socket lives in <data dir>/run: a missing data dir is not created
        # here (doctor changes nothing), a scratch one holds the socket instead.
        if not settings.data_dir.exists():
            settings = settings.model_copy(update={"data_dir": Path(scratch), "drive": spec})
        _ask_drive(out, settings, spec, env)


def _ask_drive(out: list[Check], settings: Settings, spec: str, env: dict[str, str]) -> None:
    from placet.drive import drive_for, preferred_digest

    try:
        drive = drive_for(settings, environ=env)
    except PlacetError as e:
        out.append(Check("drive", "FAIL", f"{spec}: {e.message}", "`placet drive set SPEC`"))
        return
    try:
        drive.list_folder("", limit=1)
        out.append(Check("drive", "ok", f"{drive.redact(spec)} answers"))
        caps = drive.capabilities()
        best = preferred_digest(caps)
        digests = (
            f"digests {', '.join(caps.hash_types)} (placet compares {best})"
            if best
            else "no digests: compared by size, uploads verified by reading them back"
        )
        case = "case-insensitive names" if caps.case_insensitive else "case-sensitive names"
        replace = "server-side replace" if caps.server_side_replace else "direct replace"
        out.append(Check("capabilities", "ok" if best else "warn",
                         f"{caps.backend or '?'}: {digests}; {case}; {replace}"))  # fmt: skip
        if caps.backend == "protondrive" and not any(c.name == "proton" for c in out):
            out.append(Check("proton", "warn", PROTON_NOTE, PROTON_FIX))
    except PlacetError as e:
        out.append(Check("drive", "FAIL", f"{drive.redact(spec)}: {e.message}", _fix_for(e)))
    finally:
        drive.close()


def _server_database(url: str) -> list[Check]:
    """The PostgreSQL server `database` names: it answers with the password
    libpq finds; the schema version; this session's time zone is UTC and its lock
    timeout placet's, as placet's connection options ask (a pooler that drops startup
    options breaks both); the default isolation; a read-only server (a standby)."""
    from sqlalchemy import text

    from placet.store.db import BUSY_TIMEOUT_MS, make_server_engine

    engine = make_server_engine(url)
    shown = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT current_setting('server_version'), current_user, "
                    "current_setting('TimeZone'), current_setting('lock_timeout'), "
                    "current_setting('default_transaction_isolation'), "
                    "current_setting('default_transaction_read_only'), pg_is_in_recovery(), "
                    "to_regclass('schema_migration') IS NOT NULL, "
                    "(SELECT reset_val FROM pg_settings WHERE name = 'TimeZone')"
                )
            ).one()
            version = (
                int(conn.execute(text("SELECT max(version) FROM schema_migration")).scalar() or 0)
                if row[7]
                else 0
            )
    except Exception as e:  # any failure to connect is the finding (driver or SQLAlchemy)
        reason = str(getattr(e, "orig", e)).strip().splitlines()[0][:300]
        return [
            Check(
                "database",
                "FAIL",
                f"{shown}: cannot connect: {reason}",
                "check the URL, that the server runs and accepts you, and the password in "
                "PGPASSWORD, PGPASSFILE or ~/.pgpass (never in the URL)",
            )
        ]
    finally:
        engine.dispose()
    server_version, user, tz, lock_timeout, isolation, read_only, standby, _, server_tz = row
    out = [Check("database", "ok", f"{shown} (PostgreSQL {server_version}, as {user})")]
    if standby or read_only == "on":
        out.append(Check("database", "FAIL", "the server is read-only (a standby, or "
                         "default_transaction_read_only = on)",
                         "point `database` at the primary"))  # fmt: skip
    out.append(_schema_check(version))
    if tz != "UTC":
        out.append(Check("timezone", "FAIL", f"placet's sessions run in {tz}, not UTC: the "
                         "connection options placet sends were dropped (a pooler?)",
                         "connect to the server directly, or make the pooler pass "
                         "startup options"))  # fmt: skip
    else:
        out.append(Check("timezone", "ok", f"sessions in UTC (the server's default: {server_tz})"))
    if lock_timeout != f"{BUSY_TIMEOUT_MS}ms" and lock_timeout != f"{BUSY_TIMEOUT_MS // 1000}s":
        out.append(Check("lock_timeout", "warn", f"{lock_timeout}, not placet's "
                         f"{BUSY_TIMEOUT_MS} ms: the connection options were dropped",
                         "connect to the server directly"))  # fmt: skip
    if isolation == "serializable":
        out.append(Check("isolation", "warn", "default serializable: placet's writes take one "
                         "advisory lock and its reads ask repeatable read, so this only adds "
                         "retried serialization failures", "the default read committed "
                         "is enough"))  # fmt: skip
    else:
        out.append(Check("isolation", "ok", f"default {isolation}; placet's writes take one "
                         "advisory lock, its reads run at repeatable read"))  # fmt: skip
    return out


def _database(settings: Settings) -> list[Check]:

    if settings.database is not None:
        return _server_database(settings.database)
    db = settings.db_path
    if not db.exists():
        return [Check("database", "ok", f"{db} (not created yet; made on first use)")]
    out: list[Check] = []
    mode = _mode(db)
    if mode != 0o600:
        out.append(Check("database", "FAIL", f"{db} has mode {mode:o}; it must be 600",
                         f"chmod 600 {db}"))  # fmt: skip
    # Before opening: closing the last connection may checkpoint and remove them.
    for suffix in ("-wal", "-shm"):
        side = db.with_name(db.name + suffix)
        if side.exists() and _mode(side) != 0o600:
            out.append(Check(f"db{suffix}", "FAIL", f"{side} has mode {_mode(side):o}",
                             f"chmod 600 {side}"))  # fmt: skip
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            journal = str(con.execute("PRAGMA journal_mode").fetchone()[0])
            has = con.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migration'"
            ).fetchone()
            version = (
                int(con.execute("SELECT max(version) FROM schema_migration").fetchone()[0] or 0)
                if has
                else 0
            )
        finally:
            con.close()
    except sqlite3.Error as e:
        return [*out, Check("database", "FAIL", f"{db} cannot be read: {e}",
                            "restore it from a backup or move it away")]  # fmt: skip
    out.append(_schema_check(version))
    if journal.lower() != "wal":
        fix = "run any placet command to set it (WAL is refused on network filesystems)"
        out.append(Check("journal", "FAIL", f"journal_mode is {journal}, not wal", fix))
    else:
        out.append(Check("journal", "ok", "WAL"))
    if not any(c.name == "database" for c in out):
        out.insert(0, Check("database", "ok", f"{db} (mode 600)"))
    return out


def _schema_check(version: int) -> Check:
    """The database's schema version against this placet's (the same on both backends)."""
    from placet.store.migrations import code_version

    want = code_version()
    if version == want:
        return Check("schema", "ok", f"version {version}")
    fix = "upgrade placet" if version > want else "run any placet command to migrate it"
    return Check("schema", "FAIL" if version > want else "warn",
                 f"version {version}, this placet uses {want}", fix)  # fmt: skip
