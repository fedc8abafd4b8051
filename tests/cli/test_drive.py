"""`placet drive set | show | login`, the hidden `drive password-for-rclone`, the keyring,
and `drive_for`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backends.fail
import pytest

from placet.cli import main
from placet.config import Settings, load_settings
from placet.config.password import CALLER_ENV, KEYRING_SERVICE, KEYRING_USERNAME, write_token
from placet.drive import drive_for
from placet.errors import EXIT_DRIVE_UNAVAILABLE, EXIT_OK, EXIT_USAGE, ConfigError, DriveError
from tests.support.keyring_backend import MemoryKeyring, file_keyring_env
from tests.support.proposals import propose_folder

RCLONE = Path(sys.executable).parent / "rclone"
PLACET = Path(sys.executable).parent / "placet"
SECRET = "Open-Sesame-42"


@pytest.fixture
def mem_keyring() -> Iterator[MemoryKeyring]:
    prev = keyring.get_keyring()
    kr = MemoryKeyring()
    keyring.set_keyring(kr)
    yield kr
    keyring.set_keyring(prev)


def _stored(ring: Path) -> dict[str, str]:
    return json.loads(ring.read_text()) if ring.exists() else {}


@pytest.fixture
def vault(tmp_path: Path, rclone_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An encrypted rclone config (RCLONE_CONFIG) with remote `vault:` -> a local folder."""
    conf, folder = tmp_path / "rclone.conf", tmp_path / "vault-data"
    folder.mkdir()
    (folder / "inside.txt").write_bytes(b"secret stuff")
    env = {"RCLONE_CONFIG": str(conf), "HOME": str(rclone_home), "PATH": "/usr/bin:/bin"}
    for args in (
        ["config", "create", "vault", "alias", f"remote={folder}", "--non-interactive"],
        ["config", "encryption", "set", "--password-command", f"echo {SECRET}"],
    ):
        subprocess.run([str(RCLONE), *args], env=env, check=True, capture_output=True)
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    monkeypatch.delenv("RCLONE_CONFIG_PASS", raising=False)
    return conf


def test_drive_set_writes_config_and_keeps_other_keys(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], rclone_home: Path
) -> None:
    settings.config_file.parent.mkdir(parents=True, exist_ok=True)
    settings.config_file.write_text(
        '# my settings\nallow_yes = true\n\n[roots."/srv/p"]\ndownloads = "new-only"\n'
    )
    folder = tmp_path / "my drive"
    folder.mkdir()
    assert main(["drive", "set", str(folder)]) == EXIT_OK
    assert "rclone reached it: backend local" in capsys.readouterr().out
    assert main(["drive", "set", "--no-check", f"{folder}-2"]) == EXIT_OK
    text = settings.config_file.read_text()
    assert text.startswith("# my settings\n") and text.count("drive =") == 1
    data = tomllib.loads(text)
    assert data["drive"] == f"{folder}-2" and data["allow_yes"] is True
    assert data["roots"] == {"/srv/p": {"downloads": "new-only"}}
    assert load_settings().drive == f"{folder}-2"
    assert oct(settings.config_file.stat().st_mode & 0o777) == "0o600"


def test_drive_set_refuses_inline_secrets_and_unreachable_remotes(
    settings: Settings, capsys: pytest.CaptureFixture[str], rclone_home: Path
) -> None:
    code = main(["drive", "set", ":webdav,url='http://h',pass=abcdefgh1234:x"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "rclone config" in err and "abcdefgh1234" not in err
    code = main(["drive", "set", ":webdav,url='http://127.0.0.1:1',vendor=rclone:"])
    err = capsys.readouterr().err
    assert code == EXIT_DRIVE_UNAVAILABLE and "--no-check" in err
    assert not settings.config_file.exists()


def test_drive_show(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drive", "show", "--json"]) == EXIT_OK
    info = json.loads(capsys.readouterr().out)
    assert info["drive"] == str(settings.default_drive_dir) and info["source"] == "default"
    assert info["rclone_version"].startswith("rclone v")
    assert info["rclone_path"] == str(RCLONE)
    assert info["capabilities"]["hash_types"] == ["sha256", "sha1", "md5"]
    assert settings.default_drive_dir.is_dir()  # the default drive is created on first use
    assert main(["drive", "show"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "server_side_replace: True" in out and "rclone_version: rclone v" in out


def test_drive_for_refuses_an_inline_secret(settings: Settings) -> None:
    bad = settings.model_copy(update={"drive": ":sftp,host=h,pass=abcdefgh:"})
    with pytest.raises(ConfigError, match="rclone config"):
        drive_for(bad)


@pytest.mark.timeout(180)
def test_login_stores_password_and_rclone_asks_placet_for_it(
    settings: Settings,
    vault: Path,
    file_keyring: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    locked = drive_for(settings.model_copy(update={"drive": "vault:"}))
    with pytest.raises(DriveError) as ei:
        locked.list_folder("")  # the password command ran and found nothing
    assert ei.value.error_code == "drive_locked" and "placet drive login" in ei.value.message
    first_rcd = locked.rcd_pid
    assert first_rcd is not None
    monkeypatch.setattr(sys, "stdin", io.StringIO("wrong-password\n"))
    assert main(["drive", "login", "--password-stdin"]) == EXIT_USAGE
    assert "does not decrypt" in capsys.readouterr().err and _stored(file_keyring) == {}
    monkeypatch.setattr(sys, "stdin", io.StringIO(SECRET + "\n"))
    assert main(["drive", "login", "--password-stdin"]) == EXIT_OK
    assert _stored(file_keyring) == {f"{KEYRING_SERVICE}/{KEYRING_USERNAME}": SECRET}
    with locked:  # the rcd started before the login asks again, and now gets it
        assert [e.name for e in locked.list_folder("")[0]] == ["inside.txt"]
        assert locked.rcd_pid == first_rcd
    with drive_for(settings.model_copy(update={"drive": "vault:"})) as drive:
        assert [e.name for e in drive.list_folder("")[0]] == ["inside.txt"]
        assert drive.read_head("inside.txt", 100) == b"secret stuff"  # a CLI child too
        pid = drive.rcd_pid
        assert pid is not None
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    command = cmdline[cmdline.index(b"--password-command") + 1].decode()
    assert command == f"{PLACET} drive password-for-rclone"
    for where in (b"\0".join(cmdline), environ):  # what `ps eww` shows the same user
        assert SECRET.encode() not in where and b"RCLONE_CONFIG_PASS" not in where


def test_password_for_rclone_answers_no_caller_but_placets_own_rclone(
    file_keyring: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hidden command is no oracle: called by anything but an rclone placet started
    (here: the test itself, with and without a token file naming its own pid) it prints
    nothing and says why. Through placet's own rclone it works: see the test above."""
    monkeypatch.chdir(tmp_path)
    keyring.set_password(KEYRING_SERVICE, KEYRING_USERNAME, SECRET)

    def hidden(extra: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(PLACET), "drive", "password-for-rclone"],
            env={**os.environ, **extra},
            capture_output=True,
            timeout=60,
        )

    # a token file as placet writes it for its rclone children: the command's parent is
    # this process, not that rclone binary
    stale = tmp_path / "run" / "rclone-callers" / "999999999-left-by-a-killed-placet"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    token = write_token(tmp_path / "run", RCLONE)
    assert token.stat().st_mode & 0o777 == 0o600 and not stale.exists()
    for extra in ({}, {CALLER_ENV: str(token)}, {CALLER_ENV: "x"}):
        r = hidden(extra)
        assert r.returncode == EXIT_USAGE and r.stdout == b"", extra
        assert SECRET.encode() not in r.stderr
        assert "password_refused" in r.stderr.decode() and r.stderr.count(b"\n") == 1
    helps = [
        subprocess.run([str(PLACET), *a, "--help"], capture_output=True, text=True).stdout
        for a in ((), ("drive",))
    ]
    assert "login" in helps[1] and not any("password-for-rclone" in h for h in helps)


def test_login_without_a_keyring_says_what_to_install(
    settings: Settings,
    vault: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prev = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.fail.Keyring())
    try:
        monkeypatch.setattr(sys, "stdin", io.StringIO(SECRET + "\n"))
        assert main(["drive", "login", "--password-stdin"]) == EXIT_USAGE
    finally:
        keyring.set_keyring(prev)
    err = capsys.readouterr().err
    assert "no_keyring" in err and "secretstorage" in err and "RCLONE_CONFIG_PASS" in err
    assert SECRET not in err


def test_login_on_an_unencrypted_config_stores_nothing(
    settings: Settings,
    tmp_path: Path,
    mem_keyring: MemoryKeyring,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conf = tmp_path / "plain.conf"
    conf.write_text("[x]\ntype = local\n")
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    assert main(["drive", "login", "--password-stdin"]) == EXIT_OK
    assert "not encrypted" in capsys.readouterr().out and mem_keyring.store == {}


@pytest.mark.timeout(90)
def test_login_and_show_in_subprocesses_with_a_file_keyring(
    vault: Path, tmp_path: Path, placet_home: Path, rclone_home: Path
) -> None:
    ring = tmp_path / "keyring.json"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(rclone_home),
        "PLACET_HOME": str(placet_home),
        "RCLONE_CONFIG": str(vault),
        **file_keyring_env(ring),
    }

    def placet(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PLACET), *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    r = placet("drive", "set", "--no-check", "vault:")
    assert r.returncode == 0, r.stderr
    r = placet("drive", "show")
    assert r.returncode == EXIT_DRIVE_UNAVAILABLE and "run `placet drive login`" in r.stdout
    r = placet("drive", "login", "--password-stdin", stdin=SECRET + "\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(ring.read_text()) == {f"{KEYRING_SERVICE}/{KEYRING_USERNAME}": SECRET}
    r = placet("drive", "show", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["rclone_config_state"] == "encrypted; password in keyring"
    assert info["capabilities"]["backend"] == "alias"
    assert SECRET not in r.stdout + r.stderr
    assert os.environ.get("PYTHON_KEYRING_BACKEND") is None  # the test's own env untouched


def test_drive_set_on_a_fresh_home_checks_folder_and_notes_only_real_stale_proposals(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], rclone_home: Path
) -> None:
    missing = tmp_path / "no such folder"
    assert main(["drive", "set", str(missing)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "does not exist" in err and "--create" in err
    assert not settings.config_file.exists()
    assert oct(settings.data_dir.stat().st_mode & 0o777) == "0o700"
    assert main(["drive", "set", "--create", str(missing)]) == EXIT_OK
    assert missing.is_dir()
    err = capsys.readouterr().err
    assert "previous drive" not in err and "another drive" not in err
    # One pending proposal on the current drive: switching away warns about it.
    from placet.store import open_store

    with open_store(load_settings()) as store:
        propose_folder(store, "d", reason="r", drive_spec=str(missing), run_id="run-1", ttl=600)
    other = tmp_path / "other"
    other.mkdir()
    assert main(["drive", "set", str(other)]) == EXIT_OK
    assert "1 open proposal(s) were made against another drive" in capsys.readouterr().err


def test_unreachable_drive_exits_5_and_names_the_spec(
    settings: Settings, capsys: pytest.CaptureFixture[str], rclone_home: Path
) -> None:
    assert main(["drive", "set", "nosuchremote:"]) == EXIT_DRIVE_UNAVAILABLE
    err = capsys.readouterr().err
    assert "'nosuchremote:'" in err and "''" not in err
    # one sentence, one fix: not rclone's advice plus a suggestion to run `drive set` again
    assert "has no remote 'nosuchremote'; define the remote 'nosuchremote' with `rclone " in err
    assert err.rstrip().endswith("or pass --no-check to set it anyway"), err
    assert "placet drive set" not in err and err.count("rclone config`") == 1
    assert main(["drive", "set", "--no-check", "nosuchremote:"]) == EXIT_OK
    capsys.readouterr()
    assert main(["drive", "show"]) == EXIT_DRIVE_UNAVAILABLE
    assert "'nosuchremote:'" in capsys.readouterr().out
    assert main(["drive", "set", "relative/path"]) == EXIT_USAGE
