"""The `placet web` application: Starlette routes over the same core as the review UI.

Security at the edge (docs/security.md, "placet web and passkeys"): a strict
Content-Security-Policy, `no-store` and `nosniff` on every response; a Host other than
this server's is refused (``127.0.0.1:PORT`` redirects to ``localhost:PORT``); every
state change is a POST from this origin (``origin_refused``) and, but for sign-in and
pairing, needs a passkey session (``not_signed_in``) carried in the ``X-Placet-Session``
header that only placet's own script sends, never a cookie, which every other port of
the host would receive (`placet.web.session`); Referrer-Policy ``same-origin``. Store work and
passkey checks run in the thread pool, never on the event loop. Deciding goes through
`placet.decisions`, as in the review UI and `placet accept`: the same checks before the
passkey is asked, the accept with what the challenge bound (``via: "web"``), the run in
a thread (`Runs`) (docs/decisions/0029-web-passkeys.md). Time comes from `clock`."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from placet import decisions
from placet.config import Settings
from placet.decisions import Shown
from placet.errors import LimitExceeded, PlacetError, PolicyRefused, SetRefused, UsageError
from placet.executor import check_before_accept, plan_for
from placet.executor.audit import verify_audit
from placet.proposals.vetting import proposal_flags
from placet.schema import is_by_reference
from placet.store import ProposalRecord, Store
from placet.store.decisions import changed_since_shown, moved_since_shown
from placet.store.host import waiting_note
from placet.store.passkeys import PasskeyRecord, token_hash
from placet.web import pages
from placet.web.ceremonies import Ceremonies
from placet.web.changes import QueueChanges
from placet.web.previews import ContentPages
from placet.web.rules_page import RulesSigning
from placet.web.runs import Runs
from placet.web.session import session_token
from placet.web.sets import SetDecisions, web_proof

__all__ = ["CSP", "Runs", "WebConfig", "bind_listener", "check_listen", "create_app"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
EXTEND_MINUTES = 15
BODY_MAX = 1 << 20
"""Most bytes of a JSON request body (an accept lists at most a page of unticked ops)."""
_STATIC = {"placet.js": "text/javascript", "placet.css": "text/css"}
_DONE = ("succeeded", "failed", "interrupted", "discarded", "expired", "withdrawn")


def utc_now() -> datetime:
    return datetime.now(UTC)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, *, tls: bool) -> None:
    """Refuse a listen address other than loopback without TLS: passkeys need a secure
    context, and the page must not cross a network in clear text.

    Raises:
        UsageError (``insecure_listen``).
    """
    if not tls and not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without TLS: placet web serves other addresses "
            "only over https (passkeys need a secure context); give --cert and --key, or "
            "listen on 127.0.0.1 (the default)",
            code="insecure_listen",
            details={"host": host},
        )


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (IPv6 for an address with a colon), made
    before `placet web` prints its URL and handed to uvicorn, so a port in use is told
    plainly and no other process can take the port between the check and the serving.

    Raises:
        UsageError (``port_in_use``): another process listens there; (``invalid_argument``)
            the address cannot be bound (not this machine's, or a port below 1024 without
            the right to it).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"cannot serve placet web on {host}:{port}: another process is listening "
                "there (a `placet web` already running?); stop it, or choose another port "
                "with --port",
                code="port_in_use",
                details={"host": host, "port": port},
            ) from e
        raise UsageError(
            f"cannot serve placet web on {host}:{port}: {e.strerror or e}",
            details={"host": host, "port": port},
        ) from e
    sock.set_inheritable(False)
    return sock


@dataclass(frozen=True)
class WebConfig:
    """Where the page is served. `name` is the host name in its URLs and the passkeys'
    RP ID (``localhost`` on loopback; under TLS the name the certificate is for)."""

    host: str = "127.0.0.1"
    port: int = 8765
    tls: bool = False
    name: str = "localhost"

    @property
    def origin(self) -> str:
        scheme = "https" if self.tls else "http"
        default = 443 if self.tls else 80
        return f"{scheme}://{self.name}" + ("" if self.port == default else f":{self.port}")

    @property
    def authority(self) -> str:
        return self.origin.split("://", 1)[1]


class Guard:
    """ASGI middleware: security headers, the Host check and the Origin check."""

    def __init__(self, app: ASGIApp, config: WebConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        method = scope["method"]
        response: Response | None = None
        if host != self.config.authority:
            if is_loopback(host.rsplit(":", 1)[0]) and method == "GET":
                query = scope.get("query_string", b"").decode("latin-1")
                target = self.config.origin + scope["path"] + (f"?{query}" if query else "")
                response = RedirectResponse(target, status_code=307)
            else:
                response = PlainTextResponse(
                    f"placet web answers only as {self.config.authority}", status_code=421
                )
        elif method not in ("GET", "HEAD") and headers.get("origin") != self.config.origin:
            response = PlainTextResponse(
                "origin_refused: a change must come from placet's own page "
                f"({self.config.origin}); this request's Origin is "
                f"{headers.get('origin', 'missing')!r}",
                status_code=403,
            )

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                    (b"x-frame-options", b"DENY"),
                ]
                if self.config.tls:
                    extra.append((b"strict-transport-security", b"max-age=31536000"))
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        if response is not None:
            await response(scope, receive, send_secured)
        else:
            await self.app(scope, receive, send_secured)


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


def _refused_json(e: PlacetError, status: int = 409) -> JSONResponse:
    """A refusal as the page's script reads it; a set's names each refused proposal with
    its own code (``refused``)."""
    if isinstance(e, LimitExceeded):
        status = 413
    body: dict[str, Any] = {"ok": False, "code": e.error_code, "message": e.message}
    if isinstance(e, SetRefused):
        body["refused"] = e.details["refused"]
    return JSONResponse(body, status_code=status)


def _not_signed_in() -> PolicyRefused:
    return PolicyRefused(
        "not signed in: sign in with your passkey first (open placet web's page)",
        code="not_signed_in",
    )


async def _json_body(request: Request) -> dict[str, Any]:
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


def _skip_ops(value: object) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise UsageError("skip_ops must be a list of op indexes", code="skip_invalid")
    return sorted(set(value))


def _int(value: str | None, default: int = 0) -> int:
    """A query parameter as a cursor or page number: 0 up to SQLite's largest integer
    (a larger one would not bind), `default` when it is not a number."""
    try:
        return min(max(int(value or default), 0), (1 << 63) - 1)
    except ValueError:
        return default


def create_app(
    store: Store,
    settings: Settings,
    config: WebConfig,
    *,
    clock: Callable[[], datetime] = utc_now,
    runs: Runs | None = None,
) -> Starlette:
    """The `placet web` ASGI app over `store`. `runs` executes accepted proposals
    (default: `placet.executor.execute` in daemon threads); `app.state.runs` holds it.
    `app.state.changes` (`QueueChanges`) starts with the app and feeds the queue page's
    long-poll (`/changes`); call its `release()` before the server drains its requests."""
    ceremonies = Ceremonies(store, settings, config.name, config.origin, clock)
    runs = runs if runs is not None else Runs(store, settings)
    changes = QueueChanges(store)
    contents = ContentPages(store, settings)

    def session_of(request: Request) -> tuple[str, PasskeyRecord] | None:
        token = session_token(request)
        if token is None:
            return None
        key = store.session_passkey(token, now=clock())
        return None if key is None else (token, key)

    Handler = Callable[[Request], Awaitable[Response]]

    def page_route(fn: Callable[[Request], Response]) -> Handler:
        """A page that needs a session: else the sign-in page, 401, on which placet's
        script asks again with the session it keeps (in the thread pool)."""

        def page(request: Request) -> Response:
            if session_of(request) is None:
                return _html(pages.signin_page(bool(store.passkeys())), 401)
            try:
                return fn(request)
            except PlacetError as e:
                return _html(pages.refusal_page(e), 404 if e.error_code == "not_found" else 409)

        async def handler(request: Request) -> Response:
            return await run_in_threadpool(page, request)

        return handler

    def queue(request: Request) -> Response:
        version = changes.token()  # before the reads: a change after them is not missed
        after = _int(request.query_params.get("after")) or None
        pending = store.list(["pending"], limit=pages.QUEUE_PAGE + 1, after_id=after)
        more = pending[pages.QUEUE_PAGE - 1].id if len(pending) > pages.QUEUE_PAGE else None
        notice = {
            "discarded": "Discarded.",
            "extended": "Extended by 15 minutes.",
        }.get(request.query_params.get("done", ""), "")
        shown = pending[: pages.QUEUE_PAGE]
        return _html(
            pages.queue_page(
                shown,
                store.counts(),
                clock(),
                next_after=more,
                notice=notice,
                flags=_flag_counts(shown),
                live=version,
            )
        )

    async def changes_poll(request: Request) -> Response:
        """Held open until the store changes (`QueueChanges.wait`): ``{"v": token,
        "closing": bool}``. Signed-in owners only; the token tells nothing."""
        if await run_in_threadpool(session_of, request) is None:
            return _refused_json(_not_signed_in(), 403)
        seen = request.query_params.get("v", "")[:64]
        token = await changes.wait(seen, gone=request.receive)
        if token is None:  # the page is gone: nobody reads an answer
            return Response(status_code=204)
        return JSONResponse({"v": token, "closing": changes.closing.is_set()})

    def view(record: ProposalRecord, page_no: int = 0) -> pages.ProposalView:
        refusal, raw_ops = check_before_accept(store, settings, record)
        ops = []
        flags = []
        if refusal is None or refusal.error_code != "request_altered":
            try:
                ops = plan_for(record.kind, record.request, record.evidence, raw_ops).ops
                flags = proposal_flags(record, ops)
            except PlacetError as e:
                refusal = refusal or e
        return pages.ProposalView(
            record=record,
            ops=ops,
            flags=flags,
            refusal=refusal,
            results=store.op_results(record.id),
            events=store.audit_events(proposal_id=record.id),
            now=clock(),
            page=page_no,
            running=runs.running(record.id),
            run_error=runs.errors.get(record.id),
            waiting=waiting_note(record.status, record.host, record.host_id, store.host_id),
            content=contents.inline(record, ops),
        )

    def proposal(request: Request) -> Response:
        pid = int(request.path_params["pid"])
        record = store.get(pid)
        notice = {"extended": "Extended by 15 minutes."}.get(
            request.query_params.get("done", ""), ""
        )
        return _html(pages.proposal_page(view(record, _int(request.query_params.get("page"))),
                                         notice))  # fmt: skip

    def history(request: Request) -> Response:
        after = _int(request.query_params.get("after")) or None
        statuses = ["approved", "executing", *_DONE]
        records = store.list(
            statuses, limit=pages.QUEUE_PAGE + 1, after_id=after, newest_first=True
        )
        more = records[pages.QUEUE_PAGE - 1].id if len(records) > pages.QUEUE_PAGE else None
        return _html(pages.history_page(records[: pages.QUEUE_PAGE], next_after=more))

    def audit(request: Request) -> Response:
        after = _int(request.query_params.get("after"))
        verification = verify_audit(store) if request.query_params.get("verify") else None
        events = store.audit_events(after_id=after, limit=pages.AUDIT_PAGE)
        alarms = store.counter_alarms()
        return _html(pages.audit_page(events, verification, after=after, alarms=alarms))

    def status_sync(request: Request) -> Response:
        if session_of(request) is None:
            return _refused_json(_not_signed_in(), 403)
        pid = int(request.path_params["pid"])
        try:
            record = store.get(pid)
        except PlacetError as e:
            return _refused_json(e, 404)
        error = runs.errors.get(pid)
        return JSONResponse(
            {
                "status": record.status,
                "running": runs.running(pid),
                "done": not runs.running(pid),
                "error": None if error is None else f"{error.error_code}: {error.message}",
            }
        )

    async def status(request: Request) -> Response:
        return await run_in_threadpool(status_sync, request)

    async def form_action(request: Request, action: str) -> Response:
        if await run_in_threadpool(session_of, request) is None:
            return _html(pages.refusal_page(_not_signed_in()), 403)
        pid = int(request.path_params["pid"])
        reason = None
        if action == "discard":
            form = await request.form()
            reason = str(form.get("reason") or "").strip()[:500] or None

        def decide() -> Response:
            try:
                if action == "discard":
                    shown = Shown.of(store.get(pid))
                    decisions.discard(store, [shown], reason=reason, now=clock())
                    return RedirectResponse("/?done=discarded", status_code=303)
                decisions.extend(store, [pid], minutes=EXTEND_MINUTES, now=clock())
                return RedirectResponse(f"/p/{pid}?done=extended", status_code=303)
            except PlacetError as e:
                return _html(pages.refusal_page(e, back=f"/p/{pid}"), 409)

        return await run_in_threadpool(decide)

    async def discard(request: Request) -> Response:
        return await form_action(request, "discard")

    async def extend(request: Request) -> Response:
        return await form_action(request, "extend")

    def json_endpoint(
        answer: Callable[[Request, str, dict[str, Any]], Response],
    ) -> Callable[[Request], Awaitable[Response]]:
        """A JSON endpoint for a signed-in owner: 403 without a session, else
        `answer(request, session token, JSON body)` run in the thread pool (it does store
        work), a PlacetError as the refusal."""

        async def endpoint(request: Request) -> Response:
            session = await run_in_threadpool(session_of, request)
            if session is None:
                return _refused_json(_not_signed_in(), 403)
            try:
                body = await _json_body(request)
            except PlacetError as e:
                return _refused_json(e)

            def run() -> Response:
                try:
                    return answer(request, session[0], body)
                except PlacetError as e:
                    return _refused_json(e)

            return await run_in_threadpool(run)

        return endpoint

    def proposal_json(
        answer: Callable[[Request, str, int, dict[str, Any]], Response],
    ) -> Callable[[Request], Awaitable[Response]]:
        """`json_endpoint` on proposal `pid`: `answer(request, token, pid, body)`."""
        return json_endpoint(
            lambda request, token, body: answer(
                request, token, int(request.path_params["pid"]), body
            )
        )

    sets = SetDecisions(store, settings, ceremonies, runs, clock)

    @json_endpoint
    def set_options(request: Request, token: str, body: dict[str, Any]) -> Response:
        return JSONResponse(sets.options(token, body))

    @json_endpoint
    def set_accept(request: Request, token: str, body: dict[str, Any]) -> Response:
        return JSONResponse(sets.accept(request, token, body))

    rules = RulesSigning(store, settings, clock)

    def rules_view(request: Request) -> Response:
        return _html(rules.page())

    @json_endpoint
    def rules_options(request: Request, token: str, body: dict[str, Any]) -> Response:
        make = rules.issue(token_hash(token), body, ceremonies.expiry())
        return JSONResponse(ceremonies.options(make))

    @json_endpoint
    def rules_sign(request: Request, token: str, body: dict[str, Any]) -> Response:
        issued = ceremonies.challenges.take(body.get("nonce"), "rules")
        if issued.session != token_hash(token):
            raise PolicyRefused(
                "refusing to sign the rules: the passkey answer was asked for by another "
                "session; nothing was kept",
                code="challenge_invalid",
            )
        what = "refusing to sign the rules"
        key, kept = ceremonies.verify_assertion(issued, body.get("credential"), what)
        digest = rules.keep(issued, {**kept, "nonce": body["nonce"]}, key.id)
        return JSONResponse({"ok": True, "rules_sha256": digest})

    @proposal_json
    def accept_options(request: Request, token: str, pid: int, body: dict[str, Any]) -> Response:
        shown = body.get("request_hash")
        record = store.get(pid)
        if shown != record.request_hash:
            raise changed_since_shown(pid, record.request_hash, shown)
        skip = _skip_ops(body.get("skip_ops"))
        # every refusal (the selection's included) before the passkey is asked
        decisions.check(store, settings, Shown.of(record, skip), now=clock(), signed=True)
        return JSONResponse(ceremonies.accept_options(token_hash(token), record, skip))

    @proposal_json
    def accept(request: Request, token: str, pid: int, body: dict[str, Any]) -> Response:
        issued = ceremonies.challenges.take(body.get("nonce"), "accept")
        if issued.proposal_id != pid or issued.session != token_hash(token):
            raise PolicyRefused(
                f"refusing to accept proposal {pid}: the passkey answer was made for "
                f"another request (proposal {issued.proposal_id}); nothing was approved",
                code="challenge_invalid",
                details={"proposal_id": pid},
            )
        assert issued.request_hash is not None
        record = store.get(pid)
        if (record.host_id, record.drive_spec) != (
            issued.bound.get("host_id"),
            issued.bound.get("drive_spec"),
        ):
            raise moved_since_shown(pid)
        shown = Shown(pid, issued.request_hash, record.status, frozenset(issued.skip_ops))
        # every refusal before the assertion is verified (its sign count is then spent)
        checked = decisions.check(store, settings, shown, now=clock(), signed=True)
        key, kept = ceremonies.verify_assertion(
            issued, body.get("credential"), f"refusing to accept proposal {pid}"
        )
        proof = web_proof(request, key, kept, body["nonce"])
        shown = Shown(pid, shown.request_hash, shown.status, shown.skip_ops, checked.plan)
        [accepted] = decisions.accept(store, settings, [shown], proof, now=clock())
        if accepted.runs_here:
            runs.start(accepted)  # else its own host's placet runs it (`placet.store.host`)
        return JSONResponse({"ok": True, "status": "approved", "waiting": accepted.waiting})

    async def signin_options(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(ceremonies.signin_options))

    async def session_for(
        request: Request,
        refused: int,
        ceremony: Callable[[dict[str, Any]], tuple[PasskeyRecord, dict[str, Any]]],
    ) -> Response:
        """Run `ceremony` on the request's JSON body (in a thread) and sign the browser in
        as the passkey it proves, answering its JSON; a refusal answers status `refused`."""
        try:
            body = await _json_body(request)
        except PlacetError as e:
            return _refused_json(e, refused)

        def sign_in() -> Response:
            try:
                key, answer = ceremony(body)
            except PlacetError as e:
                return _refused_json(e, refused)
            # the token goes to placet's own script only (`placet.web.session`)
            session = store.open_session(key.id, now=clock())
            return JSONResponse({**answer, "session": session})

        return await run_in_threadpool(sign_in)

    async def signin(request: Request) -> Response:
        def assertion(body: dict[str, Any]) -> tuple[PasskeyRecord, dict[str, Any]]:
            issued = ceremonies.challenges.take(body.get("nonce"), "signin")
            key, _ = ceremonies.verify_assertion(issued, body.get("credential"), "signing in")
            return key, {"ok": True}

        return await session_for(request, 403, assertion)

    def signout_sync(request: Request) -> Response:
        token = session_token(request)
        if token is None or session_of(request) is None:
            return _html(pages.refusal_page(_not_signed_in()), 403)
        store.close_session(token)
        return RedirectResponse("/", status_code=303)

    async def signout(request: Request) -> Response:
        return await run_in_threadpool(signout_sync, request)

    def pair_page_sync(request: Request) -> Response:
        token = request.path_params["token"]
        try:
            ceremonies.check_pairing(token)
        except PlacetError as e:
            return _html(pages.pair_page(token, e), 410)
        return _html(pages.pair_page(token, None))

    async def pair_page(request: Request) -> Response:
        return await run_in_threadpool(pair_page_sync, request)

    def pair_options_sync(request: Request) -> Response:
        try:
            return JSONResponse(ceremonies.registration_options(request.path_params["token"]))
        except PlacetError as e:
            return _refused_json(e, 410)

    async def pair_options(request: Request) -> Response:
        return await run_in_threadpool(pair_options_sync, request)

    async def pair(request: Request) -> Response:
        def registration(body: dict[str, Any]) -> tuple[PasskeyRecord, dict[str, Any]]:
            key = ceremonies.register(request.path_params["token"], body)
            return key, {"ok": True, "passkey_id": key.id}

        return await session_for(request, 410, registration)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return PlainTextResponse("not found", status_code=404)
        data = resources.files("placet.web").joinpath("static", name).read_bytes()
        return Response(data, media_type=_STATIC[name])

    routes = [
        Route("/", page_route(queue)),
        Route("/changes", changes_poll),
        Route("/p/{pid:int}", page_route(proposal)),
        Route("/p/{pid:int}/status", status),
        Route("/p/{pid:int}/discard", discard, methods=["POST"]),
        Route("/p/{pid:int}/extend", extend, methods=["POST"]),
        Route("/p/{pid:int}/challenge", accept_options, methods=["POST"]),
        Route("/p/{pid:int}/accept", accept, methods=["POST"]),
        Route("/set/challenge", set_options, methods=["POST"]),
        Route("/set/accept", set_accept, methods=["POST"]),
        Route("/history", page_route(history)),
        Route("/rules", page_route(rules_view)),
        Route("/rules/challenge", rules_options, methods=["POST"]),
        Route("/rules/sign", rules_sign, methods=["POST"]),
        Route("/audit", page_route(audit)),
        Route("/signin/options", signin_options, methods=["POST"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout, methods=["POST"]),
        Route("/pair/{token}", pair_page),
        Route("/pair/{token}/options", pair_options, methods=["POST"]),
        Route("/pair/{token}", pair, methods=["POST"]),
        Route("/static/{name}", static),
        *contents.routes(page_route, lambda request: session_of(request) is not None),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        changes.start(asyncio.get_running_loop())
        try:
            yield
        finally:
            await run_in_threadpool(changes.close)
            await run_in_threadpool(contents.close)

    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(Guard, config=config)
    app.state.runs = runs
    app.state.changes = changes
    app.state.ceremonies = ceremonies
    return app


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
