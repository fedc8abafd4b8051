"""The exact shape of placet's temporary names, so only placet's own temps are hidden or
deleted.

placet writes every transfer to a temporary name first (``.placet-tmp-<hex>-<name>``:
12 hex digits on a drive, 16 in a local root) and renames it into place only after the
content is verified. Listings hide these names and cleanup deletes abandoned ones. A
name that merely *starts* with the reserved prefix (an owner's ``.placet-tmp-notes.txt``)
is the owner's, not placet's: it is listed, never deleted (agents still cannot propose
such a name: `placet.paths` refuses the prefix, code ``path_reserved``).
"""

from __future__ import annotations

import re

TEMP_PREFIX = ".placet-tmp-"
"""Every temporary name placet makes starts with this (`placet.paths.RESERVED_PREFIX`)."""

_SHAPE = re.compile(r"\.placet-tmp-(?:[0-9a-f]{12}|[0-9a-f]{16})-", re.ASCII)


def is_placet_temp(name: str) -> bool:
    """True when `name` (one path component) has the shape of a name placet generated:
    the prefix, 12 or 16 lower-case hex digits, a dash. False for any other name, even
    one starting with the prefix."""
    return name.startswith(TEMP_PREFIX) and _SHAPE.match(name) is not None


def has_placet_temp(path: str) -> bool:
    """True when a component of the ``/``-separated `path` is a placet temp name."""
    return TEMP_PREFIX in path and any(is_placet_temp(seg) for seg in path.split("/"))
