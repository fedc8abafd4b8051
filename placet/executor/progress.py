"""The values the executor hands back while it runs: progress events and op outcomes.

`ProgressEvent` is what a caller's `progress` callback receives (the review UI's transfer
panel, the CLI's bar): byte counts are cumulative over the whole proposal (ended ops plus
the bytes of the ops in flight), so one bar can show it, and an event carrying
`op_result` is sent once per op, right after that op was journaled. Events always come
from the thread that called `execute`, even while a sync's transfers run on a pool.
`OpOutcome` is one op's end state before it is journaled: an outcome of docs/design.md section
9 ("Op results") and a JSON-safe detail. A failure's detail always has the typed-error
shape `{code, message, retryable, details}` of docs/design.md section 5, so the MCP tool, the
UI and the CLI read every failure the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from placet.errors import PlacetError
from placet.store import OpResultRecord

Outcome = Literal["done", "already_done", "stale", "failed", "skipped"]


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report of `placet.executor.execute`.

    Attributes:
        op_index: index of the op running (or just journaled), 0-based.
        op_count: number of ops in the proposal.
        bytes_done: bytes moved so far over the whole proposal (ops that ended without a
            transfer count their full size, so the bar reaches the end).
        bytes_total: bytes every transfer op of the proposal moves (0 for a mkdir).
        op_result: the journaled result, on the one event sent when an op ends; else None.
        ops_done: ops journaled so far (any outcome, `op_result`'s op included).
        in_flight: indexes of the ops running when the event was made, ascending (a
            sync runs up to `Settings.transfers` file ops at once; then `op_index` of an
            event without `op_result` is the lowest of them).
    """

    op_index: int
    op_count: int
    bytes_done: int
    bytes_total: int
    op_result: OpResultRecord | None = None
    ops_done: int = 0
    in_flight: tuple[int, ...] = ()


@dataclass
class OpOutcome:
    """How one op ended, before it is journaled (`Store.record_op_result`).

    `remote_mtime` is not journaled: the uploaded object's mtime as the upload's check
    after the move read it, handed to the sync baseline so that it does not stat again.
    """

    outcome: Outcome
    detail: dict[str, Any] = field(default_factory=dict)
    remote_mtime: str | None = None

    @classmethod
    def error(cls, outcome: Outcome, e: PlacetError, **extra: Any) -> OpOutcome:
        """A `stale` or `failed` outcome whose detail is the error's wire shape + `extra`."""
        return cls(outcome, {**e.to_dict(), **extra})


class Aborted(Exception):
    """Raised from inside a transfer's progress callback to stop it: the owner cancelled,
    or this process lost its lease. The drive kills rclone and removes its temp object."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
