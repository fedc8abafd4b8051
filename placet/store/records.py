"""The frozen values the store returns, and the executor lease holder.

Records are snapshots: reading one never keeps a session or a lock open, and changing a
proposal always goes back through a `Store` transition. `to_dict()` gives the JSON shape
the CLI (`--json`) and the MCP tools print (datetimes as ISO 8601 UTC).

`LeaseHolder` names the process executing a proposal as host + pid + process start time
(docs/design.md section 9): on the same host a dead holder is recognised at once (no such pid,
or the pid was reused by a process that started at another time) instead of waiting for
the lease to lapse.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from types import MappingProxyType
from typing import Any


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


LEFT_OUT: Mapping[str, bool] = MappingProxyType({"left_out": True})
"""The metadata of a record field that `to_dict` leaves out: `field(metadata=LEFT_OUT)`
(a passkey's public key, which no JSON output shows)."""


class Record:
    """A frozen dataclass the store returns, with its JSON shape."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field not marked `LEFT_OUT` (datetimes as
        ISO 8601 strings, None kept)."""
        return {
            f.name: _jsonable(getattr(self, f.name))
            for f in fields(self)  # type: ignore[arg-type]
            if not f.metadata.get("left_out")
        }


@dataclass(frozen=True)
class ProposalRecord(Record):
    """A proposal as stored (docs/design.md section 4). Datetimes are aware UTC."""

    id: int
    kind: str
    status: str
    request: dict[str, Any]
    evidence: dict[str, Any]
    request_hash: str
    reason: str
    drive_spec: str
    run_id: str
    client_name: str | None
    client_version: str | None
    label: str | None
    host: str
    created_at: datetime
    expires_at: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    attempt: int
    lease_holder: str | None
    lease_expires_at: datetime | None
    summary: dict[str, Any] | None
    host_id: str | None = None
    """The stable id of the host it was made on (`placet.store.host`); None when made
    before placet recorded it."""

    def is_expired(self, now: datetime) -> bool:
        """True when a pending proposal's TTL has passed at `now` (swept or not)."""
        return self.expires_at <= now


@dataclass(frozen=True)
class OpResultRecord(Record):
    """One journaled op of one execution attempt."""

    proposal_id: int
    attempt: int
    op_index: int
    op: dict[str, Any]
    outcome: str  # done | already_done | stale | failed | skipped
    detail: dict[str, Any]
    recorded_at: datetime


@dataclass(frozen=True)
class EventFacts(Record):
    """What an audit event records of one transition: the proposal, its request hash,
    who made it (`lifecycle` actor), from which status (None at creation) to which, and
    when (aware UTC). The order is the `audit_event` columns' order (after `id`)."""

    proposal_id: int
    request_hash: str
    actor: str
    from_status: str | None
    to_status: str
    at: datetime


@dataclass(frozen=True)
class AuditRecord(EventFacts):
    """One audit event as stored: its facts, its `id` in the chain, the transition's
    `detail`, and the chain's links (`prev_hash`, `hash`; `placet.store.audit`)."""

    id: int
    detail: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class AuditVerification(Record):
    """Result of walking the audit chain and the anchor file.

    `first_bad_event_id` names the first event that does not match (for a cut tail: the
    first missing id); None when `ok`.
    """

    ok: bool
    count: int
    first_bad_event_id: int | None
    message: str


@dataclass(frozen=True)
class SpentSignature(Record):
    """A signed approval spent by a run's claim (`Store.claim`, table `spent_signature`)."""

    signature: str
    proposal_id: int
    claim_hash: str
    """The hash of the audit event of the claim that spent it."""
    host_id: str | None
    spent_at: datetime


@dataclass(frozen=True)
class SweepResult(Record):
    """Ids moved by one sweep: pending -> expired, executing -> interrupted."""

    expired: list[int]
    interrupted: list[int]


def _process_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), or None
    when there is no such process or it has ended (a zombie, state ``Z``: killed, its
    parent not having reaped it yet; its pid is not reused until then)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces or ')'.
    rest = data[data.rfind(b")") + 2 :].split()
    if rest[:1] == [b"Z"]:  # field 3, the state
        return None
    try:
        return int(rest[19])  # field 22 overall; rest starts at field 3
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class LeaseHolder:
    """The executing process: host name, pid and process start time (clock ticks)."""

    host: str
    pid: int
    start_time: int

    @classmethod
    def current(cls) -> LeaseHolder:
        """This process."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _process_start_time(pid) or 0)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "start_time": self.start_time}

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, value: str) -> LeaseHolder:
        """Inverse of `str()`; ValueError on anything else."""
        try:
            d = json.loads(value)
            return cls(str(d["host"]), int(d["pid"]), int(d["start_time"]))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"not a lease holder: {value!r}") from e

    def is_dead_here(self) -> bool:
        """True only when the holder is on this host and provably gone.

        Gone: no process with that pid, one that ended (a zombie not yet reaped), or one
        that started at a different time (pid reused). A holder on another host is never
        judged here; its lease must lapse.
        """
        if self.host != socket.gethostname():
            return False
        if not os.path.exists("/proc/self/stat"):  # no procfs: liveness by signal 0 only
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            return False
        start = _process_start_time(self.pid)
        return start is None or start != self.start_time
