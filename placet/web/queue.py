"""The lists of `placet web`: the queue of pending proposals, the history of decided ones
and the audit log, each a page behind the session, paged by a cursor.

The queue page carries the change counter's token read before its store reads, so its
long-poll (`placet.web.changes`) misses no change made after them; several proposals are
accepted from it with one passkey (`placet.web.sets`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from placet.errors import PlacetError
from placet.executor import plan_for
from placet.executor.audit import verify_audit
from placet.proposals.vetting import proposal_flags
from placet.schema import is_by_reference
from placet.store import ProposalRecord
from placet.web import pages
from placet.web.endpoints import query_int, signed_page
from placet.web.html import Html
from placet.web.state import WebState

__all__ = ["ROUTES"]

DONE = ("succeeded", "failed", "interrupted", "discarded", "expired", "withdrawn")
"""The statuses a proposal ends in."""
_NOTICES = {"discarded": "Discarded.", "extended": "Extended by 15 minutes."}


async def queue(request: Request) -> Response:
    """The pending proposals, oldest first, a page after the cursor ``after``."""
    after = query_int(request.query_params.get("after")) or None
    notice = _NOTICES.get(request.query_params.get("done", ""), "")
    return await signed_page(request, queue_html, after, notice)


def queue_html(web: WebState, after: int | None, notice: str) -> Html:
    version = web.changes.token()  # before the reads: a change after them is not missed
    pending = web.store.list(["pending"], limit=pages.QUEUE_PAGE + 1, after_id=after)
    more = pending[pages.QUEUE_PAGE - 1].id if len(pending) > pages.QUEUE_PAGE else None
    shown = pending[: pages.QUEUE_PAGE]
    return pages.queue_page(
        shown,
        web.store.counts(),
        web.clock(),
        next_after=more,
        notice=notice,
        flags=_flag_counts(shown),
        live=version,
    )


async def history(request: Request) -> Response:
    """The approved, running and ended proposals, newest first."""
    after = query_int(request.query_params.get("after")) or None
    return await signed_page(request, history_html, after)


def history_html(web: WebState, after: int | None) -> Html:
    statuses = ["approved", "executing", *DONE]
    records = web.store.list(
        statuses, limit=pages.QUEUE_PAGE + 1, after_id=after, newest_first=True
    )
    more = records[pages.QUEUE_PAGE - 1].id if len(records) > pages.QUEUE_PAGE else None
    return pages.history_page(records[: pages.QUEUE_PAGE], next_after=more)


async def audit(request: Request) -> Response:
    """The audit events after the cursor ``after``; with ``verify`` set, the hash chain
    verified against its anchor (`placet.executor.audit.verify_audit`)."""
    after = query_int(request.query_params.get("after"))
    verify = bool(request.query_params.get("verify"))
    return await signed_page(request, audit_html, after, verify)


def audit_html(web: WebState, after: int, verify: bool) -> Html:
    verification = verify_audit(web.store) if verify else None
    events = web.store.audit_events(after_id=after, limit=pages.AUDIT_PAGE)
    alarms = web.store.counter_alarms()
    return pages.audit_page(events, verification, after=after, alarms=alarms)


def _flag_counts(records: list[ProposalRecord]) -> dict[int, int]:
    """placet's risk flags per proposal whose ops are in its request (a by-reference
    sync's ops are read and flagged on its own page, never for the queue)."""
    out: dict[int, int] = {}
    for r in records:
        if is_by_reference(r.kind, r.request):
            continue
        try:
            out[r.id] = len(proposal_flags(r, plan_for(r.kind, r.request, r.evidence).ops))
        except PlacetError:
            continue
    return out


ROUTES = [
    Route("/", queue),
    Route("/history", history),
    Route("/audit", audit),
]
