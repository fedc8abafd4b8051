"""Preview bytes as lines the owner reads: pure functions, no I/O, nothing raw.

Bytes are text when they decode strictly, as UTF-8 or as the encoding a byte-order mark
declares (UTF-8, UTF-16, UTF-32), and hold no NUL; a partial preview's last character
may be cut, and is held back rather than refused. Anything else is binary, told by its
magic number (`placet.preview.magic`) and size, never shown as characters.

A new file shows its first lines; a replacement the unified diff of the current bytes to
the new ones (`placet.preview.diffing`, difflib's hunks) with its line counts (+N -M).
Every shown line is cut to a width, and the lines to a count, each cut said in a note;
the diff compares at most `DIFF_INPUT_LINES` lines a side. Lines are split on LF only
(CRLF's CR dropped), so a line or paragraph separator in the bytes stays visible in its
line. Every line is made inert (`placet.text.inert`, tabs expanded first): escapes, bidi
controls and the like show as visible escapes, and shells render the text as data,
never as markup (docs/design.md section 9, "Untrusted text").
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from placet.display import size_text
from placet.preview.diffing import DiffLine, line_diff
from placet.preview.magic import FileType, sniff, sniff_weak
from placet.text import inert

__all__ = [
    "DEFAULT_LIMITS",
    "DIFF_INPUT_LINES",
    "Content",
    "Limits",
    "Line",
    "Rendering",
    "decode_text",
    "render_new",
    "render_replacement",
]

DIFF_INPUT_LINES = 100_000
"""Lines of each side the diff compares at most (the rest is said in a note)."""

_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8", "UTF-8 with BOM"),
    (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32BE"),
    (b"\xff\xfe", "utf-16-le", "UTF-16LE"),
    (b"\xfe\xff", "utf-16-be", "UTF-16BE"),
)


@dataclass(frozen=True)
class Limits:
    """How much a shell shows: `lines` of a new file, `diff_lines` of a diff, `width`
    characters of one line."""

    lines: int = 400
    diff_lines: int = 1000
    width: int = 240


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Content:
    """Preview bytes: `data` from offset 0, `size` the whole file's (None: unknown)."""

    data: bytes
    size: int | None

    @property
    def partial(self) -> bool:
        return self.size is None or len(self.data) < self.size


@dataclass(frozen=True)
class Line:
    """One shown line: `kind` is ``text`` (a new file's line), ``hunk``, ``context``,
    ``del``, ``add`` or ``note`` (placet's own words); `text` is inert; `cut` the
    characters of the file's line not shown."""

    kind: str
    text: str
    cut: int = 0


@dataclass(frozen=True)
class Rendering:
    """What a shell shows of an op's content: `title` (one line), `lines`, the diff's
    counts (None when no diff), and the content type of a thumbnail of the new bytes
    (``image/png``...; None when they are not an image placet shows)."""

    title: str
    lines: tuple[Line, ...]
    added: int | None = None
    removed: int | None = None
    image: str | None = None


def decode_text(data: bytes, *, partial: bool) -> tuple[str, str] | None:
    """(`data` as text, the encoding's name), or None when it is not text: not valid
    in its encoding, or (UTF-8) holding a NUL. `partial`: the bytes were cut, so an
    incomplete last character is dropped, not refused."""
    encoding, name, body = "utf-8", "UTF-8", data
    for bom, enc, label in _BOMS:
        if data.startswith(bom):
            encoding, name, body = enc, label, data[len(bom) :]
            break
    try:
        text = codecs.getincrementaldecoder(encoding)(errors="strict").decode(
            body, final=not partial
        )
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    return text, name


def _lines(text: str) -> list[str]:
    """`text` split on LF, each line's CR of a CRLF dropped; no empty last line after a
    final LF."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [s[:-1] if s.endswith("\r") else s for s in lines]


def _shown(kind: str, s: str, width: int) -> Line:
    """A file's line as a `Line`: tabs expanded, cut to `width` characters, inert."""
    cut = max(len(s) - width, 0)
    head = s[:width] if cut else s
    if "\t" in head:
        head = head.expandtabs(4)[:width]
    return Line(kind, inert(head), cut)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _note(s: str) -> Line:
    return Line("note", s)


def _kind(content: Content) -> tuple[str, str] | FileType | None:
    """Text (text, encoding), a binary `FileType`, or None (binary of unknown type)."""
    strong = sniff(content.data)
    if strong is not None:
        return strong
    text = decode_text(content.data, partial=content.partial)
    if text is not None:
        return text
    return sniff_weak(content.data)


def _read_note(content: Content) -> list[Line]:
    if not content.partial:
        return []
    whole = "of unknown size" if content.size is None else f"of {size_text(content.size)}"
    return [_note(f"only the first {size_text(len(content.data))} {whole} were read")]


def _binary_title(kind: FileType | None, content: Content) -> str:
    what = kind.name if kind is not None else "binary data of unknown type"
    return f"{what}, {size_text(content.size)}"


def render_new(content: Content, limits: Limits = DEFAULT_LIMITS) -> Rendering:
    """A new file: its first lines (text) or its type and size (binary)."""
    kind = _kind(content)
    if not isinstance(kind, tuple):
        image = kind.mime if kind is not None and kind.thumbnail else None
        return Rendering(_binary_title(kind, content), tuple(_read_note(content)), image=image)
    text, encoding = kind
    lines = _lines(text)
    if not lines:
        return Rendering(f"text ({encoding}), empty", tuple(_read_note(content)))
    shown = [_shown("text", s, limits.width) for s in lines[: limits.lines]]
    notes = _read_note(content)
    if len(lines) > limits.lines:
        more = _count(len(lines) - limits.lines, "more line")
        notes.insert(0, _note(f"... {more} not shown"))
    read = "read" if content.partial else "in all"
    title = f"text ({encoding}), {_count(len(lines), 'line')} {read}, {size_text(content.size)}"
    return Rendering(title, (*shown, *notes))


def _diff_side(lines: list[str], side: str) -> tuple[list[str], list[Line]]:
    if len(lines) <= DIFF_INPUT_LINES:
        return lines, []
    left = len(lines) - DIFF_INPUT_LINES
    note = f"only the first {DIFF_INPUT_LINES} lines of the {side} are compared ({left} more)"
    return lines[:DIFF_INPUT_LINES], [_note(note)]


def _take(lines: Iterable[DiffLine], n: int, width: int) -> tuple[list[Line], int]:
    """The first `n` of `lines` as shown, and how many more there were (not rendered)."""
    it: Iterator[DiffLine] = iter(lines)
    first = [
        Line("hunk", d.text) if d.kind == "hunk" else _shown(d.kind, d.text, width)
        for d in islice(it, n)
    ]
    return first, sum(1 for _ in it)


def render_replacement(
    current: Content, new: Content, limits: Limits = DEFAULT_LIMITS
) -> Rendering:
    """A replacement: the unified diff of `current` to `new` when both are text, else
    what each is (type and size) and the new file's lines when it is text."""
    old_kind, new_kind = _kind(current), _kind(new)
    if not isinstance(old_kind, tuple) or not isinstance(new_kind, tuple):
        was = (
            f"text ({old_kind[1]})"
            if isinstance(old_kind, tuple)
            else _binary_title(old_kind, current)
        )
        shown = render_new(new, limits)
        title = f"{shown.title}; replaces {was}"
        notes = [_note(f"no line diff: the file it replaces is {was}")]
        if not isinstance(old_kind, tuple) and not isinstance(new_kind, tuple):
            notes = [_note("no line diff between binary files")]
        return Rendering(title, (*notes, *shown.lines, *_read_note(current)), image=shown.image)
    old_lines, old_notes = _diff_side(_lines(old_kind[0]), "current file")
    new_lines, new_notes = _diff_side(_lines(new_kind[0]), "new file")
    diff, added, removed = line_diff(old_lines, new_lines)
    lines, more = _take(diff, limits.diff_lines, limits.width)
    notes = [*old_notes, *new_notes]
    if more:
        rest = _count(more, "more diff line")
        notes.insert(0, _note(f"... {rest} not shown (+{added} -{removed} in all)"))
    if not lines:
        notes.insert(0, _note("the compared bytes are the same"))
    if current.partial or new.partial:
        notes.append(_note("the diff compares the bytes read, not the whole files:"))
        notes += [Line("note", f"  current: {n.text}") for n in _read_note(current)]
        notes += [Line("note", f"  new: {n.text}") for n in _read_note(new)]
    encodings = new_kind[1] if new_kind[1] == old_kind[1] else f"{old_kind[1]} -> {new_kind[1]}"
    title = (
        f"text ({encodings}), +{added} -{removed} lines, "
        f"{size_text(current.size)} -> {size_text(new.size)}"
    )
    return Rendering(title, (*lines, *notes), added=added, removed=removed)
