"""An op's content preview as the shells get it: each file's bytes and how they are bound
to the evidence, and the one rendering of both (`render_op`).

An op writes one file (`new`) and may replace one (`current`: the target's bytes now).
Each side says how its bytes are tied to the digest the evidence recorded, which is
what the owner approves and the executor re-checks: ``same_read`` (kept by the read
that computed the digest, when proposed), ``digest`` (the whole file read, its digest
matches), ``unchecked`` (only the first bytes of a larger file read, so no digest could
be checked), ``changed`` (its digest, size, mtime or first bytes differ, or it is gone:
no content is shown, since the executor refuses such an op as `stale` and these bytes
would never land), ``unavailable`` (why is said) and ``off`` (`preview_op_bytes` 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from placet.display import already_inert, size_text
from placet.preview.render import (
    DEFAULT_LIMITS,
    Content,
    Limits,
    Line,
    Rendering,
    render_new,
    render_replacement,
)

__all__ = ["Binding", "OpPreview", "Side", "render_op", "side_line"]

Binding = Literal["same_read", "digest", "unchecked", "changed", "unavailable", "off"]
CHANGED = "changed since proposed"


@dataclass(frozen=True)
class Side:
    """One file of an op's preview.

    Attributes:
        role: ``new`` (the bytes the op writes) or ``current`` (the bytes it replaces).
        where: ``local`` or ``remote``: where the file is read.
        binding: see the module docstring.
        content: the bytes shown; None unless `binding` is same_read, digest or unchecked.
        message: placet's words on why it changed or is unavailable (inert already).
    """

    role: str
    where: str
    binding: Binding
    content: Content | None = None
    message: str = ""


@dataclass(frozen=True)
class OpPreview:
    """The preview of op `op_index` (its `kind`): `new` None for an op that writes no
    file (mkdir), `current` None when it replaces nothing."""

    op_index: int
    kind: str
    new: Side | None
    current: Side | None


def side_line(side: Side) -> str:
    """One line saying what `side` shows and how it is bound (placet's words, inert)."""
    what = ("the new content" if side.role == "new" else "the file it replaces") + (
        " (on the drive)" if side.where == "remote" else " (local)"
    )
    c = side.content
    if side.binding == "changed":
        return f"{what}: {CHANGED}" + (f": {side.message}" if side.message else "") + "; not shown"
    if side.binding == "unavailable":
        return f"{what}: not shown: {side.message}"
    if side.binding == "off":
        return f"{what}: not shown: previews are off (preview_op_bytes = 0)"
    assert c is not None
    if side.binding == "same_read":
        how = "captured by the read that computed its digest when proposed"
    elif side.binding == "digest":
        how = "read whole; its digest matches the evidence"
    else:
        how = (
            f"partial, unchecked: only the first {size_text(len(c.data))} of "
            f"{size_text(c.size)} were read, so its digest could not be checked"
        )
    if side.message:
        how += f"; {side.message}"
    return f"{what}: {how}"


def render_op(preview: OpPreview, limits: Limits = DEFAULT_LIMITS) -> Rendering:
    """The rendering of one op's preview: a diff when both sides are shown, the new
    file's lines when only it is, and only notes when the new content is not shown."""
    new, current = preview.new, preview.current
    if new is None:
        return Rendering("writes no file (nothing to preview)", ())
    notes = [Line("note", already_inert(side_line(s))) for s in (new, current) if s is not None]
    if new.content is None:
        title = CHANGED if new.binding == "changed" else "content not shown"
        return Rendering(title, tuple(notes))
    if current is not None and current.content is not None:
        shown = render_replacement(current.content, new.content, limits)
    else:
        shown = render_new(new.content, limits)
    return Rendering(
        shown.title,
        (*notes, *shown.lines),
        added=shown.added,
        removed=shown.removed,
        image=shown.image,
    )
