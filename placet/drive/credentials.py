"""Which rclone config placet uses, and how an encrypted one gets its password.

Credentials stay in the owner's rclone config (docs/design.md section 3). placet finds it
as rclone does: `RCLONE_CONFIG` if set in placet's own environment at start, else beside
the binary, `$XDG_CONFIG_HOME/rclone/rclone.conf`, `~/.rclone.conf`. An encrypted
config's password reaches each child through ``--password-command``, never argv or the
environment, unless the owner set `RCLONE_CONFIG_PASS` for placet, which is passed on as
their choice (docs/design.md section 9, "rclone hygiene";
docs/decisions/0008-rclone-children.md)."""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from placet.config.password import (
    RCLONE_PASSWORD_ARGS,
)

__all__ = [
    "RcloneAccess",
    "config_is_encrypted",
    "password_command",
    "placet_command",
    "rclone_access",
    "rclone_command_string",
    "rclone_config_path",
]


def rclone_config_path(environ: Mapping[str, str], rclone_path: Path) -> Path:
    """The config file rclone will use (it may not exist), found as rclone finds it."""
    if environ.get("RCLONE_CONFIG"):
        return Path(environ["RCLONE_CONFIG"])
    home = Path(environ.get("HOME") or Path.home())
    xdg = environ.get("XDG_CONFIG_HOME")
    user_conf = (Path(xdg) if xdg else home / ".config") / "rclone" / "rclone.conf"
    for candidate in (rclone_path.parent / "rclone.conf", user_conf, home / ".rclone.conf"):
        if candidate.is_file():
            return candidate
    return user_conf


def config_is_encrypted(path: Path) -> bool:
    """True if `path` is an rclone config encrypted with `rclone config encryption set`."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return any(line.startswith(b"RCLONE_ENCRYPT_V") for line in head.splitlines())


def placet_command(executable: str | None = None) -> list[str]:
    """argv that runs this placet: the `placet` entry point beside the interpreter
    (`executable`, default `sys.executable`), else ``python -P -m placet`` (``-P``:
    rclone's working directory, which may be the agent's, is not put on sys.path)."""
    exe = Path(executable or sys.executable)
    script = exe.parent / "placet"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(exe), "-P", "-m", "placet"]


def rclone_command_string(argv: Sequence[str]) -> str:
    """`argv` as one string for an rclone SpaceSepList option such as --password-command.

    rclone splits such a value as CSV with a space as separator: an argument holding a
    space, a double quote or a line break is put in double quotes, inner quotes doubled.
    """
    if not argv or any(not a for a in argv):
        raise ValueError("an rclone command needs non-empty arguments")
    buf = io.StringIO()  # lineterminator stays "\r\n" so a field holding one is quoted
    csv.writer(buf, delimiter=" ", quotechar='"', lineterminator="\r\n").writerow(argv)
    return buf.getvalue().removesuffix("\r\n")


def password_command() -> str:
    """The --password-command value: placet's hidden ``drive password-for-rclone``."""
    return rclone_command_string([*placet_command(), *RCLONE_PASSWORD_ARGS])


class RcloneAccess(NamedTuple):
    """How rclone children reach the owner's config: `env` and global `flags`."""

    env: dict[str, str]
    """`RCLONE_CONFIG` and `RCLONE_CONFIG_PASS`, each only if the owner set it for placet."""
    flags: tuple[str, ...]
    """``--password-command <placet ...>`` unless the owner set `RCLONE_CONFIG_PASS`."""


def rclone_access(environ: Mapping[str, str] | None = None) -> RcloneAccess:
    """What placet hands every rclone child so it can open the owner's config.

    `environ` (default `os.environ`) is placet's own environment. Nothing is read from
    the keyring here: rclone runs the password command itself, and only for an encrypted
    config. A missing password makes that command fail, and rclone's refusal then maps
    to ``drive_locked``, which tells the owner to run `placet drive login`.
    """
    environ = os.environ if environ is None else environ
    env: dict[str, str] = {}
    if environ.get("RCLONE_CONFIG"):
        env["RCLONE_CONFIG"] = environ["RCLONE_CONFIG"]
    if environ.get("RCLONE_CONFIG_PASS"):
        env["RCLONE_CONFIG_PASS"] = environ["RCLONE_CONFIG_PASS"]
        return RcloneAccess(env, ())
    return RcloneAccess(env, ("--password-command", password_command()))
