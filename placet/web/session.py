"""The session credential of `placet web`: scoped to placet's origin, never a cookie.

Cookies ignore ports: one set by ``http://localhost:8765`` is sent to every server on
``localhost``, an agent's dev server included, and SameSite does not help (other ports
are the same site). So the token a sign-in opens (`Store.open_session`) is answered in
the sign-in's JSON, kept by the page's own script in the origin's localStorage (scheme,
host *and port*: no other origin can read it, and the browser sends it nowhere by itself)
and sent by that script, to this origin only, as the ``X-Placet-Session`` header. A page
navigated to without it is answered 401 with the sign-in page, on which the script, when
it holds a token, reads the page again with the header (`static/placet.js`, `show`).
docs/security.md, "The session is scoped to placet's origin", weighs the other designs.
"""

from __future__ import annotations

from starlette.requests import Request

__all__ = ["SESSION_HEADER", "session_token"]

SESSION_HEADER = "X-Placet-Session"
_LONGEST = 128
"""A token is 43 characters (`secrets.token_urlsafe(32)`); a longer header is no token."""


def session_token(request: Request) -> str | None:
    """The session token the request carries in its ``X-Placet-Session`` header, or None.
    A cookie, whoever sent it, is never read."""
    token = request.headers.get(SESSION_HEADER, "").strip()
    return token if 0 < len(token) <= _LONGEST else None
