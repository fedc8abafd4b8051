"""Rendering untrusted text: the one function every screen and every CLI line goes through.

Anything from an agent, a file name or the remote is data, not terminal input: a raw ESC
starts a control sequence (clear the screen, set the clipboard), C1 bytes are one-byte
CSIs on some terminals, bidi overrides reorder a name, separators break a one-line
field. `inert` shows every such character as a visible escape and never emits it raw
(docs/design.md section 9, "Untrusted text"): categories Cc, Cf, Zl, Zp, Cs, Cn, the
invisible Hangul fillers, and the backslash itself (so a typed ``\x1b`` and a real ESC
differ). Rich markup is a separate hazard `inert` leaves alone: untrusted text reaches
Rich or Textual only as ``Text(inert(s))`` or ``Content(inert(s))``, never as markup.
Stdlib only (the core never imports Rich or Textual); also terminal cell widths."""

from __future__ import annotations

import unicodedata

from placet.errors import UsageError

__all__ = [
    "INVISIBLE_LETTERS",
    "ascii_escape",
    "cell_width",
    "fit_cells",
    "inert",
    "inert_with_ascii",
    "is_unsafe_char",
    "one_line_reason",
    "quote",
]

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})
INVISIBLE_LETTERS = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0"})
"""Hangul fillers: letters by category, invisible on screen (used to forge "identical"
names); treated as format characters."""
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}
_REASON_LIMIT = 200


def _escape_char(c: str) -> str:
    short = _SHORT.get(c)
    if short is not None:
        return short
    n = ord(c)
    if n <= 0xFF:
        return f"\\x{n:02x}"
    if n <= 0xFFFF:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def is_unsafe_char(c: str) -> bool:
    """True if `c` (one character) must never reach a terminal raw."""
    return c == "\\" or unicodedata.category(c) in _UNSAFE_CATEGORIES or c in INVISIBLE_LETTERS


def inert(s: str) -> str:
    """Return `s` with every unsafe character replaced by a visible escape.

    Printable text, including non-ASCII letters and Rich-markup brackets, is kept as is.
    ``\\t \\n \\r \\\\`` use their short escapes; other characters up to U+00FF are
    ``\\xNN``, the rest of the BMP ``\\uNNNN``, beyond it ``\\UNNNNNNNN``.
    The result never contains a character of category Cc, Cf, Zl, Zp, Cs or Cn, so it is
    one line and safe to write to a terminal (Rich markup aside: see the module doc).
    """
    if s.isascii() and s.isprintable() and "\\" not in s:
        return s  # fast path: the common case of a plain ASCII name
    return "".join(_escape_char(c) if is_unsafe_char(c) else c for c in s)


def quote(s: str) -> str:
    """`s` made inert (`inert`) between single quotes: how a message names a path or value."""
    return f"'{inert(s)}'"


def ascii_escape(s: str) -> str:
    """`s` in printable ASCII only: like `inert`, and every non-ASCII character escaped too."""
    return "".join(
        c if (c.isascii() and c.isprintable() and c != "\\") else _escape_char(c) for c in s
    )


def inert_with_ascii(s: str) -> str:
    """`inert(s)`, followed by its escaped ASCII form when `s` has a non-ASCII character
    that `inert` shows as itself (not when `inert` already escaped every one, e.g. bidi).

    ``"caf\\u00e9"`` renders as ``café (ASCII: caf\\xe9)``, so a Cyrillic ``а`` in a
    Latin-looking name is visible to the owner (docs/design.md section 9).
    """
    shown = inert(s)
    if s.isascii():
        return shown
    plain = ascii_escape(s)
    if plain == shown:  # every non-ASCII character was already shown escaped (bidi, ...)
        return shown
    return f"{shown} (ASCII: {plain})"


def _cells(c: str) -> int:
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def cell_width(s: str) -> int:
    """Terminal cells `s` takes: wide and fullwidth letters 2, combining marks 0, else 1
    (for text already made `inert`: no control or format characters)."""
    return len(s) if s.isascii() else sum(_cells(c) for c in s)


def fit_cells(s: str, cols: int, ellipsis: str = "\u2026") -> str:
    """`s` cut to at most `cols` terminal cells (`cell_width`), ending in `ellipsis` (one
    cell per character) when cut; unchanged when it fits."""
    if cell_width(s) <= cols:
        return s
    out, used, room = [], 0, cols - len(ellipsis)
    for c in s:
        if used + _cells(c) > room:
            break
        out.append(c)
        used += _cells(c)
    return "".join(out) + ellipsis[: max(0, cols - used)]


def fit_path_end(path: str, cols: int, ellipsis: str = "\u2026") -> str:
    """`path` (text already made `inert`) in at most `cols` cells, told apart by its end:
    the file name and as many whole trailing segments as fit, `ellipsis` in front
    (``…/backup/todo.txt``); a file name longer than `cols` keeps its last cells.
    Unchanged when it fits."""
    if cell_width(path) <= cols:
        return path
    room = cols - cell_width(ellipsis)
    segments = path.split("/")
    kept = segments[-1]
    for segment in reversed(segments[:-1]):
        longer = f"{segment}/{kept}"
        if cell_width("/" + longer) > room:
            break
        kept = longer
    if cell_width("/" + kept) <= room:
        return f"{ellipsis}/{kept}"
    tail, used = [], 0
    for c in reversed(kept):
        if used + _cells(c) > room:
            break
        tail.append(c)
        used += _cells(c)
    return ellipsis + "".join(reversed(tail)) if room > 0 else ellipsis[: max(0, cols)]


def fit_utf8(s: str, limit: int, ellipsis: str = "\u2026") -> str:
    """`s` cut so that its UTF-8 encoding takes at most `limit` bytes, at a character
    boundary (never inside a multibyte character), ending in `ellipsis` when cut."""
    data = s.encode()
    if len(data) <= limit:
        return s
    room = max(0, limit - len(ellipsis.encode()))
    # A prefix of valid UTF-8 is valid but for a character cut at its end: dropped here.
    return data[:room].decode(errors="ignore") + ellipsis


def one_line_reason(s: str, limit: int = _REASON_LIMIT) -> str:
    """Validate an agent's reason: one non-empty line of at most `limit` characters.

    Returns:
        The reason with surrounding whitespace stripped.

    Raises:
        UsageError: empty, holds a line break, line/paragraph separator or any other
            control character, or is longer than `limit` characters (code points) after
            stripping. Format characters (e.g. a bidi mark in Hebrew text) are allowed;
            they are shown escaped.
    """
    reason = s.strip()
    if not reason:
        raise UsageError(
            "the reason is empty; give one line saying why this change is needed",
            details={"field": "reason"},
        )
    bad = next((c for c in reason if unicodedata.category(c) in {"Cc", "Zl", "Zp"}), None)
    if bad is not None:
        raise UsageError(
            f"the reason holds a line break or control character ({_escape_char(bad)}): "
            f"{inert(reason[:60])}{'...' if len(reason) > 60 else ''}; "
            "give the reason as one line of plain text",
            details={"field": "reason", "character": _escape_char(bad)},
        )
    if len(reason) > limit:
        raise UsageError(
            f"the reason is {len(reason)} characters long; the limit is {limit}: "
            "shorten it to one line",
            details={"field": "reason", "length": len(reason), "limit": limit},
        )
    return reason
