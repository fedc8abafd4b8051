"""A notification's words: placet's own summary of the proposals, never the agent's prose.

Each proposal is one line: kind, target, size, agent (label, else client name), expiry.
Anything an agent chose (paths, names, the label, the client name) goes through
`placet.text.inert` and is cut to `FIELD_MAX` characters, so markup, escapes and bidi
controls arrive as visible escapes and a long name cannot fill the message. With
`detail = "minimal"` no path or name appears at all, only kinds, counts, sizes and times
(a public ntfy topic is readable by anyone who knows its name). The agent's reason is
never sent: it is the agent's claim, shown in `placet review` below placet's facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from placet.display import human_bytes
from placet.store.lifecycle import rule_of
from placet.store.models import ProposalRecord
from placet.store.outbox_rows import Rendered
from placet.text import inert

FIELD_MAX = 80
"""Most characters of one agent-chosen field in a message (after `inert`)."""

LINES_MAX = 10
"""Most proposals listed in one message; the rest are counted."""

PAYLOAD_MAX = 100
"""Most proposals the webhook payload lists; `count` gives how many the message is about."""

PRIORITY = {
    "proposed": 4,
    "expiring": 4,
    "failed": 5,
    "interrupted": 5,
    "rule_approved": 3,
    "test": 3,
}

_HEADS = {
    "proposed": ("{n} proposal{s} wait{v} for you", "new"),
    "expiring": ("{n} proposal{s} expire{v} within 5 minutes", "expiring"),
    "failed": ("{n} accepted proposal{s} failed", "failed"),
    "interrupted": ("{n} accepted proposal{s} {w} interrupted", "interrupted"),
    "rule_approved": ("{n} proposal{s} approved by your standing rules", "rule"),
}
_TAILS = {"rule_approved": "Nothing waits for you; `placet rules list` shows the rules."}


def clip(s: str, limit: int = FIELD_MAX) -> str:
    """`inert(s)` cut to `limit` characters, ending in an ellipsis when cut."""
    shown = inert(s)
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def _s(d: Any, key: str) -> str | None:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, str) else None


def _int(d: Any, key: str) -> int | None:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def target(rec: ProposalRecord) -> str:
    """Where the proposal writes, as the owner reads it (agent-chosen: made inert later)."""
    req = rec.request
    root = _s(req.get("root"), "name") or "?"
    remote = _s(req, "remote_path")
    if remote is None:
        parent, name = _s(req, "remote_parent") or "", _s(req, "name") or ""
        remote = f"{parent}/{name}" if parent and name else parent or name
    if rec.kind == "download":
        return f"{root}:{_s(req, 'local_path') or ''}"
    if rec.kind == "sync":
        return f"{root}:{_s(req, 'local_path') or ''} <-> drive:{remote}"
    return f"drive:{remote}"


def size(rec: ProposalRecord) -> int | None:
    """Bytes the proposal would move, when placet recorded them."""
    req, ev = rec.request, rec.evidence
    if rec.kind == "upload":
        return _int(ev.get("local"), "size")
    if rec.kind == "download":
        return _int(ev.get("remote"), "size")
    if rec.kind == "sync":
        kinds = req.get("op_kinds")
        if isinstance(kinds, dict):
            return sum(_int(v, "bytes") or 0 for v in kinds.values())
        ops = req.get("ops")
        if isinstance(ops, list):
            return sum(_int(o, "size") or 0 for o in ops)
    return None


def ops(rec: ProposalRecord) -> int:
    req = rec.request
    n = _int(req, "op_count")
    if n is None:
        listed = req.get("ops")
        n = len(listed) if isinstance(listed, list) else 1
    return n if rec.kind == "sync" else 1


def agent(rec: ProposalRecord) -> str:
    """Who proposed it (attribution only): the label, else the client name."""
    return rec.label or rec.client_name or "an agent"


def _clock(t: datetime) -> str:
    return t.strftime("%H:%M:%SZ")


def _minutes(seconds: float) -> str:
    m = max(0, round(seconds / 60))
    return "under a minute" if m == 0 else f"{m} min"


def line(rec: ProposalRecord, *, minimal: bool, now: datetime) -> str:
    """One proposal as one line of the message."""
    bits = [f"#{rec.id} {rec.kind}"]
    if not minimal:
        bits.append(clip(target(rec)))
    if rec.kind == "sync":
        bits.append(f"{ops(rec)} ops")
    n = size(rec)
    if n is not None:
        bits.append(human_bytes(n))
    if not minimal:
        bits.append(f"by {clip(agent(rec), 40)}")
    if rec.status == "pending":
        left = (rec.expires_at - now).total_seconds()
        bits.append(f"expires {_clock(rec.expires_at)} (in {_minutes(left)})")
    else:
        bits.append(rec.status)
    rule = rule_of(rec.resolved_by)
    if rule is not None:
        bits.append(f"approved by rule {clip(rule, 40)}")
    return ", ".join(bits)


def render(
    kind: str, records: Sequence[ProposalRecord], *, minimal: bool, now: datetime
) -> Rendered:
    """The message for `records` (one event kind, one session), at `now` (aware UTC).

    The webhook payload carries the same facts as fields; with `minimal` it holds no
    target and no agent.
    """
    n = len(records)
    head, tag = _HEADS.get(kind, ("{n} proposal{s} need{v} you", kind))
    title = "placet: " + head.format(
        n=n, s="" if n == 1 else "s", v="s" if n == 1 else "", w="was" if n == 1 else "were"
    )
    shown = [line(r, minimal=minimal, now=now) for r in records[:LINES_MAX]]
    if n > LINES_MAX:
        shown.append(f"and {n - LINES_MAX} more")
    shown.append(_TAILS.get(kind, "Decide in `placet review`."))
    items: list[dict[str, Any]] = []
    for r in records[:PAYLOAD_MAX]:
        item: dict[str, Any] = {
            "id": r.id,
            "kind": r.kind,
            "status": r.status,
            "bytes": size(r),
            "expires_at": r.expires_at.isoformat(),
        }
        if r.kind == "sync":
            item["ops"] = ops(r)
        if rule_of(r.resolved_by) is not None:
            item["rule"] = clip(str(rule_of(r.resolved_by)), 40)
        if not minimal:
            item["target"] = clip(target(r))
            item["agent"] = clip(agent(r), 40)
        items.append(item)
    payload = {"event": kind, "tag": tag, "title": title, "count": n, "proposals": items}
    return Rendered(title, "\n".join(shown), payload, PRIORITY.get(kind, 3))


def test_message(now: datetime) -> Rendered:
    """The message `placet notify test` sends."""
    title = "placet: test notification"
    body = f"placet can reach you here ({_clock(now)}). Nothing waits for you."
    return Rendered(title, body, {"event": "test", "title": title, "proposals": []}, 3)
