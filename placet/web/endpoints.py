"""The shapes a `placet web` handler answers in: a page behind the session, JSON for a
signed-in owner, a refusal as a page or as JSON, and a request body read within a cap.

A page a browser navigates to without the session header is answered 401 with the
sign-in page, on which placet's script reads it again with the session it keeps
(`placet.web.session`); a JSON request without one is refused ``not_signed_in`` (403)
before its body is read."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from placet.errors import LimitExceeded, PlacetError, PolicyRefused, SetRefused, UsageError
from placet.web import pages
from placet.web.html import Html
from placet.web.state import WebState, web_state

__all__ = [
    "BODY_MAX",
    "html",
    "json_body",
    "not_signed_in",
    "query_int",
    "refused_json",
    "signed_json",
    "signed_page",
]

P = ParamSpec("P")

BODY_MAX = 1 << 20
"""Most bytes of a JSON request body (an accept lists at most a page of unticked ops)."""


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


def not_signed_in() -> PolicyRefused:
    return PolicyRefused(
        "not signed in: sign in with your passkey first (open placet web's page)",
        code="not_signed_in",
    )


def refused_json(e: PlacetError, status: int | None = None) -> JSONResponse:
    """A refusal as the page's script reads it, with HTTP `status` (default 403 for
    ``not_signed_in``, else 409; always 413 for a limit). A set's names each refused
    proposal with its own code (``refused``)."""
    if status is None:
        status = 403 if e.error_code == "not_signed_in" else 409
    if isinstance(e, LimitExceeded):
        status = 413
    body: dict[str, Any] = {"ok": False, "code": e.error_code, "message": e.message}
    if isinstance(e, SetRefused):
        body["refused"] = e.details["refused"]
    return JSONResponse(body, status_code=status)


def query_int(value: str | None, default: int = 0) -> int:
    """A query parameter as a cursor or page number: 0 up to SQLite's largest integer
    (a larger one would not bind), `default` when it is not a number."""
    try:
        return min(max(int(value or default), 0), (1 << 63) - 1)
    except ValueError:
        return default


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, read up to `BODY_MAX` bytes. Raises LimitExceeded (a
    longer body, refused before any of it is read when its Content-Length says so, or
    once the bytes streamed pass the cap: HTTP 413), UsageError ``invalid_argument`` (not
    JSON, nested too deep for the parser, not an object)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > BODY_MAX:
        raise LimitExceeded(
            f"the request body is {declared} bytes, over {BODY_MAX}; none of it was read",
            details={"limit_bytes": BODY_MAX},
        )
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > BODY_MAX:
            raise LimitExceeded(
                f"the request body is over {BODY_MAX} bytes; nothing was read further",
                details={"limit_bytes": BODY_MAX},
            )
    try:
        body = json.loads(bytes(data) or b"{}")
    except (ValueError, RecursionError) as e:
        raise UsageError("the request body is not JSON", code="invalid_argument") from e
    if not isinstance(body, dict):
        raise UsageError("the request body is not a JSON object", code="invalid_argument")
    return body


async def signed_json(
    request: Request,
    answer: Callable[Concatenate[WebState, str, dict[str, Any], P], dict[str, Any]],
    *args: P.args,
    **kwargs: P.kwargs,
) -> Response:
    """The JSON `answer(web, token, body, *args, **kwargs)` gives, off the loop, to a
    signed-in owner's request (its session token, its JSON body); a refusal as JSON:
    ``not_signed_in`` (checked before the body is read), the body's (`json_body`) or
    the answer's own."""
    web = web_state(request)
    try:
        session = await web.off_loop(WebState.session, request)
        if session is None:
            raise not_signed_in()
        body = await json_body(request)
        return JSONResponse(await web.off_loop(answer, session[0], body, *args, **kwargs))
    except PlacetError as e:
        return refused_json(e)


async def signed_page(
    request: Request,
    read: Callable[Concatenate[WebState, P], Html],
    *args: P.args,
    **kwargs: P.kwargs,
) -> Response:
    """The page `read(web, *args, **kwargs)` draws, off the loop, for a signed-in owner;
    else the sign-in page (401). A refusal is a page: 404 for ``not_found``, else 409."""

    def draw(web: WebState) -> Response:
        if web.session(request) is None:
            return html(pages.signin_page(bool(web.store.passkeys())), 401)
        try:
            return html(read(web, *args, **kwargs))
        except PlacetError as e:
            return html(pages.refusal_page(e), 404 if e.error_code == "not_found" else 409)

    return await web_state(request).off_loop(draw)
