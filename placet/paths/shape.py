"""What every path an agent names must look like, local or remote: the rules both sides
share (docs/design.md section 9). The side-specific rules are in `placet.paths.local` and
`placet.paths.remote`.
"""

from __future__ import annotations

import re

from placet.errors import PathRefused
from placet.text import quote

__all__ = ["MAX_COMPONENT_BYTES", "control_char", "invalid_path", "utf8_len"]

MAX_COMPONENT_BYTES = 255
"""The longest path component, in bytes of UTF-8 (local and remote)."""


def invalid_path(path: str, what: str, instead: str, **details: object) -> PathRefused:
    return PathRefused(
        f"refusing path {quote(path)}: {what}; {instead}",
        code="path_invalid",
        details={"path": path, **details},
    )


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Unicode's categories Cc (C0, DEL, C1) and Cs (surrogates), which no version changes."""


def control_char(s: str) -> str | None:
    """The first control character (C0, DEL, C1) or lone surrogate in `s`, else None."""
    m = _CONTROL.search(s)
    return m.group() if m else None


def utf8_len(s: str) -> int:
    """Length of `s` in bytes of UTF-8 (lone surrogates counted as 3)."""
    return len(s.encode("utf-8", "surrogatepass"))
