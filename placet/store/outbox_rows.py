"""The notification outbox's tables and the values read from them (`placet.store.outbox`).

Three tables, built by migration `notify_outbox` (`placet.store.migrations`): events
that need the owner, messages made of them, and one delivery per message and channel.
The values are what the outbox hands the sender (`EventRow`, `Claim` with its
`Rendered` content) and `placet notify log` (`DeliveryLog`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field

from placet.store.db import as_utc
from placet.store.models import NullStr, NullWhen, Str, Table, When

CLAIM_S = 60.0
"""How long a claimed delivery is held by its sender before another may take it over."""

RETENTION = timedelta(days=30)
"""Finished deliveries (sent, failed, dropped), their messages and events, kept for
`placet notify log`."""

STALE = timedelta(hours=1)
"""An event not grouped, or a delivery not sent, within this long is given up (skipped /
failed): a notification an hour late tells the owner nothing useful."""

EXPIRY_LEAD = timedelta(minutes=5)
"""A pending proposal this close to its expiry gets an `expiring` event."""


# ---- tables (migration `notify_outbox` builds exactly these) ---------------------------


class NotifyEvent(Table, table=True):
    """One event that needs the owner (see the module docstring)."""

    __tablename__ = "notify_event"
    __table_args__ = (
        UniqueConstraint("dedupe", name="ux_notify_event_dedupe"),
        Index("ix_notify_event_state", "state", "created_at"),
        Index("ix_notify_event_proposal", "proposal_id"),
    )

    id: int = Field(primary_key=True)
    kind: Str
    proposal_id: int
    run_id: Str
    audit_event_id: int | None = None
    dedupe: Str
    state: Str
    message_id: int | None = None
    created_at: When


class NotifyMessage(Table, table=True):
    """One message, rendered once: title, body and the webhook's JSON payload."""

    __tablename__ = "notify_message"

    id: int = Field(primary_key=True)
    kind: Str
    run_id: Str
    title: Str
    body: Str
    payload: Str
    priority: int
    created_at: When


class NotifyDelivery(Table, table=True):
    """One message through one channel, with its attempts (see the module docstring);
    `uid` is the delivery's id for the receiver (a random UUID, the same on every
    attempt)."""

    __tablename__ = "notify_delivery"
    __table_args__ = (
        UniqueConstraint("message_id", "channel", name="ux_notify_delivery_channel"),
        Index("ix_notify_delivery_state", "state", "next_at"),
        Index("ux_notify_delivery_uid", "uid", unique=True),
    )

    id: int = Field(primary_key=True)
    message_id: int = Field(foreign_key="notify_message.id")
    channel: Str
    state: Str
    attempts: int
    next_at: When
    claimed_by: NullStr
    claim_until: NullWhen
    last_error: NullStr
    created_at: When
    sent_at: NullWhen
    uid: NullStr


# ---- values ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRow:
    """An event waiting to be grouped into a message."""

    id: int
    kind: str
    proposal_id: int
    run_id: str
    created_at: datetime


@dataclass(frozen=True)
class Rendered:
    """A message's content as the sender made it (placet's own words, agent text inert)."""

    title: str
    body: str
    payload: dict[str, Any]
    priority: int


@dataclass(frozen=True)
class Claim:
    """A delivery this process claimed, with its message's `content` as grouped, the
    message's event `kind` and the `proposal_ids` it is about (so the sender can say it
    again from the proposals' state at send time): send it, then `Outbox.sent`,
    `Outbox.attempt_failed` or `Outbox.dropped`."""

    delivery_id: int
    message_id: int
    channel: str
    attempt: int
    content: Rendered
    kind: str
    proposal_ids: tuple[int, ...]
    uid: str
    """The id the receiver sees (`X-Placet-Delivery`): random, the same on a retry."""


@dataclass(frozen=True)
class DeliveryLog:
    """One delivery as `placet notify log` shows it."""

    delivery_id: int
    message_id: int
    channel: str
    state: str
    attempts: int
    title: str
    created_at: datetime
    sent_at: datetime | None
    next_at: datetime
    last_error: str | None
    uid: str | None


def parse_time(text: str | datetime | None) -> datetime | None:
    """A naive-UTC column as read raw (text on SQLite, a datetime on PostgreSQL)."""
    if text is None:
        return None
    if isinstance(text, datetime):
        return text.replace(tzinfo=UTC)
    return as_utc(datetime.fromisoformat(text + "+00:00"))


def time_of(text: str | datetime) -> datetime:
    """`parse_time` of a NOT NULL column."""
    at = parse_time(text)
    assert at is not None
    return at
