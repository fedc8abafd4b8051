"""This host's stable id, recorded with each proposal (one queue for several
machines; only the host a proposal was made on may run it, since its files live there).

A host is a placet data directory on a machine: a random UUID made on first use and kept
in `<data_dir>/host-id` (0600). Not the hostname, which owners rename and containers
repeat; not `/etc/machine-id` alone, which two data directories on one machine (two
"hosts" sharing one database) would share and a cloned VM image copies. Stable across
restarts, renames and upgrades; a new data directory is a new host.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from placet.config.files import write_whole
from placet.errors import ConfigError

HOST_ID_FILE = "host-id"


def host_id(data_dir: Path) -> str:
    """The id kept in `data_dir` (created there on first use; concurrent first calls
    agree: the id is written and synced to a temporary file, then hard-linked to its
    name, which fails if a winner linked first, so nobody reads a half-written file).

    Raises:
        ConfigError: the file exists but holds no UUID (someone edited it), or cannot be
            read or written.
    """
    path = data_dir / HOST_ID_FILE
    if not path.exists():
        _create(path)
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}", details={"path": str(path)}) from e
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ConfigError(
            f"{path} does not hold a host id (a UUID); remove it and placet makes a new one "
            "(proposals made under the old id then wait for a host that no longer exists)",
            details={"path": str(path)},
        ) from None


def _create(path: Path) -> None:
    """Put a new id under `path` whole, unless another process already has."""
    try:
        write_whole(path, f"{uuid.uuid4()}\n".encode("ascii"), replace=False)
    except OSError as e:
        raise ConfigError(
            f"cannot create {path}: {e}; check the data directory's permissions",
            details={"path": str(path)},
        ) from e


def runs_elsewhere(proposal_host_id: str | None, here: str) -> bool:
    """True when a proposal made on host `proposal_host_id` must not run on host `here`:
    its files live on the host it was made on (docs/decisions/0021-hosts.md). A proposal
    made before placet recorded host ids (None) runs wherever it is accepted, as it always
    did."""
    return proposal_host_id is not None and proposal_host_id != here


def host_label(hostname: str, proposal_host_id: str | None) -> str:
    """How views name a host: its hostname and the first 8 characters of its id
    (hostnames repeat across containers; the id does not), e.g. ``laptop (3f2a9c1e)``."""
    return f"{hostname} ({proposal_host_id[:8]})" if proposal_host_id else hostname


def waiting_note(status: str, hostname: str, proposal_host_id: str | None, here: str) -> str | None:
    """The line every view shows for an approved proposal another host must run
    (``waiting for host laptop (3f2a9c1e)``), else None."""
    if status != "approved" or not runs_elsewhere(proposal_host_id, here):
        return None
    return f"waiting for host {host_label(hostname, proposal_host_id)}"
