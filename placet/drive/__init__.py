"""The remote drive: an interface with capability flags, and rclone behind it.

`drive_for(settings)` is the one way the rest of placet gets a drive: it takes the
configured spec (or the embedded default, a local folder in the data directory), refuses
inline secrets, fixes the absolute rclone binary, and passes rclone only the config
location the owner chose and the way to its password (`placet.drive.credentials`).
Nothing here starts a process at import time; rclone rcd starts on the first metadata
call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from placet.config import Settings
from placet.drive.base import (
    Capabilities,
    DigestRow,
    DigestStore,
    DownloadResult,
    Drive,
    Entry,
    JournalFn,
    ListRow,
    MemoryDigestStore,
    ProgressFn,
    UploadResult,
    preferred_digest,
)
from placet.drive.credentials import rclone_access
from placet.drive.proc import resolve_rclone_path
from placet.drive.rclone import RcloneDrive
from placet.drive.spec import DriveSpec, check_drive_path, parse_spec, redact, validate_spec
from placet.errors import ConfigError

__all__ = [
    "Capabilities",
    "DigestRow",
    "DigestStore",
    "DownloadResult",
    "Drive",
    "DriveSpec",
    "Entry",
    "JournalFn",
    "ListRow",
    "MemoryDigestStore",
    "ProgressFn",
    "RcloneDrive",
    "UploadResult",
    "check_drive_path",
    "configured_spec",
    "default_drive_spec",
    "drive_for",
    "parse_spec",
    "preferred_digest",
    "redact",
    "validate_spec",
]


def default_drive_spec(settings: Settings) -> str:
    """The embedded default drive: the local folder `<data_dir>/drive` (works offline)."""
    return str(settings.default_drive_dir)


def configured_spec(settings: Settings) -> str:
    """The drive spec in force: `PLACET_DRIVE`/`drive` from settings, else the default."""
    return settings.drive or default_drive_spec(settings)


def drive_for(settings: Settings, *, environ: Mapping[str, str] | None = None) -> RcloneDrive:
    """The drive placet uses for `settings`.

    The default local folder is created (0700) on first use. `environ` (default
    `os.environ`) supplies only `RCLONE_CONFIG` and `RCLONE_CONFIG_PASS`; without the
    latter, rclone asks placet's hidden password command (`rclone_access`).

    Raises:
        ConfigError: an invalid spec or one holding an inline secret; a relative or
            missing rclone binary; a data directory it cannot write in (the default
            drive's folder, the runtime folder).
    """
    spec = configured_spec(settings)
    validate_spec(spec)
    rclone = resolve_rclone_path(settings.rclone_path)
    access = rclone_access(os.environ if environ is None else environ)
    try:
        if spec == default_drive_spec(settings):
            settings.default_drive_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return RcloneDrive(
            spec, rclone_path=rclone, env=access.env, flags=access.flags, run_dir=settings.run_dir
        )
    except OSError as e:
        where = e.filename or settings.data_dir
        raise ConfigError(
            f"cannot open the drive: placet's data directory is unusable at {where} "
            f"({e.strerror}); move away what is in the way, or free the disk, and try again",
            details={"path": str(where)},
        ) from e
