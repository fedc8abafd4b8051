"""Drive specs, remote-path refusals, redaction, digest choice, child environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from placet.drive import Capabilities, parse_spec, preferred_digest, redact, validate_spec
from placet.drive.failures import last_message, rclone_failure
from placet.drive.proc import SAFE_PATH, child_env, resolve_rclone_path
from placet.drive.spec import check_drive_path
from placet.errors import (
    AlreadyExists,
    ConfigError,
    DriveError,
    DriveUnavailable,
    NotFound,
    PathRefused,
)


@pytest.mark.parametrize(
    ("spec", "kind", "name", "options", "root"),
    [
        ("/srv/drive", "local", None, (), "/srv/drive"),
        ("protondrive:Agents", "remote", "protondrive", (), "Agents"),
        ("gdrive:", "remote", "gdrive", (), ""),
        ("my remote:a/b", "remote", "my remote", (), "a/b"),
        ("s3,region=eu:bucket/x", "remote", "s3", (("region", "eu"),), "bucket/x"),
        (
            ":webdav,url='http://h:8080/dav',vendor=other:x",
            "onthefly",
            "webdav",
            (("url", "http://h:8080/dav"), ("vendor", "other")),
            "x",
        ),
        (":local:/tmp/x", "onthefly", "local", (), "/tmp/x"),
        ("r,shared_with_me:", "remote", "r", (("shared_with_me", "true"),), ""),
        ("r,opt='it''s,ok':p", "remote", "r", (("opt", "it's,ok"),), "p"),
    ],
)
def test_parse_spec(spec: str, kind: str, name: str | None, options: tuple, root: str) -> None:
    p = parse_spec(spec)
    assert (p.kind, p.name, p.options, p.root) == (kind, name, options, root)


@pytest.mark.parametrize(
    "spec",
    ["", "  ", "relative/folder", "-remote:x", "r\x00:x", "remote", ":webdav,url='x:", ":"],
)
def test_parse_spec_refuses(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_spec(spec)


@pytest.mark.parametrize(
    "spec",
    [
        ":webdav,url='http://h',user=u,pass=abcdEFGH1234:",
        ":sftp,host=h,password=x:",
        'gdrive,token=\'{"access_token":"x"}\':',
        ":s3,secret_access_key=XYZ,access_key_id=AKIA:bucket",
        ":sftp,host=h,key_pem='-----BEGIN':",
        ":sftp,host=h,key_file_pass=abc:",
        ":drive,client_secret=zz:",
        ":webdav,url='https://u:pw@h/dav':",
    ],
)
def test_validate_refuses_inline_secrets(spec: str) -> None:
    with pytest.raises(ConfigError) as ei:
        validate_spec(spec)
    assert "rclone config" in ei.value.message
    assert "abcdEFGH1234" not in ei.value.message and "pw@" not in ei.value.message


@pytest.mark.parametrize(
    "spec", [":sftp,host=h,user=u,key_file=/home/me/.ssh/id:x", "box:", "/srv/d", "s3,region=eu:b"]
)
def test_validate_accepts_specs_without_secrets(spec: str) -> None:
    assert validate_spec(spec).raw == spec


def test_join_and_with_options() -> None:
    assert parse_spec("r:").join("a/b") == "r:a/b"
    assert parse_spec("r:Agents").join("a") == "r:Agents/a"
    assert parse_spec("r:Agents/").join("a") == "r:Agents/a"
    assert parse_spec("/srv/d").join("") == "/srv/d"
    assert parse_spec("/srv/d").join("x y") == "/srv/d/x y"
    assert parse_spec("pd:Agents").with_options([("enable_caching", "false")]) == (
        "pd,enable_caching=false:Agents"
    )
    assert parse_spec("pd,a=b:").with_options([("c", "d")]) == "pd,a=b,c=d:"


@pytest.mark.parametrize(
    "path", ["-rf", "a/-x", ":local:/etc", "a:b", "/abs", "a//b", "a/../b", ".", "a\nb", "x\x1b["]
)
def test_check_drive_path_refuses(path: str) -> None:
    with pytest.raises(PathRefused) as ei:
        check_drive_path(path)
    assert ei.value.error_code == "path_invalid"


def test_check_drive_path_accepts() -> None:
    assert check_drive_path("") == ""
    assert check_drive_path("docs/") == "docs"
    assert check_drive_path("a b/ü.txt") == "a b/ü.txt"


def test_redact_connection_strings_and_secrets() -> None:
    obscured = "Xk3J9d0L_pQ-rT5vWz"
    text = (
        "Failed to create file system for \":webdav,url='http://127.0.0.1:1',user=bob,"
        f'pass={obscured}:x": dial tcp: connection refused; token=abc123 '
        "see https://bob:hunter2@example.org/dav and hunter2-config-pass"
    )
    out = redact(text, ["hunter2-config-pass"])
    for secret in (obscured, "bob", "abc123", "hunter2", "127.0.0.1:1"):
        assert secret not in out, (secret, out)
    assert ":webdav,<redacted>:x" in out
    assert "connection refused" in out


def test_redact_leaves_plain_text() -> None:
    text = "upload to 'docs/a.txt' failed: object not found"
    assert redact(text, ["ab"]) == text  # secrets shorter than 4 chars are ignored


def test_preferred_digest_order() -> None:
    def caps(*types: str) -> Capabilities:
        return Capabilities(types, False, 1, True, True)

    assert preferred_digest(caps("sha256", "sha1", "md5")) == "sha256"
    assert preferred_digest(caps("sha1", "md5")) == "sha1"
    assert preferred_digest(caps("md5")) == "md5"
    assert preferred_digest(caps()) is None


@pytest.mark.parametrize(
    ("exit_code", "status", "message", "cls"),
    [
        (3, None, "directory not found", NotFound),
        (4, None, "file not found", NotFound),
        (None, 404, "object not found", NotFound),
        (5, None, "temporary failure", DriveUnavailable),
        (1, None, "dial tcp 127.0.0.1:9: connect: connection refused", DriveUnavailable),
        (None, 500, "Propfind: i/o timeout", DriveUnavailable),
        (7, None, "account suspended", DriveError),
        (None, 500, "mkdir /x/file: not a directory", AlreadyExists),
        # a number in a path is no HTTP status (a tmp folder pytest-429 made this retryable)
        (None, 500, "readdirent /tmp/pytest-429/drive/blocker: not a directory", AlreadyExists),
        (None, 500, "open /srv/503/x: object not found", NotFound),
        (None, 500, "HTTP error 429 (429 Too Many Requests)", DriveUnavailable),
        (None, 500, "HTTP error 503: 503 Service Unavailable", DriveUnavailable),
        (None, 500, "Update ReadFrom failed: connection lost", DriveUnavailable),  # sftp gone
        (2, None, "something odd", DriveError),
    ],
)
def test_failure_mapping(
    exit_code: int | None, status: int | None, message: str, cls: type
) -> None:
    e = rclone_failure("list", "docs", message, exit_code=exit_code, http_status=status)
    assert type(e) is cls
    assert e.retryable is (cls is DriveUnavailable)
    assert e.details["rclone_message"]


def test_failure_mapping_locked_config_and_redaction() -> None:
    e = rclone_failure(
        "list", "", "unable to decrypt configuration, pw=Zq9sEcret9", secrets=["Zq9sEcret9"]
    )
    assert e.error_code == "drive_locked" and "placet drive login" in e.message
    assert "Zq9sEcret9" not in e.message and "Zq9sEcret9" not in str(e.details)
    rcd_panic = (  # rcd's answer when placet's --password-command failed (rclone 1.75.2)
        'panic received: fatal error: Failed to load config file "/h/rclone.conf": '
        "password command failed: exit status 2"
    )
    e = rclone_failure("list", "", rcd_panic, http_status=500)
    assert e.error_code == "drive_locked" and "placet drive login" in e.message


def test_last_message_picks_the_error_line() -> None:
    stderr = (
        "2026/11/30 05:31:37 NOTICE: some note\n"
        "2026/11/30 05:31:37 CRITICAL: Failed to create file system: connection refused\n"
    )
    assert last_message(stderr) == "Failed to create file system: connection refused"


def test_child_env_is_allowlisted() -> None:
    base = {
        "HOME": "/home/u",
        "PATH": "/evil/bin:/usr/bin",
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": "/home/u/.config",
        "RCLONE_CONFIG_EVIL_TYPE": "local",
        "RCLONE_CONFIG": "/tmp/agent.conf",
        "RCLONE_PASSWORD_COMMAND": "sh -c evil",
        "AWS_SECRET_ACCESS_KEY": "x",
        "LD_PRELOAD": "/tmp/x.so",
        "PYTHONSTARTUP": "/tmp/x.py",
        # what placet's password command needs to reach the same keyring backend
        "PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring",
        "KEYRING_PROPERTY_APPID": "placet",
        "PYTHONPATH": "/home/u/lib",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
    }
    env = child_env({"RCLONE_CONFIG": "/home/u/rclone.conf"}, base=base)
    assert env == {
        "HOME": "/home/u",
        "PATH": SAFE_PATH,
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": "/home/u/.config",
        "RCLONE_CONFIG": "/home/u/rclone.conf",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring",
        "KEYRING_PROPERTY_APPID": "placet",
        "PYTHONPATH": "/home/u/lib",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
    }


def test_rclone_path_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="relative"):
        resolve_rclone_path(Path("rclone"))
    with pytest.raises(ConfigError, match="not found"):
        resolve_rclone_path(tmp_path / "rclone")
    assert resolve_rclone_path(None).is_absolute()


def test_spec_secret_values_are_only_the_secret_options() -> None:
    spec = parse_spec(
        ":webdav,url='https://bob:pw12@h/dav',vendor=rclone,user=bob,pass=Obsc-ured_123:x"
    )
    assert spec.secret_values() == ["https://bob:pw12@h/dav", "Obsc-ured_123"]
