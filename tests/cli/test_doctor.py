"""`placet doctor`: one line per check, the fix when wrong, non-zero exit on any FAIL."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.cli.doctor import run_checks
from placet.config import Settings
from placet.store import open_store
from tests.support.postgres import PgServer, create_database, drop_database, migrated_database
from tests.support.rig import placet_cli, write_config

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


SERVER_CHECKS = ("database", "schema", "timezone", "isolation")


def _doctor(env: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    r = placet_cli("doctor", env=env or dict(os.environ))
    lines: dict[str, str] = {}
    for ln in r.stdout.splitlines():
        if ln.startswith(("ok ", "warn ", "FAIL ")):
            status, name = ln.split()[:2]
            lines[name] = status
    return r.returncode, lines, r.stdout


def _conf(tmp_path: Path, rclone: Path, home: Path, *args: str) -> Path:
    conf = tmp_path / "rclone.conf"
    env = {"RCLONE_CONFIG": str(conf), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run([str(rclone), "config", *args], env=env, check=True, capture_output=True)
    return conf


def test_healthy_setup(settings: Settings, rclone_home: Path) -> None:
    open_store(settings).close()
    settings.default_drive_dir.mkdir(mode=0o700)  # made on first use (doctor makes none)
    code, lines, out = _doctor()
    assert code == 0, out
    for name in ("config", "data", "rclone", "drive", "capabilities", "database", "schema",
                 "journal"):  # fmt: skip
        assert lines[name] == "ok", out
    assert "rclone v1.75.2" in out and "digests sha256" in out and "WAL" in out
    assert str(settings.db_path) in out


def test_bad_modes_fail_with_the_fix(settings: Settings, rclone_home: Path) -> None:
    open_store(settings).close()
    settings.db_path.chmod(0o644)
    settings.data_dir.chmod(0o755)
    code, lines, out = _doctor()
    assert code == 1
    assert lines["data"] == "FAIL" and f"chmod 700 {settings.data_dir}" in out
    assert lines["database"] == "FAIL" and f"chmod 600 {settings.db_path}" in out


def test_missing_rclone_and_broken_config(settings: Settings, rclone_home: Path) -> None:
    write_config(settings, rclone_path="/nonexistent/rclone")
    code, lines, out = _doctor()
    assert code == 1 and lines["rclone"] == "FAIL"
    assert "rclone_path" in out
    settings.config_file.write_text("this is = = not toml\n")
    code, lines, out = _doctor()
    assert code == 1 and lines["config"] == "FAIL"
    assert lines["rclone"] == "ok"  # the other checks still ran, on defaults


def test_encrypted_config_without_a_keyring_says_what_to_install(
    settings: Settings, tmp_path: Path, rclone_bin: Path, rclone_home: Path
) -> None:
    folder = tmp_path / "vault"
    folder.mkdir()
    _conf(tmp_path, rclone_bin, rclone_home, "create", "vault", "alias", f"remote={folder}",
          "--non-interactive")  # fmt: skip
    conf = _conf(tmp_path, rclone_bin, rclone_home, "encryption", "set", "--password-command",
                 "echo pw-doctor")  # fmt: skip
    write_config(settings, drive="vault:")
    env = dict(os.environ, RCLONE_CONFIG=str(conf),
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")  # fmt: skip
    env.pop("RCLONE_CONFIG_PASS", None)
    code, lines, out = _doctor(env)
    assert code == 1
    assert lines["keyring"] == "FAIL" and "secretstorage" in out and "RCLONE_CONFIG_PASS" in out
    assert lines["drive"] == "FAIL" and "placet drive login" in out
    ok = _doctor(dict(env, RCLONE_CONFIG_PASS="pw-doctor"))
    assert ok[0] == 0, ok[2]


def test_webdav_without_digests_and_unreachable(
    settings: Settings,
    tmp_path: Path,
    rclone_bin: Path,
    rclone_home: Path,
    start_server: Callable[[str], ServedRemote],
) -> None:
    served = start_server("webdav")
    conf = _conf(tmp_path, rclone_bin, rclone_home, "create", "dav", "webdav",
                 f"url=http://127.0.0.1:{served.port}", "vendor=rclone", "user=placet",
                 f"pass={served.obscured}", "--no-obscure", "--non-interactive")  # fmt: skip
    write_config(settings, drive="dav:")
    env = dict(os.environ, RCLONE_CONFIG=str(conf))
    code, lines, out = _doctor(env)
    assert code == 0, out
    assert lines["capabilities"] == "warn" and "no digests" in out
    served.stop()
    code, lines, out = _doctor(env)
    assert code == 1 and lines["drive"] == "FAIL"
    assert "fix: check the network" in out
    assert served.obscured not in out and served.password not in out


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_wal_side_files_must_be_private(settings: Settings, rclone_home: Path, suffix: str) -> None:
    open_store(settings).close()
    side = settings.db_path.with_name(settings.db_path.name + suffix)
    side.touch()
    side.chmod(0o644)
    code, lines, out = _doctor()
    assert code == 1 and lines[f"db{suffix}"] == "FAIL" and f"chmod 600 {side}" in out


def test_missing_local_drive_folder_fails_and_nothing_is_created(
    tmp_path: Path, rclone_home: Path
) -> None:
    home = tmp_path / "not-yet"
    nope = tmp_path / "nope"
    env = {**os.environ, "PLACET_HOME": str(home), "PLACET_DRIVE": str(nope)}
    code, lines, out = _doctor(env)
    assert code == 1 and lines["drive"] == "FAIL", out
    assert f"{nope}: the folder does not exist" in out
    assert f"fix: create it or run `placet drive set {nope} --create`" in out
    assert "(absent)" in out and "not encrypted" not in out  # no rclone.conf under HOME
    assert lines["data"] == "ok" and "not created yet" in out
    assert not home.exists() and not nope.exists()  # doctor changes nothing
    nope.mkdir()
    code, lines, out = _doctor(env)
    assert code == 0 and lines["drive"] == "ok" and f"{nope} answers" in out, out
    assert not home.exists()  # the remote was asked with a scratch run folder
    del env["PLACET_DRIVE"]
    code, lines, out = _doctor(env)
    assert code == 0 and lines["drive"] == "ok" and "the default; not created yet" in out, out
    assert not home.exists()


def test_postgresql_connection_schema_time_zone_and_isolation(
    settings: Settings, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL: the server answers with the password from PGPASSWORD,
    the schema is current, placet's sessions run in UTC, the default isolation is named;
    a blank database is a schema warning; a wrong password fails with the fix. (libpq
    reads PGPASSWORD from this process's environment.)"""
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    url = migrated_database(pg_server)
    env = {
        "PLACET_HOME": str(settings.data_dir),
        "PLACET_DB": url,
        "PGPASSWORD": pg_server.password,
    }
    found = {c.name: c for c in run_checks(env) if c.name in SERVER_CHECKS}
    assert {n: c.status for n, c in found.items()} == dict.fromkeys(SERVER_CHECKS, "ok")
    assert (
        "PostgreSQL" in found["database"].text and pg_server.password not in found["database"].text
    )
    assert found["timezone"].text.startswith("sessions in UTC")
    assert found["isolation"].text.startswith("default read committed")

    blank = {**env, "PLACET_DB": create_database(pg_server)}
    schema = next(c for c in run_checks(blank) if c.name == "schema")
    assert (schema.status, schema.text.split(",")[0]) == ("warn", "version 0")

    monkeypatch.setenv("PGPASSWORD", "not-the-password")
    db = next(c for c in run_checks(env) if c.name == "database")
    assert db.status == "FAIL" and "PGPASSWORD" in db.fix and "not-the-password" not in db.text
    drop_database(pg_server, url)
