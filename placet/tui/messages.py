"""Messages the review UI's thread workers post back to the event loop.

Workers do the I/O (store reads, sweeps, the executor); widgets only render. Every
result crosses back as one of these dataclass messages (Textual's `Message` supports
dataclasses through `__post_init__`), posted with the thread-safe `post_message`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from placet.store import AuditRecord, OpResultRecord, ProposalRecord


@dataclass
class QueueLoaded(Message):
    """Active proposals (pending, approved, executing) in id order.

    `records` is the first `len(records)` active proposals when `replace` is True (the
    table is reconciled with it), or the next page to append when False. `exhausted`:
    no active proposal lies beyond the last one. `new` are pending proposals created
    since the last load (for a notification), whether or not they are in `records`.
    """

    records: list[ProposalRecord]
    exhausted: bool
    replace: bool = True
    new: list[ProposalRecord] = field(default_factory=list)
    max_id: int | None = None
    """Highest proposal id the load saw (any status); None for a further page."""
    counts: dict[str, int] | None = None
    """Proposals per status in the whole store (None for a further page)."""


@dataclass
class StoreChanged(Message):
    """Another connection, process or host committed a change (PostgreSQL's NOTIFY,
    through `Store.change_waiter`): read again."""


@dataclass
class HistoryLoaded(Message):
    records: list[ProposalRecord]


@dataclass
class DetailLoaded(Message):
    """A finished proposal with its per-op results and audit events (history detail)."""

    record: ProposalRecord
    results: list[OpResultRecord]
    events: list[AuditRecord]


@dataclass
class AuditLoaded(Message):
    events: list[AuditRecord]
    total: int


@dataclass
class SweepDone(Message):
    expired: list[int]
    interrupted: list[int]


@dataclass
class ActionDone(Message):
    """A store action (discard, extend, verify) finished; `message` is for a toast."""

    title: str
    message: str
    severity: str = "information"
    reload: bool = True
    marked: bool = False
    """The marked proposals were decided: the marks go."""


@dataclass
class TransferStarted(Message):
    record: ProposalRecord


@dataclass
class TransferProgress(Message):
    """One `placet.executor.ProgressEvent`, as the transfer panel needs it: bytes moved so
    far over the whole proposal, the ops journaled so far (`ops_done`), the ops running
    when it was made (`in_flight`, ascending op indexes) and, when an op just ended, its
    result, and the name of the lowest op running (`current`: agent text, shown inert).
    `ops_done`/`in_flight` are None when the executor did not say (an executor handed in
    that sends older events); the panel then marks `op_index` as running."""

    proposal_id: int
    op_index: int
    op_count: int
    bytes_done: int
    bytes_total: int
    op_result: OpResultRecord | None = None
    ops_done: int | None = None
    in_flight: tuple[int, ...] | None = None
    current: str | None = None


@dataclass
class TransferFinished(Message):
    """The executor returned (`record` is final) or raised (`error` set)."""

    proposal_id: int
    record: ProposalRecord | None
    results: list[OpResultRecord]
    error: str | None = None
    error_title: str = ""
    more: bool = False
    """More proposals of the same decision run after this one."""
    again: list[ProposalRecord] = field(default_factory=list)
    """A set refused whole: its proposals still pending, to show again."""


@dataclass
class RulesRefused(Message):
    """The owner's rules file is refused (`placet.rules.loading`): no rule applies."""

    message: str
