"""`placet web`: what the bytes of a proposal's ops say, per op, and image thumbnails.

A single upload's or download's content is on the proposal's page (`inline`), opened
without the drive (the local file re-read and checked, the drive's as captured when
proposed), so the page never waits on the remote. Every file op has a content page,
``/p/{pid}/op/{index}`` (a sync's paged ops each link to theirs), opened with the drive:
each side checked against the evidence now. ``/p/{pid}/op/{index}/image`` serves the new
bytes as a thumbnail only when their magic number says PNG, JPEG, GIF or WebP, with that
content type (never the name's, never SVG or HTML), under the page's `nosniff` and CSP
(``img-src 'self' data:``; the page shows it inline as a ``data:`` URL of that type,
since an ``<img>`` request carries no session header): a "PNG" that is really HTML is
refused there and shown as text.
Every line of a preview is inert already (`placet.preview.render`) and escaped once
more for HTML (`said`): bytes of a file never become markup.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from placet.config import Settings
from placet.drive.base import Drive
from placet.errors import PlacetError
from placet.executor import op_at
from placet.preview.magic import sniff
from placet.preview.model import CHANGED, OpPreview, render_op
from placet.preview.opening import open_preview, writes_file
from placet.preview.render import Line, Rendering
from placet.schema import Op
from placet.store import ProposalRecord, Store
from placet.web.html import Html, attr, page, path, said, text

__all__ = ["ContentPages", "rendering_html"]

_MARK = {"add": "+", "del": "-", "context": " ", "hunk": "", "text": "", "note": "# "}


def _line_html(line: Line) -> str:
    cut = f'<span class="cut"> ... [{line.cut} more characters]</span>' if line.cut else ""
    return f'<span class="{line.kind}">{said(_MARK.get(line.kind, "") + line.text)}</span>{cut}'


def thumb_src(preview: OpPreview) -> str | None:
    """The new bytes as a ``data:`` URL when their magic number says an image placet shows
    (PNG, JPEG, GIF, WebP: never SVG or HTML), else None. Inline, because an ``<img>``
    request carries no session header (`placet.web.session`); the type is placet's own."""
    new = preview.new
    data = new.content.data if new is not None and new.content is not None else b""
    kind = sniff(data)
    if kind is None or not kind.thumbnail:
        return None
    return f"data:{kind.mime};base64,{base64.b64encode(data).decode('ascii')}"


def rendering_html(r: Rendering, image_url: str | None = None) -> Html:
    """A rendering as a section: its title, a thumbnail (`image_url`, when the new bytes
    are an image placet shows), and its lines in a `<pre>`."""
    changed = ' class="warn"' if r.title == CHANGED else ""
    thumb = (
        f'<p><img class="thumb" src="{attr(image_url)}" alt="the new content, as an image"></p>'
        if image_url and r.image
        else ""
    )
    counts = (
        f' <span class="counts"><span class="add">+{r.added}</span> '
        f'<span class="del">-{r.removed}</span></span>'
        if r.added is not None
        else ""
    )
    lines = list(r.lines)
    lead = next((i for i, line in enumerate(lines) if line.kind != "note"), len(lines))
    tail = next((i for i in range(len(lines), lead, -1) if lines[i - 1].kind != "note"), lead)
    body = "\n".join(_line_html(line) for line in lines[lead:tail])
    pre = f'<pre class="preview" id="preview">{body}</pre>' if body else ""
    return Html(
        f'<section class="content"><h2>Content <small id="content-title"{changed}>'
        f"{said(r.title)}</small>{counts}</h2>{_notes(lines[:lead])}{thumb}{pre}"
        f"{_notes(lines[tail:])}</section>"
    )


def _notes(lines: list[Line]) -> str:
    """placet's notes on a preview, as a list that wraps (outside the `<pre>`)."""
    items = "".join(f"<li>{said(line.text)}</li>" for line in lines)
    return f'<ul class="preview-notes">{items}</ul>' if items else ""


def _op_line(op: Op) -> str:
    src, dst = op.local_path, op.remote_path
    if op.kind == "download":
        src, dst = dst, src
    return f"<code>{path(src or '?')}</code> → <code>{path(dst or '?')}</code>"


class ContentPages:
    """The content pages and the thumbnail route over `store` (see the module docstring);
    the drive is opened when a remote file is first read, closed by `close`."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._drive: Drive | None = None
        self._lock = threading.Lock()

    def drive(self) -> Drive:
        with self._lock:
            if self._drive is None:
                from placet.drive import drive_for

                self._drive = drive_for(self.settings)
            return self._drive

    def close(self) -> None:
        with self._lock:
            drive, self._drive = self._drive, None
        if drive is not None:
            drive.close()

    def inline(self, record: ProposalRecord, ops: list[Op]) -> Html:
        """The content section of a single upload's or download's page ("" otherwise)."""
        if record.kind == "sync" or len(ops) != 1 or not writes_file(ops[0]):
            return Html("")
        op = ops[0]
        try:
            preview = open_preview(self.store, self.settings, record, op, None)
        except PlacetError as e:
            return Html(
                f'<section class="content"><p class="refusal">{said(e.message)}</p></section>'
            )
        url = f"/p/{record.id}/op/{op.index}"
        more = f'<p><a href="{url}">check it against the drive now</a></p>'
        return Html(rendering_html(render_op(preview), thumb_src(preview)) + more)

    def routes(self, page_route: Callable[[Callable[[Request], Response]], Any],
               signed_in: Callable[[Request], bool]) -> list[Route]:  # fmt: skip
        """The content page (behind `page_route`: a session, refusals as a page) and the
        image route (`signed_in` checked; 404 for anything but a thumbnail)."""

        def content(request: Request) -> Response:
            pid, index = int(request.path_params["pid"]), int(request.path_params["index"])
            record = self.store.get(pid)
            op = op_at(self.store, record, index)
            preview = open_preview(self.store, self.settings, record, op, self.drive)
            return HTMLResponse(self._page(record, op, preview))

        def image_sync(request: Request) -> Response:
            if not signed_in(request):
                return PlainTextResponse("not signed in", status_code=403)
            pid, index = int(request.path_params["pid"]), int(request.path_params["index"])
            try:
                record = self.store.get(pid)
                op = op_at(self.store, record, index)
                preview = open_preview(self.store, self.settings, record, op, self.drive)
            except PlacetError as e:
                return PlainTextResponse(e.error_code, status_code=404)
            new = preview.new
            data = new.content.data if new is not None and new.content is not None else b""
            kind = sniff(data)
            if kind is None or not kind.thumbnail:
                return PlainTextResponse("not an image placet shows", status_code=404)
            return Response(data, media_type=kind.mime)

        async def image(request: Request) -> Response:
            return await run_in_threadpool(image_sync, request)

        return [
            Route("/p/{pid:int}/op/{index:int}", page_route(content)),
            Route("/p/{pid:int}/op/{index:int}/image", image),
        ]

    def _page(self, record: ProposalRecord, op: Op, preview: OpPreview) -> Html:
        base = f"/p/{record.id}/op"
        steps = (
            f'<p class="pager"><a href="{base}/{op.index - 1}">previous op</a> '
            f'<a href="{base}/{op.index + 1}">next op</a></p>'
            if record.kind == "sync"
            else ""
        )
        body = (
            f"<h1>#{record.id} op {op.index} <small>{text(op.kind)}</small></h1>"
            f'<p><a href="/p/{record.id}">back to the proposal</a></p>'
            f"<p>{_op_line(op)}</p>"
            + rendering_html(render_op(preview), thumb_src(preview))
            + steps
        )
        return page(f"#{record.id} op {op.index}", body)
