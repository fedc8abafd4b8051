"""The rclone config password in the owner's keyring, and the hidden command rclone runs.

`placet drive login` stores an encrypted rclone config's password in the keyring; it
reaches rclone only through ``--password-command`` naming the hidden
``placet drive password-for-rclone``, never argv or the environment (docs/design.md
section 9, "rclone hygiene"; docs/decisions/0008-rclone-children.md). The command answers
only an rclone placet itself started (`check_caller`, against a token file placet writes),
so it is no oracle for other processes. This module imports only the standard library
and `placet.errors` (keyring lazily): `placet.cli.main` answers the command from here
before loading any other command."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO, TextIO

from placet.errors import EXIT_OK, EXIT_USAGE, ConfigError

KEYRING_SERVICE = "placet"
KEYRING_USERNAME = "rclone-config"
RCLONE_PASSWORD_ARGS: tuple[str, ...] = ("drive", "password-for-rclone")
"""placet's arguments for the hidden command (after the program itself)."""
CALLER_ENV = "PLACET_RCLONE_CALLER"
"""The variable naming the token file of the placet process that started the rclone."""
CALLER_DIR = "rclone-callers"

NO_KEYRING_HELP = (
    "no keyring backend is available on this machine. Install one (for example "
    "`pip install secretstorage` with a running Secret Service such as gnome-keyring or "
    "KeePassXC, reachable over D-Bus), or skip the keyring and set RCLONE_CONFIG_PASS in "
    "the environment placet is started with"
)


def _keyring_error(action: str, e: Exception) -> ConfigError:
    import keyring.errors

    if isinstance(e, keyring.errors.NoKeyringError):
        return ConfigError(f"cannot {action}: {NO_KEYRING_HELP}", code="no_keyring")
    return ConfigError(
        f"cannot {action}: the keyring refused ({type(e).__name__}: {e}); unlock it and "
        "try again, or set RCLONE_CONFIG_PASS in placet's environment",
        code="keyring_error",
    )


def load_config_password() -> str | None:
    """The rclone config password stored by `placet drive login`, or None.

    Raises:
        ConfigError (code ``no_keyring`` / ``keyring_error``): no usable keyring.
    """
    import keyring
    import keyring.errors

    try:
        value = keyring.get_password(KEYRING_SERVICE, KEYRING_USERNAME)
    except keyring.errors.KeyringError as e:
        raise _keyring_error("read the rclone config password from the keyring", e) from e
    return value if isinstance(value, str) else None


def store_config_password(password: str) -> None:
    """Store the rclone config password in the keyring (service placet, user rclone-config).

    Raises:
        ConfigError (code ``no_keyring`` / ``keyring_error``): no usable keyring.
    """
    import keyring
    import keyring.errors

    try:
        keyring.set_password(KEYRING_SERVICE, KEYRING_USERNAME, password)
    except keyring.errors.KeyringError as e:
        raise _keyring_error("store the rclone config password in the keyring", e) from e


def write_token(run_dir: Path, rclone_path: Path) -> Path:
    """Write this process's token file under `run_dir` and return its path (for
    `CALLER_ENV`); remove it with `remove_token` when the rclone children are done."""
    folder = run_dir / CALLER_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    for old in folder.iterdir():  # left by a placet that was killed
        pid = old.name.partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            old.unlink(missing_ok=True)
    path = folder / f"{os.getpid()}-{secrets.token_hex(16)}"
    body = json.dumps({"pid": os.getpid(), "rclone": os.path.realpath(rclone_path)})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, body.encode())
    finally:
        os.close(fd)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_token(path: Path) -> None:
    """Remove a token file written by `write_token` (quietly if it is gone)."""
    path.unlink(missing_ok=True)


def _parent_of(pid: int) -> tuple[int, str]:
    """(parent pid, real path of the executable) of process `pid`: /proc, else `ps`."""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        stat = (proc / "stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1]), os.path.realpath(proc / "exe")
    out = subprocess.run(
        ["/bin/ps", "-o", "ppid=", "-o", "comm=", "-p", str(pid)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ppid, _, comm = out.partition(" ")
    return int(ppid), os.path.realpath(comm.strip())


def check_caller(environ: Mapping[str, str] | None = None) -> None:
    """Refuse unless this process was started by an rclone that placet started.

    Raises:
        ConfigError (code ``password_refused``): no token, an unreadable or foreign token
            file, a parent that is not the token's rclone binary, or a grandparent that is
            not the token's placet process.
    """
    environ = os.environ if environ is None else environ
    refused = ConfigError(
        "refusing to print the rclone config password: placet answers only an rclone "
        "child it started itself (run rclone through placet, or set RCLONE_CONFIG_PASS)",
        code="password_refused",
    )
    named = environ.get(CALLER_ENV, "")
    if not named or not os.path.isabs(named):
        raise refused
    try:
        fd = os.open(named, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
        token = json.loads(raw)
        parent = os.getppid()
        grandparent, parent_exe = _parent_of(parent)
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        raise refused from e
    if (
        st.st_uid != os.getuid()
        or st.st_mode & 0o077
        or not isinstance(token, dict)
        or parent_exe != token.get("rclone")
        or grandparent != token.get("pid")
    ):
        raise refused


def print_for_rclone(out: BinaryIO | None = None, err: TextIO | None = None) -> int:
    """`placet drive password-for-rclone`: write the stored password to `out`, nothing else.

    The password is written as UTF-8 without a newline (rclone trims CR/LF anyway). With
    no password stored, no usable keyring, or a caller that is not an rclone placet
    started (`check_caller`), one line goes to `err` (rclone logs it as
    ``--password-command stderr: ...``) and the exit status is non-zero.

    Returns:
        The exit status: 0, or `EXIT_USAGE` (2).
    """
    out = sys.stdout.buffer if out is None else out
    err = sys.stderr if err is None else err
    try:
        check_caller()
        password = load_config_password()
    except ConfigError as e:
        print(f"placet: {e.error_code}: {e.message}", file=err)
        return e.exit_code
    if not password:
        print(
            "placet: drive_locked: no rclone config password in the keyring (service "
            f"{KEYRING_SERVICE!r}, user {KEYRING_USERNAME!r}); run `placet drive login`",
            file=err,
        )
        return EXIT_USAGE
    out.write(password.encode())
    out.flush()
    return EXIT_OK
