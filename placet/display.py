"""Plain-text forms of stored JSON for people: op failures, audit details, durations.

The review UI and the `placet show | audit` commands show the same stored values (an op
result's detail, an audit event's detail). Dumping them as JSON and then escaping the
JSON made them unreadable: JSON's own ``\\u2014`` escapes were escaped a second time
(``\\\\u2014``), and a failure's message sat behind a truncated ``{"code": ...}``. Here
each string goes through `placet.text` exactly once (DESIGN.md section 9, "Untrusted
text"): `inert` (control, format and bidi characters escaped) or `inert_with_ascii`
(the original plus an escaped ASCII form when it holds non-ASCII). A failure is shown
as its ``code: message`` line first, its details after. Stdlib only.

`missing_folders_line` states what an upload or mkdir creates besides its target: the
executor (rclone) creates a missing remote parent on the way, so the owner must be told.
The evidence key ``missing_parents`` (drive-relative folders absent when proposed,
outermost first; `placet.proposing` records it for every upload or mkdir below the
drive's top) says which; proposals whose evidence does not record it (made before placet
recorded it) get a line that says the parent was not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placet.text import inert, inert_with_ascii, is_unsafe_char

__all__ = [
    "already_inert",
    "duration",
    "failure_line",
    "missing_folders_line",
    "plain",
    "plain_pairs",
]

_FAILURE_KEYS = ("code", "message", "retryable")


def already_inert(s: str) -> str:
    """Text placet escaped already (a risk flag's message, built with `inert`): its
    backslash sequences are kept, so ``\\u202e`` is not escaped a second time; a raw
    unsafe character that slipped in is still escaped."""
    return "".join(inert(c) if c != "\\" and is_unsafe_char(c) else c for c in s)


def plain(value: Any, *, ascii_forms: bool = True) -> str:
    """`value` (a JSON value) as one line of text, every string rendered once.

    Strings are shown unquoted through `inert_with_ascii` (or `inert` when
    `ascii_forms` is false); dicts as ``{k: v, ...}`` in key order, lists as
    ``[a, b]``; numbers, booleans and None as in Python's `str`.
    """
    show: Callable[[str], str] = inert_with_ascii if ascii_forms else inert
    if isinstance(value, str):
        return show(value)
    if isinstance(value, dict):
        inner = ", ".join(
            f"{show(str(k))}: {plain(value[k], ascii_forms=ascii_forms)}"
            for k in sorted(value, key=str)
        )
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(plain(v, ascii_forms=ascii_forms) for v in value) + "]"
    return inert(str(value))


def plain_pairs(detail: dict[str, Any], *, ascii_forms: bool = True) -> str:
    """A detail dict as ``k=v  k=v`` (keys sorted; values as `plain`); '' for {}."""
    return "  ".join(
        f"{inert(str(k))}={plain(detail[k], ascii_forms=ascii_forms)}"
        for k in sorted(detail, key=str)
    )


def failure_line(
    detail: dict[str, Any], *, ascii_forms: bool = True
) -> tuple[str | None, dict[str, Any]]:
    """Split an op result's detail into its ``code: message`` line and the rest.

    Returns:
        (``"code: message"`` or None when `detail` has no code or message, the remaining
        keys other than ``retryable``: ``details``, ``temps``, success facts...).
    """
    code, message = detail.get("code"), detail.get("message")
    rest = {
        k: v for k, v in detail.items() if k not in _FAILURE_KEYS and not (k == "details" and not v)
    }
    if code is None and message is None:
        return None, rest
    show: Callable[[str], str] = inert_with_ascii if ascii_forms else inert
    parts = [show(str(p)) for p in (code, message) if p is not None]
    return ": ".join(parts), rest


def duration(seconds: float) -> str:
    """A span for people in one uniform form: ``45s``, ``28m32s``, ``23h51m``, ``3d04h``."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    m, sec = divmod(s, 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


MISSING_PARENTS_KEY = "missing_parents"
"""Evidence key of an upload or mkdir: the remote parent folders that did not exist when
it was proposed (drive-relative, outermost first); absent when placet did not check."""


def missing_folders_line(
    kind: str, request: dict[str, Any], evidence: dict[str, Any]
) -> str | None:
    """The line that says which remote folders executing `kind` creates besides its target.

    Returns:
        ``"creates missing folders: A, A/B"`` when the evidence lists missing parents;
        ``"creates missing folders: A/B, or the part of it that is absent at execution
        (not checked when proposed)"`` when the evidence does not say and the parent is not
        the drive's top; None for other kinds, a parent at the top, or an empty list.
        Names are shown through `inert_with_ascii`.
    """
    if kind not in ("upload", "mkdir"):
        return None
    parent = request.get("remote_parent")
    if not isinstance(parent, str) or not parent:
        return None
    recorded = evidence.get(MISSING_PARENTS_KEY)
    if isinstance(recorded, list):
        folders = [inert_with_ascii(str(f)) for f in recorded if f]
        return f"creates missing folders: {', '.join(folders)}" if folders else None
    return (
        f"creates missing folders: {inert_with_ascii(parent)}, or the part of it that is "
        "absent at execution (not checked when proposed)"
    )
