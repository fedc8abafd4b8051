"""The exact shape of placet's temporary names, so only placet's own temps are hidden or
deleted.

placet writes every transfer to a temporary name first (``.placet-tmp-<hex>-<name>``:
12 hex digits on a drive, 16 in a local root) and renames it into place only after the
content is verified. Listings hide these names and cleanup deletes abandoned ones. A
name that merely *starts* with the reserved prefix (an owner's ``.placet-tmp-notes.txt``)
is the owner's, not placet's: it is listed, never deleted (agents still cannot propose
such a name: `check_not_reserved` refuses the prefix, code ``path_reserved``).
"""

from __future__ import annotations

import re

from placet.errors import PathRefused
from placet.text import quote

TEMP_PREFIX = ".placet-tmp-"
"""Every temporary name placet makes, local or remote, starts with this; so no component
of a path an agent names may (`check_not_reserved`, code ``path_reserved``)."""

_SHAPE = re.compile(r"\.placet-tmp-(?:[0-9a-f]{12}|[0-9a-f]{16})-", re.ASCII)
BACKUP_PREFIX = TEMP_PREFIX + "keep-"
"""A replaced drive object's previous content waits under ``.placet-tmp-keep-<12 hex>-<name>``
until the new one is proven in place: never deleted by temp cleanup (a crashed run's
journal moves it back, or deletes it once the replacement is proven complete:
`placet.executor.temps.replaced_as_approved`), and listed, so an owner can find it."""
_BACKUP_SHAPE = re.compile(r"\.placet-tmp-keep-[0-9a-f]{12}-", re.ASCII)


def is_placet_temp(name: str) -> bool:
    """True when `name` (one path component) has the shape of a name placet generated:
    the prefix, 12 or 16 lower-case hex digits, a dash. False for any other name, even
    one starting with the prefix."""
    return name.startswith(TEMP_PREFIX) and _SHAPE.match(name) is not None


def is_placet_backup(name: str) -> bool:
    """True when `name` (one path component) has the shape of a backup placet made of a
    replaced drive object (`BACKUP_PREFIX`, 12 lower-case hex digits, a dash)."""
    return name.startswith(BACKUP_PREFIX) and _BACKUP_SHAPE.match(name) is not None


def has_placet_temp(path: str) -> bool:
    """True when a component of the ``/``-separated `path` is a placet temp name."""
    return TEMP_PREFIX in path and any(is_placet_temp(seg) for seg in path.split("/"))


def is_reserved_name(name: str) -> bool:
    """True when one path component starts with `TEMP_PREFIX` (``.placet-tmp-``)."""
    return name.startswith(TEMP_PREFIX)


def reserved_refusal(path: str, component: str) -> PathRefused:
    """The ``path_reserved`` refusal of `path`, whose `component` bears the prefix."""
    # placet's own temporary files carry this prefix: they are hidden from listings and
    # removed by cleanup, so a file an owner approved must never bear it.
    return PathRefused(
        f"refusing path {quote(path)}: {quote(component)} starts with {quote(TEMP_PREFIX)}, a "
        "prefix reserved for placet's temporary files (hidden from listings, removed by "
        "cleanup); choose another name",
        code="path_reserved",
        details={"path": path, "component": component, "prefix": TEMP_PREFIX},
    )


def check_not_reserved(path: str) -> str:
    """Refuse a local or remote POSIX path any of whose components starts with
    ``.placet-tmp-`` (`TEMP_PREFIX`). Shape is not checked here.

    Returns:
        `path` unchanged.

    Raises:
        PathRefused (code ``path_reserved``): a component bears the reserved prefix.
    """
    for component in path.split("/"):
        if is_reserved_name(component):
            raise reserved_refusal(path, component)
    return path
