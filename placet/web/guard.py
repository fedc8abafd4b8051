"""The edge of `placet web`: headers on every response, the Host and the Origin checks.

A strict Content-Security-Policy, `no-store`, `nosniff`, Referrer-Policy ``same-origin``
and no framing on every answer (docs/security.md, "placet web and passkeys"); a Host
other than this server's is refused (``127.0.0.1:PORT`` redirects to
``localhost:PORT``); every state change is a POST from this origin (``origin_refused``).
The session a change also needs travels in a header, never a cookie (`placet.web.session`).
"""

from __future__ import annotations

from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from placet.web.listen import WebConfig, is_loopback

__all__ = ["CSP", "Guard"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


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
