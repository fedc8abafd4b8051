"""Rich renderables for proposals: the only place the review UI turns data into text.

Every string that came from an agent, a file name or the remote goes through
`placet.text.inert` (or `inert_with_ascii` for names and paths) and into a
`rich.text.Text` built by `lit()`: Rich never parses it as markup, so ``[red]`` and
``[link=...]`` stay literal, and escapes (ESC, C1, bidi overrides, separators) reach
the terminal only as visible backslash sequences (docs/design.md section 9, "Untrusted
text"). Styles are applied to whole spans by us, never by markup inside data.

Layout of a proposal (detail pane and confirmation alike): placet's computed facts
first (risk flags, every op with paths, sizes, digests and the evidence seen at
proposal time, the request hash), the agent's reason last, boxed and labelled as the
agent's claim.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from placet.display import already_inert, failure_line, human_bytes, plain
from placet.proposals.risk import RiskFlag
from placet.rules.approving import decider, rule_note
from placet.store import AuditRecord, OpResultRecord, ProposalRecord
from placet.store.host import waiting_note
from placet.text import fit_cells, fit_path_end, inert, inert_with_ascii
from placet.tui.facts import (
    Effect,
    EffectOp,
    agent_of,
    countdown,
    expiring_soon,
    size_of,
    target_of,
)

MAX_OPS_SHOWN = 500
"""A detail pane lists at most this many ops (a sync may hold thousands)."""


def lit(s: object, style: str = "") -> Text:
    """Untrusted text as a literal Rich Text: escaped by `inert`, never parsed as markup."""
    return Text(inert(str(s)), style=style, end="")


def escaped(s: str, style: str = "") -> Text:
    """Text placet already escaped (a risk flag's message): see `already_inert`."""
    return Text(already_inert(s), style=style, end="")


def name(s: object, style: str = "") -> Text:
    """A file or remote name: `inert`, plus an ASCII-escaped copy if it has non-ASCII."""
    return Text(inert_with_ascii(str(s)), style=style, end="")


def when(dt: datetime | None) -> str:
    """UTC timestamp for people: '2026-11-30 12:00:00Z'; '-' for None."""
    return "-" if dt is None else dt.strftime("%Y-%m-%d %H:%M:%SZ")


def when_text(value: object) -> str | None:
    """An ISO-8601 timestamp string (as stored in evidence and results) in `when`'s
    form, or None when `value` is not one."""
    if not isinstance(value, str) or len(value) < 19 or value[4:5] != "-":
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return when(dt.astimezone(UTC))


def readable(value: object) -> str:
    """A JSON value for people: timestamps in `when`'s form, a flat dict of counts as
    ``kind: count, kind: count``, anything else as `placet.display.plain`."""
    stamp = when_text(value)
    if stamp is not None:
        return stamp
    if isinstance(value, dict) and all(not isinstance(v, dict | list) for v in value.values()):
        return ", ".join(f"{inert(str(k))}: {readable(value[k])}" for k in sorted(value, key=str))
    return plain(value)


def readable_lines(detail: dict[str, Any], indent: str, prefix: str = "") -> Text:
    """`detail` as one ``key: value`` line per key (keys sorted; a nested dict's keys as
    ``outer.inner``), each line starting with `indent`; values as `readable`."""
    out = Text(end="")
    for k in sorted(detail, key=str):
        v, key = detail[k], f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.append_text(readable_lines(v, indent, f"{key}."))
            continue
        out.append(indent)
        out.append(f"{inert(key)}: ", style="dim")
        out.append(readable(v))
    return out


def expires_cell(record: ProposalRecord, now: datetime) -> Text:
    """The queue's 'expires in' cell: live countdown (``28m32s``, ``23h51m``), marked
    when under two minutes."""
    if record.status != "pending":
        return Text(record.status, style="bold cyan", end="")
    left = countdown(record.expires_at, now)
    if left == "expired":
        return Text("expired", style="bold red", end="")
    if expiring_soon(record, now):
        return Text(f"! {left}", style="bold black on yellow", end="")
    return Text(left, end="")


def queue_cells(
    record: ProposalRecord, effect: Effect, now: datetime, *, target_width: int = 48
) -> list[Text]:
    """Cells of one queue row: id, kind, target, size, agent, expires in, reason.

    The target is `inert` only (no ASCII form: that would push the real name out of the
    cell; the detail pane shows each name with its ASCII form), fitted to `target_width`
    cells by its distinctive end (`target_cell`)."""
    kind = Text(record.kind, end="")
    if effect.flags:
        kind.append(" !", style="bold red")
    reason = lit(record.reason)
    ruled = rule_note(record)
    if ruled is not None:  # placet's fact first, then the agent's claim
        reason = Text.assemble((inert(ruled), "bold cyan"), " · ", reason, end="")
    return [
        Text(str(record.id), end=""),
        kind,
        target_cell(record, target_width),
        Text(human_bytes(size_of(record)), end=""),
        lit(agent_of(record)),
        expires_cell(record, now),
        reason,
    ]


def target_cell(record: ProposalRecord, width: int) -> Text:
    """A proposal's target in at most `width` cells: a path keeps its file name and as
    many trailing folders as fit (``…/backup/todo.txt``); a sync's pair is cut at its
    end."""
    shown = inert(target_of(record))
    if record.kind == "sync":
        return Text(fit_cells(shown, width), end="")
    return Text(fit_path_end(shown, width), end="")


def set_lines(
    records: Sequence[ProposalRecord],
    effects: dict[int, Effect] | None = None,
    *,
    width: int = 100,
) -> Text:
    """A set of proposals decided together in `width` cells, one line each: id, kind
    (``!`` with placet's risk flags), the request hash's first 12 characters, the size
    and the target by its distinctive end (`target_cell`) in what is left."""
    ids = max((len(str(r.id)) for r in records), default=1) + 2
    out = Text(end="")
    for n, r in enumerate(records):
        effect = (effects or {}).get(r.id)
        flagged = effect is not None and bool(effect.flags)
        head = f"{'#' + str(r.id):<{ids}}{r.kind:<9}"
        size = f" {human_bytes(size_of(r)):>9}  "
        out.append("\n" if n else "")
        out.append(head, style="bold")
        out.append("! " if flagged else "  ", style="bold red")
        out.append(r.request_hash[:12], style="bold")
        out.append(size)
        out.append_text(target_cell(r, max(width - len(head) - 14 - len(size), 8)))
    return out


def history_cells(record: ProposalRecord) -> list[Text]:
    """Cells of one history row: id, kind, target, status, agent, resolved, by."""
    style = {"succeeded": "green", "failed": "red", "interrupted": "bold yellow"}.get(
        record.status, ""
    )
    return [
        Text(str(record.id), end=""),
        Text(record.kind, end=""),
        name(target_of(record)),
        Text(record.status, style=style, end=""),
        lit(agent_of(record)),
        Text(when(record.resolved_at), end=""),
        lit(decider(record.resolved_by)),
    ]


def audit_cells(event: AuditRecord) -> list[Text]:
    """Cells of one audit row: event id, time, proposal, actor, transition, hash."""
    return [
        Text(str(event.id), end=""),
        Text(when(event.at), end=""),
        Text(f"#{event.proposal_id}", end=""),
        lit(event.actor),
        Text(f"{event.from_status or 'none'} -> {event.to_status}", end=""),
        Text(event.hash[:12], end=""),
    ]


def flags_block(flags: Sequence[RiskFlag]) -> Text:
    """placet's own risk flags, one per line; says so when there are none."""
    out = Text(end="")
    if not flags:
        out.append("placet found no risk flags.", style="green")
        return out
    out.append(f"placet risk flags ({len(flags)}):", style="bold red")
    for f in flags:
        out.append("\n  ! ", style="bold red")
        out.append(f.code, style="bold")
        out.append(": ")
        out.append_text(escaped(f.message))
    return out


def _evidence(label: str, ev: dict[str, Any] | None) -> Text:
    out = Text(f"      {label}: ", style="dim", end="")
    if ev is None:
        out.append("absent (nothing there)")
        return out
    if ev.get("exists") is False:
        out.append("absent")
        return out
    parts: list[str] = []
    if ev.get("is_dir"):
        parts.append("folder")
    if ev.get("size") is not None:
        parts.append(f"{ev['size']} bytes")
    if ev.get("sha256"):
        parts.append(f"sha256 {ev['sha256']}")
    same = ev.get("digest_type") == "sha256" and ev.get("digest") == ev.get("sha256")
    if ev.get("read_by_placet") and ev.get("digest"):
        parts.append(f"sha256 {ev['digest']} (of the bytes placet read; no remote digest)")
    elif ev.get("digest") and not same:
        parts.append(f"{ev.get('digest_type') or 'digest'} {ev['digest']}")
    elif "digest" in ev and not ev.get("sha256"):
        parts.append("no digest (compared by size: unverified)")
    if ev.get("mtime"):
        parts.append(f"mtime {when_text(ev['mtime']) or ev['mtime']}")
    if ev.get("mtime_ns") is not None:
        parts.append(f"mtime_ns {ev['mtime_ns']}")
    out.append_text(lit(", ".join(parts) or "exists"))
    return out


def op_block(op: EffectOp, drive_spec: str, seen_at: str = "at proposal time") -> Text:
    """One op: kind, paths, size and digests, then the evidence seen `seen_at` (a sync's
    evidence is its plan's: "at plan time (...)")."""
    out = Text(f"  op {op.index}  ", style="bold", end="")
    out.append(op.kind, style="bold magenta")
    if op.replace:
        out.append("  (replaces existing content)", style="bold yellow")
    if op.local_path is not None:
        out.append("\n      local:  ")
        out.append_text(name(op.local_path))
    if op.remote_path is not None:
        out.append("\n      remote: ")
        out.append_text(name(op.remote_path))
        out.append("  on drive ", style="dim")
        out.append_text(lit(drive_spec, style="dim"))
    if op.size is not None:
        out.append(f"\n      size:   {op.size} bytes ({human_bytes(op.size)})")
    if op.sha256:
        out.append("\n      sha256: ")
        out.append_text(lit(op.sha256))
    if op.digest and not (op.digest_type == "sha256" and op.digest == op.sha256):
        out.append(f"\n      {op.digest_type or 'digest'}: ")
        out.append_text(lit(op.digest))
    if op.note:
        out.append("\n      planner: ", style="dim")
        out.append_text(lit(op.note, style="dim"))
    if op.kind in ("upload", "upload_revision", "download", "mkdir"):
        out.append("\n")
        if op.kind == "download":
            out.append_text(_evidence(f"source {seen_at}", op.remote_before))
            out.append("\n")
            out.append_text(_evidence(f"target {seen_at}", op.local_before))
        elif op.kind == "mkdir":
            out.append_text(_evidence(f"target {seen_at}", op.remote_before))
        else:
            out.append_text(_evidence(f"source {seen_at}", op.local_before))
            out.append("\n")
            out.append_text(_evidence(f"target {seen_at}", op.remote_before))
    return out


def effect_block(record: ProposalRecord, effect: Effect, max_ops: int = MAX_OPS_SHOWN) -> Text:
    """Every op of the proposal (up to `max_ops`, the rest counted), or the raw request
    JSON."""
    out = Text(end="")
    if effect.raw is not None:
        out.append(f"unknown kind {record.kind!r}; stored request:\n", style="bold red")
        out.append_text(lit(json.dumps(effect.raw, sort_keys=True)))
        return out
    n = effect.total_ops
    out.append(
        f"Effect: {n} op{'s' if n != 1 else ''}, {human_bytes(effect.total_bytes)} in total",
        style="bold",
    )
    if effect.root_name:
        out.append("  (local root ")
        out.append_text(lit(effect.root_name))
        out.append(")")
    seen_at = "at proposal time"
    plan = record.evidence.get("plan") if record.kind == "sync" else None
    if isinstance(plan, dict):
        created = when_text(plan.get("created_at")) or "time unknown"
        seen_at = f"at plan time ({created})"
        out.append(f"\n  evidence is the plan's, {seen_at}", style="dim")
        if "id" in plan:
            out.append_text(lit(f"; plan {plan['id']}", "dim"))
        summary = plan.get("summary")
        if isinstance(summary, dict) and summary:
            out.append("\n  plan summary: ", style="dim")
            out.append_text(lit(readable(summary), "dim"))
    if not effect.complete:
        out.append_text(op_kinds_block(effect))
        out.append(
            "\n  every op, with its paths, size and the evidence seen, is in the op table "
            "below (Tab to it; End: the last op, Home: the first)",
            style="dim",
        )
        return out
    for op in effect.ops[:max_ops]:
        out.append("\n")
        out.append_text(op_block(op, record.drive_spec, seen_at))
    if n > max_ops:
        out.append(
            f"\n  ... and {n - max_ops} more ops; `placet show {record.id} --json` lists them all",
            style="bold yellow",
        )
    return out


def op_kinds_block(effect: Effect) -> Text:
    """``\n  upload: 99,000 ops, 1.0 GiB`` per op kind of a summary-only sync effect."""
    out = Text(end="")
    for kind in sorted(effect.op_kinds, key=str):
        count, size = effect.op_kinds[kind]
        out.append("\n  ")
        out.append_text(lit(kind, "bold magenta"))
        out.append(f": {count:,} op{'s' if count != 1 else ''}")
        if kind != "mkdir":
            out.append(f", {human_bytes(size)}")
    return out


def pending_flags_block(effect: Effect) -> Text:
    """Said while placet reads a large sync's ops to compute its risk flags."""
    return Text(
        f"placet is checking the risk flags of its {effect.total_ops:,} ops...",
        style="bold yellow",
        end="",
    )


def reason_box(reason: str) -> Panel:
    """The agent's reason, boxed and labelled as its claim (not checked by placet)."""
    return Panel(
        lit(reason),
        title=Text("the agent's claim (not verified by placet)", style="italic", end=""),
        title_align="left",
        border_style="yellow",
        expand=True,
    )


def header_line(record: ProposalRecord, now: datetime, here: str | None = None) -> Text:
    """Id, kind, status, time to expiry; `here` (this host's id): an approved proposal
    another host runs says so (`placet.store.host.waiting_note`)."""
    out = Text(f"#{record.id} {record.kind} ", style="bold", end="")
    out.append(record.status, style="bold cyan")
    note = waiting_note(record.status, record.host, record.host_id, here) if here else None
    if note:
        out.append("   ")
        out.append_text(lit(note))
    if record.status == "pending":
        left = countdown(record.expires_at, now)
        out.append(
            f"   expires {when(record.expires_at)} ({left})",
            style="bold red" if expiring_soon(record, now) or left == "expired" else "",
        )
    return out


def facts_block(record: ProposalRecord) -> Text:
    """Request hash, attribution and timestamps (attribution grants nothing)."""
    out = Text("request hash: ", style="bold", end="")
    out.append(record.request_hash)
    out.append("\nproposed by: ")
    out.append_text(lit(agent_of(record)))
    if record.client_name or record.client_version:
        out.append("  (client ")
        out.append_text(lit(f"{record.client_name or '?'} {record.client_version or ''}".strip()))
        out.append(")")
    out.append("  run ")
    out.append_text(lit(record.run_id))
    out.append("  host ")
    out.append_text(lit(record.host))
    out.append(f"\ncreated {when(record.created_at)}")
    if record.resolved_at is not None:
        out.append(f"   resolved {when(record.resolved_at)} by ")
        out.append_text(lit(decider(record.resolved_by)))
        ruled = rule_note(record)
        if ruled is not None:
            out.append(f"\n{inert(ruled)}", style="bold cyan")
    if record.attempt:
        out.append(f"   attempts {record.attempt}")
    return out


def results_block(results: Iterable[OpResultRecord]) -> Text:
    """Per-op results of the latest attempt."""
    out = Text("Results:", style="bold", end="")
    any_ = False
    for r in results:
        any_ = True
        style = {"done": "green", "already_done": "green", "failed": "red", "stale": "red"}.get(
            r.outcome, "yellow"
        )
        out.append(f"\n  op {r.op_index}  ")
        out.append(r.outcome, style=style)
        path = r.op.get("remote_path") or r.op.get("local_path") or ""
        if path:
            out.append("  ")
            out.append_text(name(path))
        if r.detail:
            out.append_text(outcome_detail(r.detail, indent="\n      "))
    if not any_:
        out.append("\n  (no op results recorded)", style="dim")
    return out


def outcome_detail(detail: dict[str, Any], indent: str = "") -> Text:
    """An op result's detail: the ``code: message`` line first (bold), the rest after,
    every string rendered once, nothing cut (the widget wraps it)."""
    head, rest = failure_line(detail)
    out = Text(end="")
    if head is not None:
        out.append(indent)
        out.append(head, style="bold")
    if rest:
        out.append_text(readable_lines(rest, indent))
    return out


def trail_block(events: Iterable[AuditRecord]) -> Text:
    """The proposal's audit events, oldest first: who moved it where, and why."""
    out = Text("History:", style="bold", end="")
    for e in events:
        out.append(f"\n  {when(e.at)}  {e.from_status or 'none'} -> {e.to_status}  by ")
        out.append_text(lit(e.actor))
        shown = {k: v for k, v in e.detail.items() if k != "request_hash"}
        if shown:  # times in `when`'s form, like every time in the UI
            out.append("  ")
            pairs = (f"{inert(str(k))}={readable(shown[k])}" for k in sorted(shown, key=str))
            out.append("  ".join(pairs), style="dim")
    return out


_GAP = Text("")


def _block(t: Text) -> Text:
    """A Text ending its line (the builders above end with no newline, for table cells)."""
    t.end = "\n"
    return t


def proposal_view(
    record: ProposalRecord,
    effect: Effect,
    results: Sequence[OpResultRecord] | None = None,
    events: Sequence[AuditRecord] | None = None,
    *,
    max_ops: int = MAX_OPS_SHOWN,
) -> RenderableType:
    """The whole detail below the head line: flags, effect (`max_ops` listed op by op),
    hash and attribution, results and audit trail (finished proposals), and last the
    agent's boxed reason."""
    top, rest = proposal_view_parts(record, effect, results, events, max_ops=max_ops)
    return Group(top, _GAP, rest)


def proposal_view_parts(
    record: ProposalRecord,
    effect: Effect,
    results: Sequence[OpResultRecord] | None = None,
    events: Sequence[AuditRecord] | None = None,
    *,
    max_ops: int = MAX_OPS_SHOWN,
) -> tuple[RenderableType, RenderableType]:
    """`proposal_view` in two: (flags and effect, the rest), so the detail pane can put
    a large sync's op table between them."""
    flags = flags_block(effect.flags) if effect.flags_checked else pending_flags_block(effect)
    top = Group(_block(flags), _GAP, _block(effect_block(record, effect, max_ops)))
    parts: list[RenderableType] = [_block(facts_block(record))]
    if record.summary:
        summary = Text("summary:", style="bold", end="")
        summary.append_text(readable_lines(record.summary, "\n  "))
        parts.append(_block(summary))
    if results is not None:
        parts += [_GAP, _block(results_block(results))]
    if events:
        parts += [_GAP, _block(trail_block(events))]
    parts += [_GAP, reason_box(record.reason)]
    return top, Group(*parts)


def audit_view(event: AuditRecord) -> RenderableType:
    """One audit event in full (its detail JSON rendered inert)."""
    out = Text(f"event {event.id}  proposal #{event.proposal_id}  {when(event.at)}\n", end="")
    out.append("actor: ")
    out.append_text(lit(event.actor))
    out.append(f"\n{event.from_status or 'none'} -> {event.to_status}")
    out.append(f"\nrequest hash: {event.request_hash}\nprev: {event.prev_hash}\nhash: {event.hash}")
    out.append("\ndetail: ")
    out.append(plain(event.detail) if event.detail else "-")
    return out
