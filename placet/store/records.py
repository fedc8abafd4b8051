"""The store's values that are no table's rows, and the executor lease holder.

The typed rows of its tables are `placet.store.models`'. These are frozen too:
`EventFacts` (what an audit event records of a transition), `AuditVerification` (the
chain walked), `SweepResult`; `to_dict()` is their JSON shape (datetimes as ISO 8601).

`LeaseHolder` names the process executing a proposal as host + pid + process start time
(docs/design.md section 9): on the same host a dead holder is recognised at once (no such pid,
or the pid was reused by a process that started at another time) instead of waiting for
the lease to lapse.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


class Record:
    """A frozen dataclass the store returns, with its JSON shape."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field (datetimes as ISO 8601 strings, None
        kept)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


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


def holder_dict(value: str | None) -> dict[str, Any] | None:
    """A stored lease holder as its JSON object (`{"unreadable": ...}` when it is not one)."""
    try:
        return None if value is None else LeaseHolder.parse(value).to_dict()
    except ValueError:
        return {"unreadable": value}
