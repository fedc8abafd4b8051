"""`placet list | show | discard | extend | sweep | audit`: the owner's headless view of the
queue and the audit log; discarding and extending one or several proposals go through
`placet.decisions` (several discarded with one confirmation code, all or none).

Human output is for a terminal: every agent, file or remote string goes through
`placet.text.inert` (docs/design.md section 9, "Untrusted text"); `show` renders a
proposal as `placet accept` does (`placet.cli.accept_effect`), the first ops whole and
`--all` streaming every op (`placet.cli.show_ops`); `list` fits each row to the
terminal's width. `--json` is for scripts (`ensure_ascii`): `list` one JSON array, `show`
one object, `audit` JSON Lines (docs/decisions/0034-cli.md)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from placet import decisions
from placet.cli.accept_effect import reason_lines
from placet.cli.confirming import code_typed, no_terminal, terminal, yes_allowed
from placet.cli.show_diff import diff_lines
from placet.cli.show_ops import SHOWN, json_chunks, op_lines, scan, summary_lines
from placet.config import Settings, load_settings
from placet.decisions import Shown
from placet.display import (
    evidence_lines,
    flat_pairs,
    missing_folders_line,
    plain,
    result_line,
)
from placet.errors import EXIT_OK, PlacetError, PolicyRefused, StoreError, UsageError
from placet.executor.audit import verify_audit
from placet.rules.approving import decider, rule_note
from placet.store import AuditRecord, OpResultRecord, ProposalRecord, Store, open_store
from placet.store.db import utcnow
from placet.store.host import waiting_note
from placet.store.lifecycle import STATUSES
from placet.text import cell_width, fit_cells, inert, inert_with_ascii

FALLBACK_COLS = 150
"""`list`'s row width when stdout is no terminal and COLUMNS is unset."""
TARGET_WIDTH = 40
"""`list`'s target column, in terminal cells; a longer ASCII target is cut, a non-ASCII
one is kept whole (its escaped ASCII form beside it) as far as the row fits the terminal:
every row is cut to the terminal's width."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add list, show, discard, extend, sweep and audit to the `placet` parser."""
    p = subparsers.add_parser("list", help="list proposals (newest last)")
    p.add_argument(
        "--status",
        action="append",
        metavar="S",
        help=f"only these statuses (repeat or comma-separate): {', '.join(STATUSES)}",
    )
    p.add_argument("--limit", type=int, default=100, help="at most N, the newest (0: all)")
    p.add_argument("--json", action="store_true", help="one JSON array, a proposal per line")
    p.set_defaults(func=cmd_list)

    p = subparsers.add_parser("show", help="show one proposal, its op results and history")
    p.add_argument("id", type=int, help="the proposal id (see placet list)")
    p.add_argument(
        "--all",
        action="store_true",
        help=f"every op, risk flag and op result (without it: the first {SHOWN} and counts)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object, every op included")
    p.add_argument(
        "--diff",
        action="store_true",
        help="what the bytes say: each file op's content or diff, checked against its evidence",
    )
    p.add_argument("--op", type=int, metavar="N", help="with --diff: only op N (its index)")
    p.set_defaults(func=cmd_show)

    p = subparsers.add_parser(
        "discard", help="discard pending proposals (several: one confirmation code)"
    )
    p.add_argument("ids", type=int, nargs="+", metavar="ID", help="the pending proposals' ids")
    p.add_argument("--reason", help="recorded in the audit log")
    p.add_argument(
        "--yes",
        action="store_true",
        help="several: skip the confirmation code; works only with allow_yes = true",
    )
    p.set_defaults(func=cmd_discard)

    p = subparsers.add_parser("extend", help="give pending proposals more time")
    p.add_argument("ids", type=int, nargs="+", metavar="ID", help="the pending proposals' ids")
    p.add_argument("--minutes", type=int, required=True, help="added to each expiry")
    p.set_defaults(func=cmd_extend)

    p = subparsers.add_parser("sweep", help="expire due proposals, recover interrupted ones")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("audit", help="print or verify the audit log")
    p.add_argument(
        "--since",
        metavar="T",
        help="ISO 8601 time (UTC if no offset) or an age such as 30m, 12h, 7d",
    )
    p.add_argument("--proposal", type=int, metavar="ID", help="only this proposal's events")
    p.add_argument("--json", action="store_true", help="JSON Lines export")
    p.add_argument("--verify", action="store_true", help="verify the hash chain and anchor")
    p.set_defaults(func=cmd_audit)


# ---- commands ------------------------------------------------------------------------


def _open() -> Store:
    return open_store(load_settings())


def cmd_list(args: argparse.Namespace) -> int:
    statuses = _statuses(args.status)
    if args.limit < 0:
        raise UsageError(f"--limit {args.limit}: give 0 (all) or a positive number")
    with _open() as store:
        limit = args.limit or 2**62
        rows = list(reversed(store.list(statuses, limit=limit, newest_first=True)))
        here = store.host_id
    if args.json:  # one JSON array, a proposal per line; `[]` when there is none
        body = [json.dumps(p.to_dict(), sort_keys=True, ensure_ascii=True) for p in rows]
        return _emit(["[" + ",\n".join(body) + "]"])
    now = utcnow()
    cols = shutil.get_terminal_size((FALLBACK_COLS, 24)).columns
    lines = [f"{'ID':>6}  {'STATUS':<11} {'KIND':<8} {'WHEN':<18} {'TARGET':<40} REASON"]
    for p in rows:
        target = _list_target(p)
        head = (
            f"{p.id:>6}  {p.status:<11} {inert(p.kind):<8} {_when(p, now):<18} "
            f"{target}{' ' * (TARGET_WIDTH - cell_width(target))} "
        )
        note = waiting_note(p.status, inert(p.host), p.host_id, here) or rule_note(p)
        lines.append(head + (f"[{note}] " if note else "") + inert(p.reason))
    if not rows:
        lines = ["no proposals" + (f" with status {', '.join(statuses)}" if statuses else "")]
    return _emit([fit_cells(line, cols) for line in lines])


def cmd_show(args: argparse.Namespace) -> int:
    if args.op is not None and not args.diff:
        raise UsageError("--op N goes with --diff: placet show ID --diff --op N")
    if args.diff and args.json:
        raise UsageError("--diff and --json do not go together; choose one")
    with _open() as store:
        p = store.get(args.id)
        if args.diff:
            return _emit(diff_lines(store, store.settings, p, args.op))
        results = store.op_results(p.id)
        events = store.audit_events(proposal_id=p.id)
        if args.json:
            doc = {
                "proposal": p.to_dict(),
                "op_results": [r.to_dict() for r in results],
                "audit": [e.to_dict() for e in events],
            }
            return _emit_chunks(json_chunks(store, doc, p), "\n")
        return _emit(_show_lines(store, p, results, events, every=args.all))


def _show_lines(
    store: Store,
    p: ProposalRecord,
    results: list[OpResultRecord],
    events: list[AuditRecord],
    *,
    every: bool,
) -> Iterator[str]:
    """`placet show` as lines, generated as they are written (see `placet.cli.show_ops`)."""
    now = utcnow()
    agent = f"{inert(p.client_name or '?')} {inert(p.client_version or '')}".rstrip()
    yield f"proposal {p.id}  {inert(p.kind)}  {p.status.upper()}"
    note = waiting_note(p.status, inert(p.host), p.host_id, store.host_id)
    if note:
        yield f"  {note}: its files are there, and that host's placet runs it"
    yield f"  agent         {agent}, run {inert(p.run_id)} on host {inert(p.host)}"
    yield f"  created       {_ts(p.created_at)}"
    yield f"  expires       {_ts(p.expires_at)} ({_rel(p.expires_at, now)})"
    if p.resolved_at:
        yield f"  decided       {_ts(p.resolved_at)} by {inert(decider(p.resolved_by))}"
        ruled = rule_note(p)
        if ruled is not None:
            yield f"  {inert(ruled)}: the owner's standing rule, not a decision made now"
    if p.label:
        yield f"  label         {inert(p.label)}"
    yield f"  drive         {inert(p.drive_spec)}"
    yield f"  target        {_target(p)}"
    yield from _folder_lines(p)
    yield from reason_lines(p)
    try:
        scanned = scan(store, p)
    except PlacetError as e:
        yield f"  the stored request does not parse ({inert(e.message)}); see --json"
    else:
        yield from summary_lines(p, scanned, every=every)
        yield from op_lines(store, p, scanned, every=every)
    yield from evidence_lines(p.kind, p.request, p.evidence)
    if p.summary:
        yield f"  summary       {flat_pairs(p.summary)}"
    if results:
        lease = f", lease held by {_holder(p.lease_holder)}" if p.lease_holder else ""
        yield f"  op results (attempt {p.attempt}{lease}):"
        shown = results if every else results[:SHOWN]
        for r in shown:
            yield f"    {result_line(r.op_index, r.outcome, r.op, r.detail)}"
        if len(shown) < len(results):
            outcomes: dict[str, int] = {}
            for r in results:
                outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
            each = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
            yield f"    ... and {len(results) - len(shown)} more ({each} in all); --all lists them"
    yield f"  request hash  {p.request_hash}"
    yield "  history:"
    yield from (f"    {_event_line(e)}" for e in events)


def _holder(raw: str) -> str:
    """A stored lease holder (JSON ``{"host", "pid", "start_time"}``) as ``host=h, pid=1``."""
    try:
        value = json.loads(raw)
    except ValueError:
        return inert(raw)
    return flat_pairs(value) if isinstance(value, dict) else inert(raw)


def _folder_lines(p: ProposalRecord) -> list[str]:
    line = missing_folders_line(p.kind, p.request, p.evidence)
    return [] if line is None else [f"  also          {line}"]


def cmd_discard(args: argparse.Namespace) -> int:
    """Discard one proposal, or several with one confirmation code on the terminal that
    names each (id, request hash): all of them, or none (`placet.decisions.discard`)."""
    settings = load_settings()
    ids: list[int] = list(args.ids)
    yes_allowed(settings, ids, args.yes)
    with open_store(settings) as store:
        records = [store.get(i) for i in ids]
        if len(records) > 1:
            _emit(
                f"  {p.id:<6} {p.request_hash[:12]}  {inert(p.kind):<8} {_target(p)}"
                for p in records
            )
            with terminal() as tty:
                if not args.yes:
                    _confirm_discard(tty, records, settings)
        done = decisions.discard(store, [Shown.of(p) for p in records], reason=args.reason)
    return _emit(f"discarded proposal {p.id} ({inert(p.kind)} {_target(p)})" for p in done)


def _confirm_discard(tty: int | None, records: list[ProposalRecord], settings: Settings) -> None:
    ids = [p.id for p in records]
    if tty is None:
        raise no_terminal(ids, settings, "discard")
    each = ", ".join(f"{p.id} ({p.request_hash[:12]})" for p in records)

    def prompt(code: str) -> str:
        return (
            f"\nTo discard the {len(records)} proposals {each} (id, request hash), type the "
            f"code {code} and press Enter (anything else declines): "
        )

    if not code_typed(tty, prompt):
        raise PolicyRefused(
            f"proposals {', '.join(map(str, ids))} were not discarded: the confirmation "
            "code did not match; nothing changed",
            code="confirmation_mismatch",
            details={"proposal_ids": ids},
        )


def cmd_extend(args: argparse.Namespace) -> int:
    with _open() as store:
        before = {p.id: p.expires_at for p in (store.get(i) for i in args.ids)}
        done = decisions.extend(store, list(args.ids), minutes=args.minutes)
        max_hours = store.settings.max_extend_hours
    lines = []
    for p in done:
        wanted = before[p.id] + timedelta(minutes=args.minutes)
        capped = p.expires_at < wanted
        said = f" (capped: at most {max_hours} h after its creation)" if capped else ""
        lines.append(f"proposal {p.id} now expires at {_ts(p.expires_at)}{said}")
    return _emit(lines)


def cmd_sweep(args: argparse.Namespace) -> int:
    with _open() as store:
        r = store.sweep()
    ids: Callable[[list[int]], str] = lambda xs: ", ".join(map(str, xs)) or "none"  # noqa: E731
    return _emit([f"expired: {ids(r.expired)}", f"interrupted: {ids(r.interrupted)}"])


def cmd_audit(args: argparse.Namespace) -> int:
    with _open() as store:
        if args.verify:
            v = verify_audit(store)
            _emit(_jsonl([v.to_dict()]) if args.json else [v.message])
            if not v.ok:
                where = f" at event {v.first_bad_event_id}" if v.first_bad_event_id else ""
                raise StoreError(
                    f"audit log verification failed{where}: {v.message}; the database or the "
                    f"anchor file {store.anchor_path} was changed outside placet",
                    code="audit_mismatch",
                    details=v.to_dict(),
                )
            return EXIT_OK
        since = _parse_since(args.since) if args.since else None
        events = store.audit_events(since=since, proposal_id=args.proposal)
    if args.json:
        return _emit(_jsonl(e.to_dict() for e in events))
    return _emit([_event_line(e) for e in events] or ["no audit events"])


# ---- rendering -----------------------------------------------------------------------


def _statuses(raw: list[str] | None) -> list[str] | None:
    if not raw:
        return None
    out = [s.strip() for item in raw for s in item.split(",") if s.strip()]
    unknown = [s for s in out if s not in STATUSES]
    if unknown:
        raise UsageError(
            f"unknown status {inert(', '.join(unknown))}; known: {', '.join(STATUSES)}"
        )
    return out


_AGE = re.compile(r"^(\d+)([smhd])$")


def _parse_since(text: str) -> datetime:
    m = _AGE.match(text.strip())
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]
        return utcnow() - timedelta(**{unit: int(m.group(1))})
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {inert(text)}: not an ISO 8601 time or an age like 30m, 12h, 7d"
        ) from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _target(p: ProposalRecord) -> str:
    r = p.request
    remote = r.get("remote_path")
    if remote is None and "name" in r:
        parent = str(r.get("remote_parent") or "")
        remote = f"{parent}/{r['name']}" if parent else r["name"]
    local = r.get("local_path")
    root = (r.get("root") or {}).get("name") if isinstance(r.get("root"), dict) else None
    local_s = f"{root}:{local}" if root and local is not None else local
    if p.kind == "upload":
        return f"{inert_with_ascii(str(local_s))} -> {inert_with_ascii(str(remote))}"
    if p.kind == "download":
        return f"{inert_with_ascii(str(remote))} -> {inert_with_ascii(str(local_s))}"
    if p.kind == "sync":
        count = r.get("op_count")  # ops stored by reference; else inline
        n = count if isinstance(count, int) else len(r.get("ops") or [])
        top = f"{root}:/" if root and not local else str(local_s)  # the root's top folder
        there = f"drive:/{remote or ''}"
        return f"{inert_with_ascii(top)} <-> {inert_with_ascii(there)} ({n} ops)"
    return inert_with_ascii(str(remote if remote is not None else _compact(r)))


def _list_target(p: ProposalRecord) -> str:
    shown = _target(p)
    return shown if "(ASCII: " in shown else _clip(shown, TARGET_WIDTH)


def _compact(value: Any) -> str:
    """A stored JSON value as one line; names with non-ASCII get their ASCII form beside."""
    return plain(value)


def _event_line(e: AuditRecord) -> str:
    detail = f"  {flat_pairs(e.detail, ascii_forms=False)}" if e.detail else ""
    return (
        f"#{e.id:<6} {_ts(e.at)}  proposal {e.proposal_id:<5} {inert(e.actor):<16} "
        f"{e.from_status or '(new)'} -> {e.to_status}{detail}"
    )


def _ts(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _rel(t: datetime, now: datetime) -> str:
    secs = int((t - now).total_seconds())
    span = abs(secs)
    # one unit each, the largest that fits: 45s, 2m, 3h, 2d (never 102s beside 2m)
    text = (
        f"{span}s" if span < 60
        else f"{span // 60}m" if span < 3600
        else f"{span // 3600}h" if span < 86400
        else f"{span // 86400}d"
    )  # fmt: skip
    return f"in {text}" if secs > 0 else f"{text} ago"


def _when(p: ProposalRecord, now: datetime) -> str:
    """Pending: when it expires; expired: since when (not since the sweep that marked
    it); otherwise: when it was decided or made."""
    if p.status == "pending" and p.expires_at > now:
        return "expires " + _rel(p.expires_at, now)
    if p.status in ("pending", "expired"):
        return (
            "expired"
            if now - p.expires_at < timedelta(seconds=1)
            else ("expired " + _rel(p.expires_at, now))
        )
    return _rel(p.resolved_at or p.created_at, now)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _jsonl(objs: Iterable[dict[str, Any]]) -> Iterable[str]:
    return (json.dumps(o, sort_keys=True, ensure_ascii=True) for o in objs)


def _emit(lines: Iterable[str]) -> int:
    """Write lines to stdout; a closed pipe (`| head`) ends quietly."""
    return _emit_chunks(line + "\n" for line in lines)


def _emit_chunks(chunks: Iterable[str], end: str = "") -> int:
    """Write `chunks` as they come (a streamed document: never joined into one string),
    then `end`; a closed pipe (`| head`) ends quietly."""
    try:
        for chunk in chunks:
            sys.stdout.write(chunk)
        sys.stdout.write(end)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_OK
