"""This host's stable id, recorded with each proposal (issue 16: one queue for several
machines; only the host a proposal was made on may run it, since its files live there).

A host is a placet data directory on a machine: a random UUID made on first use and kept
in `<data_dir>/host-id` (0600). Not the hostname, which owners rename and containers
repeat; not `/etc/machine-id` alone, which two data directories on one machine (two
"hosts" sharing one database) would share and a cloned VM image copies. Stable across
restarts, renames and upgrades; a new data directory is a new host.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from placet.errors import ConfigError

HOST_ID_FILE = "host-id"


def host_id(data_dir: Path) -> str:
    """The id kept in `data_dir` (created there on first use; concurrent first calls
    agree: the file is created exclusively and the loser reads the winner's).

    Raises:
        ConfigError: the file exists but holds no UUID (someone edited it), or cannot be
            read or written.
    """
    path = data_dir / HOST_ID_FILE
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    except OSError as e:
        raise ConfigError(
            f"cannot create {path}: {e}; check the data directory's permissions",
            details={"path": str(path)},
        ) from e
    else:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(str(uuid.uuid4()) + "\n")
            f.flush()
            os.fsync(f.fileno())
    for _ in range(100):  # the creator may not have written it yet
        try:
            text = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read {path}: {e}", details={"path": str(path)}) from e
        if text:
            break
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ConfigError(
            f"{path} does not hold a host id (a UUID); remove it and placet makes a new one "
            "(proposals made under the old id then wait for a host that no longer exists)",
            details={"path": str(path)},
        ) from None
