"""The rclone config password in the owner's keyring, and the hidden command rclone runs.

`placet drive login` stores the password of an encrypted rclone config in the keyring
(service ``placet``, user ``rclone-config``). It never reaches an rclone child through
argv or the child's environment, since `ps eww` shows a process's environment to its
user: every child gets ``--password-command`` naming the hidden command
``placet drive password-for-rclone`` (`RCLONE_PASSWORD_ARGS`), which rclone runs only when
the config is encrypted, reading the password from its stdout through a pipe
(docs/design.md section 9, "rclone hygiene"; docs/decisions.md).

This module imports only the standard library and `placet.errors` (keyring lazily): the
hidden command runs once per rclone child, so `placet.cli.main` answers it from here
before loading any other command.
"""

from __future__ import annotations

import sys
from typing import BinaryIO, TextIO

from placet.errors import EXIT_OK, EXIT_USAGE, ConfigError

KEYRING_SERVICE = "placet"
KEYRING_USERNAME = "rclone-config"
RCLONE_PASSWORD_ARGS: tuple[str, ...] = ("drive", "password-for-rclone")
"""placet's arguments for the hidden command (after the program itself)."""

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


def print_for_rclone(out: BinaryIO | None = None, err: TextIO | None = None) -> int:
    """`placet drive password-for-rclone`: write the stored password to `out`, nothing else.

    The password is written as UTF-8 without a newline (rclone trims CR/LF anyway). With
    no password stored, or no usable keyring, one line goes to `err` (rclone logs it as
    ``--password-command stderr: ...``) and the exit status is non-zero.

    Returns:
        The exit status: 0, or `EXIT_USAGE` (2).
    """
    out = sys.stdout.buffer if out is None else out
    err = sys.stderr if err is None else err
    try:
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
