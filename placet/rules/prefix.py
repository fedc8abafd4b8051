"""Whether a path lies under a rule's folder: segment by segment, never by string prefix.

`reports` never covers `reports-old/a.pdf`. The two effects compare differently, so an
error falls on the side of asking the owner:

* an **allow** covers only the names the owner wrote, code point for code point: an NFD
  twin, `Reports` beside `reports` or a fullwidth look-alike is another name; a path the
  path rules refuse (empty, `.` or `..` segments) is covered by nothing;
* a **forbid** covers every name that is, or could be taken for, the one it names: each
  segment folded as the risk flags fold names (`placet.proposals.risk.fold_component`),
  after `..` is resolved, so `reports/../private/x` is under a forbid of `private`.
"""

from __future__ import annotations

import posixpath

from placet.proposals.risk import fold_component

__all__ = ["clean_segments", "within_exactly", "within_folded"]


def clean_segments(path: str) -> tuple[str, ...] | None:
    """The segments of a drive-relative or root-relative path (``""`` is the top, one
    trailing ``/`` dropped); None when a segment is empty, ``.`` or ``..`` (a path the
    path rules refuse) or the path is absolute."""
    if path.startswith("/"):
        return None
    norm = path[:-1] if path.endswith("/") else path
    if norm == "":
        return ()
    parts = tuple(norm.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def within_exactly(
    path: str | tuple[str, ...] | None, prefix: tuple[str, ...], *, strictly: bool = True
) -> bool:
    """True when `path` (a path, or its `clean_segments`) lies below the folder `prefix`
    (its segments), comparing code points; with `strictly` False the folder itself counts
    too. A path the path rules refuse (segments None) lies below nothing."""
    parts = clean_segments(path) if isinstance(path, str) else path
    if parts is None:
        return False
    n = len(prefix)
    if len(parts) < n or (strictly and len(parts) == n):
        return False
    return parts[:n] == prefix


def _folded(path: str) -> tuple[str, ...]:
    norm = posixpath.normpath("/" + path).lstrip("/")
    return tuple(fold_component(p) for p in norm.split("/") if p)


def within_folded(path: str, prefix: tuple[str, ...]) -> bool:
    """True when `path`, `..` resolved and every segment folded, is the folder `prefix`
    (folded the same way) or lies below it."""
    parts = _folded(path)
    want = tuple(fold_component(p) for p in prefix)
    return parts[: len(want)] == want
