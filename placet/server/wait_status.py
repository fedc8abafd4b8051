"""The one line `proposal_wait` gives the model to relay, and when to call again.

`status_line` says where the proposal stands in placet's own words, e.g. "waiting for
the owner; notified by ntfy at 12:01:03Z; expires in 24 min", "discarded by the owner:
<reason>" (the owner's reason escaped and cut to `REASON_MAX` characters, data for the
agent, not an instruction). `poll_after` is the hint `poll_after_s`: 0 while the
proposal is open and the call waited at least `LONG_WAIT_S` (call again at once: each
call waits by itself), `SHORT_POLL_S` after a short check, None once final.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from placet.server.models import TERMINAL
from placet.store import ProposalRecord
from placet.text import inert

REASON_MAX = 200
LONG_WAIT_S = 20
SHORT_POLL_S = 10


def _clock(t: datetime) -> str:
    return t.strftime("%H:%M:%SZ")


def _left(rec: ProposalRecord, now: datetime) -> str:
    s = (rec.expires_at - now).total_seconds()
    if s <= 0:
        return "its TTL has run out"
    m = round(s / 60)
    return f"expires in {m} min" if m >= 1 else f"expires in {max(1, round(s))} s"


def _notified(sent: Sequence[tuple[str, datetime]], channels_on: bool) -> str | None:
    if sent:
        names = ", ".join(dict.fromkeys(c for c, _ in sent))
        return f"notified by {names} at {_clock(sent[0][1])}"
    return "notification on its way" if channels_on else None


def status_line(
    rec: ProposalRecord,
    *,
    sent: Sequence[tuple[str, datetime]],
    channels_on: bool,
    reason: str | None,
    now: datetime,
) -> str:
    """One line for the model to relay (module docstring). `sent`: (channel, sent at) of
    the messages about `rec` that were delivered, oldest first; `channels_on`: whether
    any notification channel is configured; `reason`: the owner's discard reason."""
    if rec.status == "pending":
        parts = ["waiting for the owner", _notified(sent, channels_on), _left(rec, now)]
        return "; ".join(p for p in parts if p)
    if rec.status == "approved":
        return "accepted by the owner; waiting for the executor to start"
    if rec.status == "executing":
        return "accepted; executing now"
    if rec.status == "discarded":
        why = inert(reason) if reason else ""
        if len(why) > REASON_MAX:
            why = why[: REASON_MAX - 1] + "\u2026"
        return f"discarded by the owner: {why}" if why else "discarded by the owner (no reason)"
    if rec.status == "expired":
        return "expired: the owner did not decide within its TTL; propose again if still needed"
    if rec.status == "withdrawn":
        return "withdrawn by its session"
    if rec.status == "succeeded":
        return "accepted and done"
    if rec.status == "failed":
        return "accepted, but it failed; see op_results (the owner may accept it again)"
    if rec.status == "interrupted":
        return "accepted, but it was interrupted (the owner may accept it again)"
    return rec.status


def poll_after(rec: ProposalRecord, timeout_s: int) -> int | None:
    """Seconds before calling proposal_wait again (module docstring); None once final."""
    if rec.status in TERMINAL:
        return None
    return 0 if timeout_s >= LONG_WAIT_S or rec.status != "pending" else SHORT_POLL_S
