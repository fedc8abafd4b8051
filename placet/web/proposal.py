"""A proposal in `placet web`: its page, its run's status, discard and extend, and the
content page and thumbnail of each of its ops (`placet.web.previews`).

The page shows what the review UI and `placet accept` show, from the same core: the
checks made before an accept (`check_before_accept`), the ops the executor runs and every
risk flag (docs/design.md section 9). Discard and extend decide through
`placet.decisions`; the accept, a passkey ceremony, is `placet.web.ceremonies`'."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from placet import decisions
from placet.decisions import Shown
from placet.errors import PlacetError
from placet.executor import check_before_accept, plan_for
from placet.proposals.vetting import proposal_flags
from placet.store.host import waiting_note
from placet.web import pages
from placet.web.endpoints import html, not_signed_in, query_int, refused_json, signed_page
from placet.web.html import Html
from placet.web.state import WebState, web_state

__all__ = ["EXTEND_MINUTES", "ROUTES"]

EXTEND_MINUTES = 15
REASON_MAX = 500
"""Most characters of a discard's reason kept."""


async def proposal(request: Request) -> Response:
    """The proposal's page; a sync's ops paged by ``page``."""
    pid = int(request.path_params["pid"])
    page_no = query_int(request.query_params.get("page"))
    notice = {"extended": "Extended by 15 minutes."}.get(request.query_params.get("done", ""), "")
    return await signed_page(request, proposal_html, pid, page_no, notice)


def proposal_html(web: WebState, pid: int, page_no: int, notice: str) -> Html:
    record = web.store.get(pid)
    refusal, raw_ops = check_before_accept(web.store, web.settings, record)
    ops = []
    flags = []
    if refusal is None or refusal.error_code != "request_altered":
        try:
            ops = plan_for(record.kind, record.request, record.evidence, raw_ops).ops
            flags = proposal_flags(record, ops)
        except PlacetError as e:
            refusal = refusal or e
    view = pages.ProposalView(
        record=record,
        ops=ops,
        flags=flags,
        refusal=refusal,
        results=web.store.op_results(record.id),
        events=web.store.audit_events(proposal_id=record.id),
        now=web.clock(),
        page=page_no,
        running=web.runs.running(record.id),
        run_error=web.runs.errors.get(record.id),
        figures=web.runs.figures(record.id),
        waiting=waiting_note(record.status, record.host, record.host_id, web.store.host_id),
        content=web.contents.inline(record, ops),
    )
    return pages.proposal_page(view, notice)


async def status(request: Request) -> Response:
    """The proposal's status, whether this server's run of it is still going and where
    it stands (``progress``: `Figures.to_dict`, its ``line`` as `placet accept` draws
    it; null before the run's first event); the page polls it while the run goes."""
    web = web_state(request)
    pid = int(request.path_params["pid"])
    if await web.off_loop(WebState.session, request) is None:
        return refused_json(not_signed_in())
    try:
        record = await web.off_loop(lambda web: web.store.get(pid))
    except PlacetError as e:
        return refused_json(e, 404)
    error = web.runs.errors.get(pid)
    running = web.runs.running(pid)
    figures = web.runs.figures(pid)
    return JSONResponse(
        {
            "status": record.status,
            "running": running,
            "done": not running,
            "error": None if error is None else f"{error.error_code}: {error.message}",
            "progress": None if figures is None else figures.to_dict(),
        }
    )


async def discard(request: Request) -> Response:
    """Discard the proposal as it is now, with the form's ``reason``."""
    web = web_state(request)
    pid = int(request.path_params["pid"])
    if await web.off_loop(WebState.session, request) is None:
        return html(pages.refusal_page(not_signed_in()), 403)
    form = await request.form()
    reason = str(form.get("reason") or "").strip()[:REASON_MAX] or None
    try:
        await web.off_loop(discard_now, pid, reason)
    except PlacetError as e:
        return html(pages.refusal_page(e, back=f"/p/{pid}"), 409)
    return RedirectResponse("/?done=discarded", status_code=303)


def discard_now(web: WebState, pid: int, reason: str | None) -> None:
    shown = Shown.of(web.store.get(pid))
    decisions.discard(web.store, [shown], reason=reason, now=web.clock())


async def extend(request: Request) -> Response:
    """Give the pending proposal `EXTEND_MINUTES` more before it expires."""
    web = web_state(request)
    pid = int(request.path_params["pid"])
    if await web.off_loop(WebState.session, request) is None:
        return html(pages.refusal_page(not_signed_in()), 403)
    try:
        await web.off_loop(extend_now, pid)
    except PlacetError as e:
        return html(pages.refusal_page(e, back=f"/p/{pid}"), 409)
    return RedirectResponse(f"/p/{pid}?done=extended", status_code=303)


def extend_now(web: WebState, pid: int) -> None:
    decisions.extend(web.store, [pid], minutes=EXTEND_MINUTES, now=web.clock())


async def op_content(request: Request) -> Response:
    """What the bytes of op ``index`` say, each side checked against the drive now."""
    pid, index = int(request.path_params["pid"]), int(request.path_params["index"])
    return await signed_page(request, lambda web: web.contents.page(pid, index))


async def op_image(request: Request) -> Response:
    """The new bytes of op ``index`` as an image, only when their magic number says one
    placet shows, with that type; else 404 (`ContentPages.thumbnail`)."""
    web = web_state(request)
    pid, index = int(request.path_params["pid"]), int(request.path_params["index"])
    if await web.off_loop(WebState.session, request) is None:
        return PlainTextResponse("not signed in", status_code=403)
    try:
        found = await web.off_loop(lambda web: web.contents.thumbnail(pid, index))
    except PlacetError as e:
        return PlainTextResponse(e.error_code, status_code=404)
    if found is None:
        return PlainTextResponse("not an image placet shows", status_code=404)
    data, mime = found
    return Response(data, media_type=mime)


ROUTES = [
    Route("/p/{pid:int}", proposal),
    Route("/p/{pid:int}/status", status),
    Route("/p/{pid:int}/discard", discard, methods=["POST"]),
    Route("/p/{pid:int}/extend", extend, methods=["POST"]),
    Route("/p/{pid:int}/op/{index:int}", op_content),
    Route("/p/{pid:int}/op/{index:int}/image", op_image),
]
