"""Which rclone config placet uses, and how an encrypted one gets its password.

Credentials stay in the owner's rclone config (DESIGN.md section 3). placet reads which
config that is the way rclone does: `RCLONE_CONFIG` if it was set in placet's own
environment when placet started (the owner's choice, passed on explicitly; every other
inherited `RCLONE_*` variable is dropped), else `rclone.conf` beside the binary, else
`$XDG_CONFIG_HOME/rclone/rclone.conf` (or `~/.config/...`), else `~/.rclone.conf`.

If that config is encrypted, its password comes from `RCLONE_CONFIG_PASS` in placet's
own environment (an owner who manages secrets themselves), else from the keyring
(service ``placet``, user ``rclone-config``), where `placet drive login` stored it. It
reaches rclone only through the child's environment: never argv (readable by every
local user in /proc), logs, the database or an agent. The keyring is asked only when the
config is encrypted, so a plain config never triggers a keyring unlock prompt.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from placet.errors import ConfigError

KEYRING_SERVICE = "placet"
KEYRING_USERNAME = "rclone-config"

NO_KEYRING_HELP = (
    "no keyring backend is available on this machine. Install one (for example "
    "`pip install secretstorage` with a running Secret Service such as gnome-keyring or "
    "KeePassXC, reachable over D-Bus), or skip the keyring and set RCLONE_CONFIG_PASS in "
    "the environment placet is started with"
)


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


def rclone_env(rclone_path: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables placet hands rclone explicitly: `RCLONE_CONFIG`, `RCLONE_CONFIG_PASS`.

    The password is looked up in the keyring only when the config is encrypted and
    `RCLONE_CONFIG_PASS` is not already in `environ`; a missing keyring leaves it unset,
    and rclone's refusal then tells the owner to run `placet drive login`.
    """
    environ = os.environ if environ is None else environ
    out: dict[str, str] = {}
    if environ.get("RCLONE_CONFIG"):
        out["RCLONE_CONFIG"] = environ["RCLONE_CONFIG"]
    if environ.get("RCLONE_CONFIG_PASS"):
        out["RCLONE_CONFIG_PASS"] = environ["RCLONE_CONFIG_PASS"]
    elif config_is_encrypted(rclone_config_path(environ, rclone_path)):
        try:
            password = load_config_password()
        except ConfigError:
            password = None
        if password:
            out["RCLONE_CONFIG_PASS"] = password
    return out
