"""The pages of `placet web`, server-rendered: queue, proposal, history, audit, sign-in,
pairing and refusals.

A proposal's page shows what the review UI and `placet accept` show, from the same core
functions: the ops the executor runs (`placet.executor.plan_for` on the ops
`check_before_accept` read and verified), every risk flag placet computed
(`placet.proposals.vetting.proposal_flags`) above the agent's reason, which is boxed and
labelled as its claim, and the request hash the approval binds to (docs/design.md
section 9). A sync's ops are paged (`OPS_PAGE` a page); each has a tick box, and the
boxes unticked on the page shown are the ops left out of the accept (`skip_ops`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from placet.display import duration, plain, size_text
from placet.errors import PlacetError
from placet.executor.progress import Figures
from placet.proposals.facts import proposed_state
from placet.proposals.risk import RiskFlag, needs_typed_confirmation
from placet.proposals.vetting import root_path_of
from placet.rules.approving import rule_note
from placet.schema import Op
from placet.store import AuditRecord, AuditVerification, OpResultRecord, ProposalRecord
from placet.store.passkeys import CounterAlarm
from placet.web.html import Html, attr, join, page, path, path_end, said, text

OPS_PAGE = 100
"""A sync's ops shown per page."""
QUEUE_PAGE = 100
"""Proposals listed per page of the queue and of the history."""
AUDIT_PAGE = 100

_SEVERITY = ("runs_code", "secret_name", "replaces_existing", "name_changed",
             "bidi_or_invisible", "confusable_name", "non_ascii_name")  # fmt: skip


def countdown(expires_at: datetime, now: datetime) -> Html:
    """A countdown the page's script keeps ticking (`data-expires`, ISO 8601 UTC)."""
    left = (expires_at - now).total_seconds()
    shown = "expired" if left <= 0 else duration(left)
    return Html(
        f'<span class="countdown" data-expires="{attr(expires_at.isoformat())}" '
        f'data-now="{attr(now.isoformat())}">{shown}</span>'
    )


def _req(record: ProposalRecord) -> dict[str, Any]:
    return record.request if isinstance(record.request, dict) else {}


def target(record: ProposalRecord) -> str:
    """One line naming what a proposal writes (untrusted text: escape before showing)."""
    r = _req(record)

    def rel(parent: object, name: object) -> str:
        parent, name = str(parent or ""), str(name or "")
        return f"{parent}/{name}" if parent else name

    if record.kind == "upload":
        return f"{r.get('local_path', '?')} -> drive:/{rel(r.get('remote_parent'), r.get('name'))}"
    if record.kind == "mkdir":
        return f"drive:/{rel(r.get('remote_parent'), r.get('name'))}"
    if record.kind == "download":
        return f"drive:/{r.get('remote_path', '?')} -> {r.get('local_path', '?')}"
    if record.kind == "sync":
        n = r.get("op_count")
        count = n if isinstance(n, int) else len(r.get("ops") or [])
        return f"{r.get('local_path', '')} <-> drive:/{r.get('remote_path', '')} ({count} ops)"
    return record.kind


def _flag_mark(n: int | None) -> str:
    if n is None:
        return ""
    return f' · <b class="warn">{n} risk flag{"s" if n != 1 else ""}</b>' if n else ""


def queue_page(
    pending: Sequence[ProposalRecord], counts: dict[str, int], now: datetime, *,
    next_after: int | None, notice: str = "", flags: dict[int, int] | None = None,
    live: str | None = None,
) -> Html:  # fmt: skip
    """The pending proposals with countdowns; `flags`: risk flags per proposal id
    (absent: not computed, e.g. a sync whose ops are read on its own page). `live`: the
    change token the page was drawn at (`placet.web.changes`); the page's script then
    keeps the list current (`#live` is read again when `/changes` says it moved)."""
    flags = flags or {}
    rows = [
        _row(
            p,
            f'<span class="target">{path_end(target(p))}</span>'
            f'<span class="meta">{text(p.client_name or "?")} · expires in '
            f"{countdown(p.expires_at, now)}{_flag_mark(flags.get(p.id))}</span>"
            f'<span class="reason">{text(p.reason)}</span>',
            pick=flags.get(p.id, 0 if p.kind != "sync" else -1),
        )
        for p in pending
    ]
    more = f'<p><a href="/?after={next_after}">more pending proposals</a></p>' if next_after else ""
    empty = "<p>No proposal is waiting for you.</p>" if not pending else ""
    body = (
        _notice(notice)
        + f"<h1>Queue <small>{counts.get('pending', 0)} pending</small></h1>"
        + empty
        + f'<ul class="queue">{join(rows)}</ul>{more}'
    )
    if live is not None:
        body = f'<div id="live" data-changes="{attr(live)}">{body}</div>'
    return page("Queue", body + _set_bar())


def _set_bar() -> str:
    """Below the queue: the proposals selected, each with its request hash, and one
    button that accepts all of them with one passkey assertion (`placet.web.sets`)."""
    return (
        '<section id="set-bar" hidden><h2>Selected</h2><p id="set-summary"></p>'
        '<label class="ack" id="set-ack-label" hidden><input type="checkbox" id="set-ack"> '
        "I have read placet's risk flags of the flagged ones</label>"
        '<div class="actions"><button type="button" id="accept-set" class="primary">'
        "Accept the selected with one passkey</button></div>"
        '<p class="hint">All of them or none: if one changed, expired or was decided '
        "since it was shown, nothing is accepted and the queue is shown again.</p></section>"
        '<p id="status" role="status"></p>'
    )


def _row(p: ProposalRecord, rest: str, *, pick: int | None = None) -> str:
    """One proposal in a list (queue, history): its id and kind, then `rest` (HTML, its
    parts escaped), all one link to its page. `pick`: a box to select it for a set, with
    its risk flags counted (-1: not counted, a sync read on its own page)."""
    box = (
        ""
        if pick is None
        else f'<input type="checkbox" class="pick" data-proposal="{p.id}" '
        f'data-hash="{attr(p.request_hash)}" data-flags="{pick}" aria-label="select #{p.id}">'
    )
    return (
        f'<li class="row">{box}<a href="/p/{p.id}"><span class="id">#{p.id}</span> '
        f'<span class="kind">{text(p.kind)}</span> {rest}</a></li>'
    )


def _notice(notice: str) -> str:
    return f'<p class="notice" role="status">{said(notice)}</p>' if notice else ""


def _op_html(record: ProposalRecord, op: Op, root_path: str, *, tickable: bool) -> str:
    local = f"{root_path.rstrip('/')}/{op.local_path}" if op.local_path is not None else None
    remote = f"drive:/{op.remote_path or ''}"
    tick = (
        f'<input type="checkbox" class="op-tick" data-index="{op.index}" checked '
        f'aria-label="run op {op.index}">'
        if tickable
        else ""
    )
    head = f'<div class="op" id="op-{op.index}">{tick}<b>#{op.index} {text(op.kind)}</b> '
    if op.kind == "mkdir":
        return head + f"create folder <code>{path(remote)}</code></div>"
    src, dst = (remote, local) if op.kind == "download" else (local, remote)
    lines = [
        f"<code>{path(src or '?')}</code> → <code>{path(dst or '?')}</code>"
        + (' <strong class="warn">REPLACES it</strong>' if op.replace else ""),
        f"size {size_text(op.size)}",
    ]
    ev_local, ev_remote = op.expected_local, op.expected_remote
    if op.kind != "download" and ev_local is not None:
        lines.append(f"sha256 <code>{attr(ev_local.sha256)}</code>")
    if op.kind == "download" and ev_remote is not None and ev_remote.read_by_placet:
        digest = f"sha256 {ev_remote.digest}"  # the remote has none: placet read the bytes
        lines.append(f"content read by placet <code>{text(digest)}</code> (no remote digest)")
    elif op.kind == "download" and ev_remote is not None:
        digest = f"{ev_remote.digest_type} {ev_remote.digest}" if ev_remote.digest else "none"
        lines.append(f"remote digest <code>{text(digest)}</code>")
    lines += [f"{label}: {text(fact)}" for label, fact in proposed_state(op)]
    lines.append(f'<a class="content-link" href="/p/{record.id}/op/{op.index}">content</a>')
    return head + "<br>".join(lines) + "</div>"


def _flag_summary(flags: list[RiskFlag]) -> str:
    """``"3: 1 runs_code, 2 replaces_existing (listed below)"``, most severe first."""
    if not flags:
        return "none"
    counts: dict[str, int] = {}
    for f in flags:
        counts[f.code] = counts.get(f.code, 0) + 1
    ranked = sorted(counts, key=lambda c: _SEVERITY.index(c) if c in _SEVERITY else len(_SEVERITY))
    said = ", ".join(f"{counts[c]} {attr(c)}" for c in ranked)
    return f"{len(flags)}: {said} (listed below)"


def _flags_html(flags: list[RiskFlag]) -> str:
    if not flags:
        return '<section class="flags none"><h2>placet found no risk flags</h2></section>'
    ranked = sorted(flags, key=lambda f: _SEVERITY.index(f.code) if f.code in _SEVERITY else 0)
    items = "".join(f"<li><b>{attr(f.code)}</b>: {said(f.message)}</li>" for f in ranked)
    return (
        f'<section class="flags"><h2>placet risk flags ({len(flags)})</h2><ul>{items}</ul>'
        "</section>"
    )


@dataclass(frozen=True)
class ProposalView:
    """What the proposal page needs, gathered by the app from the core."""

    record: ProposalRecord
    ops: list[Op]
    flags: list[RiskFlag]
    refusal: PlacetError | None
    results: list[OpResultRecord]
    events: list[AuditRecord]
    now: datetime
    page: int = 0
    running: bool = False
    run_error: PlacetError | None = None
    """Why the execution started from this page stopped before it ran, if it did."""
    waiting: str | None = None
    """``waiting for host X`` when another host runs this approved proposal."""
    content: str = ""
    """A single upload's or download's content section (`placet.web.previews`)."""
    figures: Figures | None = None
    """Where this server's run of it stands, or how it ended (`placet.web.runs`)."""


def proposal_page(v: ProposalView, notice: str = "") -> Html:
    r = v.record
    root_path = root_path_of(r)
    decidable = r.status == "pending" and not r.is_expired(v.now)
    retry = r.status in ("failed", "interrupted")
    tickable = r.kind == "sync" and (decidable or retry)
    start = v.page * OPS_PAGE
    shown = v.ops[start : start + OPS_PAGE]
    total_bytes = sum(op.size or 0 for op in v.ops if op.kind != "mkdir")
    pager = ""
    if len(v.ops) > OPS_PAGE:
        pages = (len(v.ops) + OPS_PAGE - 1) // OPS_PAGE
        prev = f'<a href="/p/{r.id}?page={v.page - 1}">previous</a> ' if v.page > 0 else ""
        nxt = f'<a href="/p/{r.id}?page={v.page + 1}">next</a>' if v.page + 1 < pages else ""
        pager = (
            f'<p class="pager">ops {start + 1}-{start + len(shown)} of {len(v.ops)} '
            f"(page {v.page + 1} of {pages}) {prev}{nxt}</p>"
        )
    when = (
        f"expires in {countdown(r.expires_at, v.now)}"
        if r.status == "pending"
        else f"{text(r.status)}"
    )
    facts = (
        '<dl class="facts">'
        f'<dt>status</dt><dd id="proposal-status">{text(r.status)} · {when}{_ruled(r)}'
        + (f' · <span id="waiting">{text(v.waiting)}</span>' if v.waiting else "")
        + "</dd>"
        f"<dt>drive</dt><dd><code>{text(r.drive_spec)}</code></dd>"
        f"<dt>proposed by</dt><dd>{text(r.client_name or '?')} {text(r.client_version or '')}"
        f" · run {text(r.run_id)} · host {text(r.host)}</dd>"
        f"<dt>ops</dt><dd>{len(v.ops)}, moving {size_text(total_bytes)}</dd>"
        f'<dt>risk flags</dt><dd class="{"warn" if v.flags else ""}">{_flag_summary(v.flags)}'
        "</dd></dl>"
    )
    refusal = (
        f'<p class="refusal" role="alert"><b>{attr(v.refusal.error_code)}</b>: '
        f"{said(v.refusal.message)}</p>"
        if v.refusal is not None
        else ""
    )
    if v.run_error is not None:
        refusal += (
            f'<p class="refusal" role="alert">not executed: <b>{attr(v.run_error.error_code)}'
            f"</b>: {said(v.run_error.message)}</p>"
        )
    ops_html = join(_op_html(r, op, root_path, tickable=tickable) for op in shown)
    if tickable:
        ops_html = Html(
            '<p class="hint">Untick an op to leave it out: the accept runs the ops ticked '
            "on this page and every op on the other pages; the ops left out are recorded "
            "and journaled as skipped.</p>" + ops_html
        )
    reason = (
        '<section class="claim"><h2>The agent\'s reason <small>(its claim, not checked by '
        f'placet)</small></h2><blockquote id="reason">{text(r.reason)}</blockquote></section>'
    )
    hash_html = (
        f'<p class="hash">request hash <code id="request-hash">{attr(r.request_hash)}</code></p>'
    )
    actions = ""
    if (decidable or retry) and v.refusal is None and not v.running:
        ack = (
            '<label class="ack"><input type="checkbox" id="ack"> I have read the '
            f"{len(v.flags)} risk flag(s) above</label>"
            if needs_typed_confirmation(v.flags)
            else ""
        )
        label = "Accept with passkey" if decidable else "Accept again with passkey"
        actions += (
            f'<div class="actions">{ack}<button type="button" id="accept" class="primary" '
            f'data-proposal="{r.id}" data-hash="{attr(r.request_hash)}">{label}</button></div>'
        )
    if decidable:
        actions += (
            f'<form method="post" action="/p/{r.id}/discard" class="actions">'
            '<input type="text" name="reason" maxlength="500" placeholder="reason (recorded)" '
            'aria-label="reason for discarding">'
            '<button type="submit" id="discard">Discard</button></form>'
            f'<form method="post" action="/p/{r.id}/extend" class="actions">'
            '<button type="submit" id="extend">Extend 15 minutes</button></form>'
        )
    status = (
        f'<p id="status" role="status" data-proposal="{r.id}" '
        f'data-watch="{"1" if v.running else ""}"></p>' + _progress_html(v)
    )
    results = ""
    if v.results:
        items = "".join(
            f"<li>#{x.op_index} <b>{text(x.outcome)}</b> "
            f"{text(plain(x.detail.get('message') or x.detail.get('verification') or ''))}</li>"
            for x in v.results[:OPS_PAGE]
        )
        results = f'<section><h2>Op results</h2><ul class="results">{items}</ul></section>'
    events = "".join(_event_html(e) for e in v.events)
    body = (
        _notice(notice)
        + f"<h1>#{r.id} {text(r.kind)} <small>{text(r.status)}</small></h1>"
        + facts
        + refusal
        + f"<section><h2>What accepting does</h2>{pager}{ops_html}{pager}</section>"
        + v.content
        + _flags_html(v.flags)
        + reason
        + hash_html
        + actions
        + status
        + results
        + f'<section><h2>Audit</h2><ul class="audit">{events}</ul></section>'
    )
    return page(f"#{r.id}", body)


def _progress_html(v: ProposalView) -> str:
    """The run's progress: the line `placet accept` draws while it runs (the page's
    script redraws it from `/p/ID/status`), how it ended once it did."""
    f = v.figures
    if f is None and not v.running:
        return ""
    if f is None:
        line, done, total = "starting...", 0, 1
    else:
        said = f"{f.ops_done:,}/{f.op_count:,} ops ended ({f.moved()})"
        line = f.line() if v.running else said
        done, total = (f.bytes_done, f.bytes_total) if f.bytes_total else (f.ops_done, f.op_count)
    return (
        f'<div id="progress"><progress id="progress-bar" max="{max(total, 1)}" '
        f'value="{min(done, max(total, 1))}"></progress> '
        f'<span id="progress-line">{text(line)}</span></div>'
    )


def _event_html(e: AuditRecord) -> str:
    detail = {k: v for k, v in e.detail.items() if k != "passkey"}
    signed = " · signed with a passkey" if "passkey" in e.detail else ""
    return (
        f"<li><b>{e.id}</b> {attr(e.at.isoformat(timespec='seconds'))} #{e.proposal_id} "
        f"{text(e.from_status or '(new)')} → {text(e.to_status)} by {text(e.actor)}{signed}"
        f'<br><small class="detail">{text(plain(detail))}</small></li>'
    )


def _ruled(p: ProposalRecord) -> str:
    """`` · approved by rule R`` (HTML) for a proposal a standing rule approved."""
    note = rule_note(p)
    return "" if note is None else f' · <span class="rule">{text(note)}</span>'


def history_page(records: Sequence[ProposalRecord], *, next_after: int | None) -> Html:
    rows = [
        _row(
            p,
            f'<b>{text(p.status)}</b>{_ruled(p)} <span class="target">{path(target(p))}</span>',
        )
        for p in records
    ]
    more = f'<p><a href="/history?after={next_after}">older</a></p>' if next_after else ""
    empty = "<p>Nothing decided yet.</p>" if not records else ""
    return page("History", f'<h1>History</h1>{empty}<ul class="queue">{join(rows)}</ul>{more}')


def audit_page(
    events: Sequence[AuditRecord], verification: AuditVerification | None, *, after: int,
    alarms: Sequence[CounterAlarm] = (),
) -> Html:  # fmt: skip
    """The audit events from `after`, the chain's verification when asked, and above
    them every passkey answer refused for a sign count that did not grow (`alarms`)."""
    verdict = ""
    if verification is not None:
        cls = "notice" if verification.ok else "refusal"
        verdict = f'<p class="{cls}" role="status" id="verify">{said(verification.message)}</p>'
    more = (
        f'<p><a href="/audit?after={events[-1].id}">later events</a></p>'
        if len(events) >= AUDIT_PAGE
        else ""
    )
    items = "".join(_event_html(e) for e in events)
    warned = "".join(
        f"<li><b>passkey {a.passkey_id}</b> {attr(a.at.isoformat(timespec='seconds'))}: "
        f"signed with sign count {a.new_count} after {a.stored_count} ({text(a.what)}); "
        f"refused. Another copy of it may be in use: <code>placet keys revoke "
        f"{a.passkey_id}</code> if you did not expect this.</li>"
        for a in alarms
    )
    alarmed = (
        f'<section class="flags" id="passkey-alarms"><h2>Passkey alarms</h2><ul>{warned}</ul>'
        "</section>"
        if alarms
        else ""
    )
    return page(
        "Audit",
        '<h1>Audit</h1><p><a href="/audit?verify=1">Verify the chain and every signature</a>'
        f"</p>{verdict}{alarmed}"
        f'<ul class="audit">{items}</ul>{more}',
    )


def signin_page(has_passkeys: bool) -> Html:
    """The answer to a page asked without the session (HTTP 401): the sign-in box in
    ``#shell``, on which placet's script, when it keeps a session for this origin, reads
    the page again with it and shows ``#opening`` meanwhile (`placet.web.session`)."""
    why = (
        '<p class="hint">not_signed_in: this page opens with the session that placet\'s '
        "own page keeps for this address, sent by its script; sign in with your passkey.</p>"
    )
    if not has_passkeys:
        box = (
            "<h1>placet</h1><p>No passkey is registered yet. In your terminal run "
            "<code>placet web pair</code> and open the link it prints on this device.</p>"
        )
    else:
        box = (
            "<h1>Sign in</h1><p>Only the owner's passkey opens this page.</p>"
            '<button type="button" id="signin" class="primary">Sign in with passkey</button>'
            '<p id="status" role="status"></p>'
        )
    body = (
        '<div id="shell"><p id="opening" class="notice" hidden>Opening...</p>'
        f'<div id="signin-box">{box}{why}</div></div>'
    )
    return page("Sign in", body, signed_in=False)


def pair_page(token: str, refusal: PlacetError | None) -> Html:
    if refusal is not None:
        body = f'<h1>Pairing</h1><p class="refusal" role="alert">{said(refusal.message)}</p>'
    else:
        body = (
            "<h1>Register a passkey</h1><p>This device's passkey becomes a key to approve "
            "placet proposals. The link works once.</p>"
            '<label>Name <input type="text" id="passkey-name" maxlength="60" '
            'value="my phone"></label>'
            f'<button type="button" id="pair" class="primary" data-token="{attr(token)}">'
            "Register passkey</button>"
            '<p id="status" role="status"></p>'
        )
    return page("Pairing", body, signed_in=False)


def refusal_page(error: PlacetError, *, back: str = "/") -> Html:
    return page(
        "Refused",
        f'<h1>Refused</h1><p class="refusal" role="alert"><b>{attr(error.error_code)}</b>: '
        f'{said(error.message)}</p><p><a href="{attr(back)}">back</a></p>',
    )
