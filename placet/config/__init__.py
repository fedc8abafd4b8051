"""Settings and locations: one home for every path placet uses and every owner setting.

Locations come from platformdirs; `PLACET_HOME` moves the whole data directory (database,
audit anchor, default drive, trash, logs, `config.toml`), `PLACET_DB` moves only the
database, and `PLACET_DRIVE` overrides the drive spec. The owner's `config.toml` holds
the settings of docs/design.md section 9 (TTL, caps, per-root download policy, `allow_yes`).

Nothing happens at import time: directories are created by `ensure_data_dir`, which the
entry points call. Files are private to the owner: the process umask is 0o077, the data
directory is 0700, and a database directory that another user owns or can write is
refused (a co-tenant who can write there could swap the database under us).
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from placet.config.notify import NotifySettings
from placet.errors import ConfigError
from placet.text import inert

APP_NAME = "placet"

DownloadPolicy = Literal["new-only", "allow-overwrite"]


class RootPolicy(BaseModel):
    """Per-root owner policy, keyed by the root's absolute path in `config.toml`."""

    model_config = ConfigDict(extra="forbid")
    downloads: DownloadPolicy = "new-only"


class Settings(BaseModel):
    """Every owner setting, with defaults from docs/design.md section 9.

    Times are in seconds unless the name says minutes or hours.
    """

    model_config = ConfigDict(extra="forbid")

    data_dir: Path
    db_path: Path
    config_file: Path
    database: str | None = None
    """A PostgreSQL URL (`postgresql://user@host:port/dbname`) for one store shared by the
    owner's machines; None: the SQLite file `db_path`. Set in config.toml or by a
    `PLACET_DB` that starts with `postgresql://`. Never holds a password
    (`check_database_url`): libpq reads it from `PGPASSWORD` or `~/.pgpass`."""
    drive: str | None = None
    """rclone path of the drive root; None means the embedded default `<data_dir>/drive`."""
    rclone_path: Path | None = None
    """Absolute path to the rclone binary; None means the one beside the interpreter."""
    default_ttl_minutes: int = Field(30, ge=5, le=30)
    max_ttl_minutes: int = Field(30, ge=5, le=30)
    min_ttl_minutes: int = Field(5, ge=1)
    """At least 1 and at most `max_ttl_minutes` (declared after it, so it is checked
    against the value in effect)."""
    max_extend_hours: int = Field(24, ge=1, le=24)
    pending_per_session: int = Field(100, ge=1)
    """Most live pending proposals of one `placet serve` session (run id). Read from the
    key's earlier name `pending_per_bridge` too (`LEGACY_KEYS`)."""
    pending_total: int = Field(1000, ge=1)
    lease_seconds: float = Field(30.0, gt=0)
    heartbeat_seconds: float = Field(10.0, gt=0)
    sweep_seconds: float = Field(10.0, gt=0)
    plan_entry_cap: int = Field(100_000, ge=1, le=1_000_000)
    """Most files (and, separately, most folders) one side of a sync plan may hold; up to
    1,000,000 (a plan of that size stays under 1 GiB peak RSS: docs/performance.md)."""
    long_read_seconds: float = Field(45.0, ge=0, le=55)
    """How long `local_index`/`sync_plan` wait before answering `in_progress` while the
    work goes on in the background (docs/design.md section 9, "Long reads"); 0: never wait."""
    read_cap_bytes: int = Field(16 * 1024, ge=1)
    upload_cap_bytes: int = Field(64 * 1024**3, ge=1)
    preview_op_bytes: int = Field(64 * 1024, ge=0, le=1024**2)
    """Most bytes of one file an op's content preview holds (`placet.preview`); a larger
    file's preview is its first bytes, marked partial. 0: no previews (none captured when
    proposing, none read when reviewing)."""
    preview_proposal_bytes: int = Field(1024**2, ge=0, le=64 * 1024**2)
    """Most preview bytes stored with one proposal (the new bytes and the replaced ones
    together); a sync's previews are read op by op when opened, never stored in bulk."""
    transfers: int = Field(4, ge=1, le=32)
    """How many file transfers of one sync run at once (rclone's `--transfers` default is
    4); folders are created first, one at a time (`placet.executor.pool`)."""
    reply_budget_bytes: int = Field(40_000, ge=32_000, le=1_000_000)
    """Most bytes of one MCP tool reply, measured separately for its text content and for
    its structured content (UTF-8 JSON): about 10,000 tokens, under the hosts' limits
    (Claude Code refuses 25,000 tokens). Pages of plans, indexes, changes and a sync
    proposal's ops are sized to fit it. At least 32,000: one proposal whose paths are at
    the path limits must fit in one reply."""
    stored_per_session: int = Field(50, ge=2, le=10_000)
    """Most sync plans, and separately most drive snapshots, one `placet serve` process
    keeps stored; beyond, its oldest are pruned in the same transaction as the insert
    (docs/decisions/0024-sync-plans.md)."""
    stored_bytes_per_session: int = Field(64 * 1024**2, ge=1024**2)
    """Most stored bytes (compressed bodies) of one session's plans, and of its snapshots."""
    stored_total: int = Field(500, ge=2, le=100_000)
    """Most sync plans, and separately most drive snapshots, stored in all."""
    stored_bytes_total: int = Field(256 * 1024**2, ge=1024**2)
    """Most stored bytes of all plans, and of all snapshots."""
    allow_yes: bool = False
    approvals: Literal["terminal", "signed"] = "terminal"
    """``"signed"``: only an approval carrying the owner's passkey signature for exactly
    that request (made in `placet web`) is accepted and executed; the terminal's code
    and the review UI are refused (docs/security.md, "Signed mode")."""
    roots: dict[str, RootPolicy] = Field(default_factory=dict)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    """`[notify]`: channels that tell the owner proposals wait (`placet.config.notify`)."""

    @field_validator("min_ttl_minutes")
    @classmethod
    def _min_ttl_within_max(cls, value: int, info: ValidationInfo) -> int:
        top = info.data.get("max_ttl_minutes")
        if isinstance(top, int) and value > top:
            raise ValueError(f"must be at most max_ttl_minutes ({top})")
        return value

    @property
    def default_drive_dir(self) -> Path:
        return self.data_dir / "drive"

    @property
    def trash_dir(self) -> Path:
        return self.data_dir / "trash"

    @property
    def audit_anchor_path(self) -> Path:
        return self.data_dir / "audit.anchor"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def run_dir(self) -> Path:
        """Private runtime files (rclone rcd socket); 0700."""
        return self.data_dir / "run"

    def download_policy(self, root_path: Path) -> DownloadPolicy:
        policy = self.roots.get(str(root_path))
        return policy.downloads if policy else "new-only"


# Keys the owner may set in config.toml (the rest are locations, not settings).
_FILE_KEYS = set(Settings.model_fields) - {"data_dir", "db_path", "config_file"}

LEGACY_KEYS = {"pending_per_bridge": "pending_per_session"}
"""Earlier names of config.toml keys, still read: {earlier name: name}."""


def data_dir_from_env() -> Path:
    home = os.environ.get("PLACET_HOME")
    if home:
        return Path(home).expanduser().absolute()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def _renamed_keys(values: dict[str, object], config_file: Path) -> dict[str, object]:
    """`values` with each key of `LEGACY_KEYS` under its current name.

    Raises:
        ConfigError: a key is set under both names.
    """
    out = dict(values)
    for old, new in LEGACY_KEYS.items():
        if old not in out:
            continue
        if new in out:
            raise ConfigError(
                f"{config_file}: {old} and {new} are the same setting ({new} is its "
                f"current name); keep only {new}",
                details={"path": str(config_file), "keys": [old, new]},
            )
        out[new] = out.pop(old)
    return out


DATABASE_SCHEMES = ("postgresql", "postgresql+psycopg")
"""URL schemes `database` accepts (psycopg 3 is the driver either way)."""


def is_database_url(value: str) -> bool:
    """True when `value` (a `PLACET_DB` or `database`) names a server, not a file."""
    return value.split("://", 1)[0].lower() in DATABASE_SCHEMES and "://" in value


def check_database_url(url: str, source: str) -> str:
    """`url` when it is a PostgreSQL URL without a password, else ConfigError.

    The password never sits in config.toml, the environment's `PLACET_DB` or argv, where
    other tools and logs see it: libpq reads it from `PGPASSWORD`, `PGPASSFILE` or
    `~/.pgpass` (docs/decisions/0020-postgresql-connections.md). The
    error never repeats the URL, which may hold the password.
    """
    parts = urlsplit(url)
    if not is_database_url(url) or (not parts.hostname and "host=" not in parts.query):
        raise ConfigError(
            f"{source}: database must be a PostgreSQL URL such as "
            "postgresql://user@host:5432/placet (or a SQLite path in PLACET_DB)",
            details={"source": source},
        )
    if parts.password is not None or "password=" in parts.query.lower():
        raise ConfigError(
            f"{source}: the database URL holds a password; remove it and give it to libpq "
            "instead, in PGPASSWORD or ~/.pgpass (chmod 0600), so it never sits in a file "
            "or on a command line",
            code="database_password_in_url",
            details={"source": source},
        )
    return url


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Read locations from the environment and settings from `config.toml`.

    Returns:
        Settings; `config.toml` is `$PLACET_HOME/config.toml` when `PLACET_HOME` is set,
        else the platformdirs user config dir.

    Raises:
        ConfigError: `config.toml` is not valid TOML or holds an unknown or invalid key.
    """
    env = dict(os.environ) if env is None else env
    if env.get("PLACET_HOME"):
        data_dir = Path(env["PLACET_HOME"]).expanduser().absolute()
        config_file = data_dir / "config.toml"
    else:
        data_dir = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
        config_file = Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"
    env_db = env.get("PLACET_DB") or ""
    db_path = (
        Path(env_db).expanduser().absolute()
        if env_db and not is_database_url(env_db)
        else data_dir / "placet.db"
    )
    values: dict[str, object] = {}
    if config_file.exists():
        try:
            values = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(
                f"cannot read {config_file}: {e}; fix or remove the file",
                details={"path": str(config_file)},
            ) from e
        values = _renamed_keys(values, config_file)
        unknown = set(values) - _FILE_KEYS
        if unknown:
            raise ConfigError(
                f"{config_file}: unknown setting(s) {sorted(unknown)}; "
                f"known settings are {sorted(_FILE_KEYS)}",
                details={"path": str(config_file), "unknown": sorted(unknown)},
            )
    if env.get("PLACET_DRIVE"):
        values["drive"] = env["PLACET_DRIVE"]
    if isinstance(values.get("database"), str):
        check_database_url(str(values["database"]), str(config_file))
    if env_db and is_database_url(env_db):
        values["database"] = check_database_url(env_db, "PLACET_DB")
    try:
        return Settings.model_validate(
            {**values, "data_dir": data_dir, "db_path": db_path, "config_file": config_file}
        )
    except ValidationError as e:
        first = e.errors()[0]
        key = toml_key(first["loc"])
        raise ConfigError(
            f"invalid setting {inert(key)} in {config_file}: {first['msg']}; correct or remove it",
            details={"path": str(config_file), "key": key},
        ) from e


def approvals_mode(settings: Settings) -> Literal["terminal", "signed"]:
    """The approval mode in force: ``"signed"`` when `settings` say so, or when the
    owner's `config.toml` says so now. A `placet review` or `placet web` started before
    the owner turned signed mode on holds settings read at its start; the store's
    accept and the executor ask this, so such a process neither approves nor runs an
    unsigned approval after the switch (docs/security.md, "Signed mode"). Turning the
    mode off takes effect at the next start.

    Raises:
        ConfigError: settings say ``"terminal"`` and `config.toml` cannot be read or is
            not TOML (whether it turned signed mode on cannot be told).
    """
    if settings.approvals == "signed":
        return "signed"
    path = settings.config_file
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return settings.approvals
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(
            f"cannot read {path} to tell whether approvals must be signed: {e}; fix the file",
            details={"path": str(path)},
        ) from e
    return "signed" if values.get("approvals") == "signed" else settings.approvals


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the dotted TOML key the owner wrote:
    ``('roots', '/tmp/p', 'downloads')`` -> ``roots."/tmp/p".downloads``; list indexes
    as ``[i]``; a key that is not a bare TOML key is quoted (TOML basic string)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = part if _BARE_KEY.match(part) else json.dumps(part, ensure_ascii=False)
        out += f".{name}" if out else name
    return out


def check_private_dir(path: Path) -> None:
    """Refuse a directory another user owns or can write (group or others).

    Raises:
        ConfigError: the directory is owned by another uid, or is group/other writable.
    """
    st = path.stat()
    private = (
        "point PLACET_HOME or PLACET_DB at a private directory you own (e.g. under ~/.local/share)"
    )
    if st.st_uid != os.getuid():
        raise ConfigError(
            f"refusing to use {path}: it is owned by uid {st.st_uid}, not by you "
            f"(uid {os.getuid()}); {private}",
            details={"path": str(path), "owner_uid": st.st_uid},
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = f"{stat.S_IMODE(st.st_mode):o}"
        # A shared sticky directory (/tmp, mode 1777) must stay shared: never suggest
        # chmod there, only moving placet's data elsewhere.
        fix = private if st.st_mode & stat.S_ISVTX else f"run `chmod go-w {path}` or {private}"
        raise ConfigError(
            f"refusing to use {path}: it is writable by group or others (mode {mode}); {fix}",
            details={"path": str(path), "mode": mode},
        )


def ensure_data_dir(settings: Settings) -> None:
    """Set umask 0o077, create the data directory (0700) and check the database's folder.

    Raises:
        ConfigError: a path component exists and is not a directory, permission is
            denied, or see `check_private_dir`.
    """
    os.umask(0o077)
    for d in (settings.data_dir, settings.db_path.parent):
        try:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        except (FileExistsError, NotADirectoryError, PermissionError) as e:
            if isinstance(e, PermissionError):
                why, instead = "permission denied", "a directory you own"
            else:
                why, instead = f"{e.filename or d} exists and is not a directory", "a directory"
            raise ConfigError(
                f"cannot create placet's data directory {d}: {why}; point PLACET_HOME or "
                f"PLACET_DB at {instead}",
                details={"path": str(d)},
            ) from e
    if stat.S_IMODE(settings.data_dir.stat().st_mode) != 0o700:
        settings.data_dir.chmod(0o700)
    check_private_dir(settings.data_dir)
    check_private_dir(settings.db_path.parent)
