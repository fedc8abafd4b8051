"""HTML for `placet web`: the page frame and the pieces every page uses.

Every string that came from an agent, a file name or the remote reaches the page through
`text` (or `path`): made inert first (`placet.text.inert`: control, format and bidi
characters as visible escapes, docs/design.md section 9, "Untrusted text") and then
HTML-escaped, so markup in an agent's reason is shown literally, never parsed. placet's
own messages that already carry inert text go through `said` (`already_inert`, so an
escape is not escaped twice). No inline script or style: the page loads one script and
one stylesheet from `/static/` (the CSP forbids anything else).
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from placet.display import already_inert
from placet.text import inert, inert_with_ascii

__all__ = ["Html", "attr", "page", "path", "path_end", "said", "text"]


class Html(str):
    """Markup placet built (safe to concatenate into a page as is)."""

    __slots__ = ()


def text(s: object) -> Html:
    """Untrusted text, inert and escaped."""
    return Html(html.escape(inert(str(s)), quote=True))


def path(s: object) -> Html:
    """An untrusted path, inert with its ASCII form when it has non-ASCII characters."""
    return Html(html.escape(inert_with_ascii(str(s)), quote=True))


def path_end(s: object) -> Html:
    """An untrusted path on one line that narrow screens cut in front, never at its end:
    its last segment whole, the rest before it cut with an ellipsis at its start (the
    stylesheet's ``.pathend``), so two files of one folder stay told apart at 390 px.
    A path with non-ASCII characters gets its ASCII form on the next line."""
    shown = inert(str(s))
    head, _, tail = shown.rpartition("/")
    parts = (
        f'<span class="head"><span dir="ltr">{html.escape(head + "/", quote=True)}</span></span>'
        if head or shown.startswith("/")
        else ""
    )
    last = html.escape(tail, quote=True)
    out = f'<span class="pathend">{parts}<span class="tail">{last}</span></span>'
    full = inert_with_ascii(str(s))
    if full != shown:
        out += f'<span class="ascii">{html.escape(full[len(shown) :].strip(), quote=True)}</span>'
    return Html(out)


def said(s: object) -> Html:
    """A message placet wrote (its untrusted parts already inert), escaped."""
    return Html(html.escape(already_inert(str(s)), quote=True))


def attr(s: object) -> Html:
    """A value placet made (ids, hashes, numbers) for an attribute."""
    return Html(html.escape(str(s), quote=True))


def join(parts: Iterable[str]) -> Html:
    return Html("".join(parts))


def page(title: str, body: str, *, signed_in: bool = True) -> Html:
    """A whole page: the frame, the navigation (when signed in) and `body` (markup)."""
    nav = (
        '<nav><a href="/">Queue</a><a href="/history">History</a><a href="/audit">Audit</a>'
        '<a href="/rules">Rules</a>'
        '<form method="post" action="/signout" class="inline">'
        '<button type="submit" class="link">Sign out</button></form></nav>'
        if signed_in
        else ""
    )
    return Html(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        f"<title>{html.escape(title)} · placet</title>"
        '<link rel="stylesheet" href="/static/placet.css">'
        '<script src="/static/placet.js" defer></script>'
        "</head><body>"
        f'<header><a class="brand" href="/">placet</a>{nav}</header>'
        f"<main>{body}</main></body></html>\n"
    )
