"""The digest cache: what lets a warm index read no file (docs/design.md sections 8 and 9).

A file's digests are reused while its (size, mtime_ns, inode, ctime_ns) are unchanged
and the entry was stored `verified` (see the racily-clean rule in `indexer`). The
indexer talks to a `DigestCache`; `MemoryDigestCache` keeps entries in the process, and
the store provides a SQLite one keyed by `(root_key, path)` that discards entries whose
`DIGEST_CACHE_VERSION` differs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Generic, NamedTuple, Protocol, TypeVar

_V = TypeVar("_V")

DIGEST_CACHE_VERSION = 1
"""Version of `CachedDigest`'s meaning; a persistent cache keyed by another is discarded."""

NO_DIGESTS: Mapping[str, str] = MappingProxyType({})
"""No digests, one shared empty mapping (an empty dict per file is 64 bytes, 6 MiB per
100,000 files kept in memory): `CachedDigest.digests` of a file with only its sha256,
and a `RemoteEntry`'s digests of a folder or an undigested file."""


class CachedDigest(NamedTuple):
    """A file's digests as last read, with the stat fields that must match to reuse them.

    `path`: on-disk name relative to the root (POSIX). `mtime_ns`/`ctime_ns`: ns since
    the epoch. `digests`: the other types (lower-case hex) by name. `verified`: read
    from settled bytes; an unverified entry is never reused.

    A named tuple rather than a frozen dataclass: a warm plan in a new process reads
    100,000 of these from the database, and a tuple is built in about a fifth of the
    time (0.4 against 2 us, measured), the same immutable value.
    """

    path: str
    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int
    sha256: str
    digests: Mapping[str, str]
    verified: bool

    def holds_for(self, st: os.stat_result, need: frozenset[str]) -> bool:
        """Whether these digests may stand for a file whose `lstat` is `st`: verified,
        the same size, mtime, inode and ctime, and every digest type in `need` present."""
        return (
            self.verified
            and self.size == st.st_size
            and self.mtime_ns == st.st_mtime_ns
            and self.inode == st.st_ino
            and self.ctime_ns == st.st_ctime_ns
            and (not need or self.digests.keys() >= need)
        )


class OwnedRows(dict[str, _V]):
    """Cache rows loaded for one reader alone (nothing else holds this mapping): the
    reader may `pop` each row as it uses it, so a warm index or listing of 1,000,000
    files frees the cache as it builds its entries instead of holding both. What is
    left at the end are the rows nobody asked for (files gone since)."""

    __slots__ = ()


Ranges = list[tuple[str, str | None]]
"""(low, high) bounds of paths, high None: no bound."""


class FolderRows(Generic[_V]):
    """Rows too many to hold (a big digest cache or baseline), read a folder at a time
    as a walk lists it (docs/decisions/0026-plan-memory.md): `rows` gives, for the
    caller alone, the rows directly in a folder and those beneath folders of it that
    are not there now (gone since), one query per gap between the trees of the
    folders that are; the walk takes (pops) what it uses."""

    def __init__(
        self, read: Callable[[Ranges], OwnedRows[_V]], gaps: Callable[[str, list[str]], Ranges]
    ):
        self.read, self.gaps = read, gaps

    def rows(self, folder: str, subfolders: Iterable[str]) -> OwnedRows[_V]:
        """The rows of `folder` (a path, "" the top) outside the trees of its
        `subfolders` (names)."""
        below = f"{folder}/" if folder else ""
        return self.read(self.gaps(folder, [below + s for s in subfolders]))


class DigestCache(Protocol):
    """Where digests persist between indexes; the store implements it with SQLite.

    `get_under` loads a folder's entries in one call, so a warm index of 100,000 files
    costs one query, not 100,000; `local_folders` offers the same rows a folder at a
    time when they are too many to hold.
    """

    def get(self, root_key: str, path: str) -> CachedDigest | None: ...

    def get_under(self, root_key: str, prefix: str) -> Mapping[str, CachedDigest]:
        """Entries whose path is `prefix` or lies beneath it ("" = all), by path (an
        `OwnedRows` when the caller may consume it)."""
        ...

    def put_many(self, root_key: str, entries: Iterable[CachedDigest]) -> None: ...

    def local_folders(self, root_key: str) -> FolderRows[CachedDigest] | None:
        """The root's rows a folder at a time (`FolderRows`), or None: read them whole
        with `get_under`."""
        ...


class MemoryDigestCache:
    """An in-process `DigestCache` (tests, one-shot CLI runs)."""

    def __init__(self) -> None:
        self._roots: dict[str, dict[str, CachedDigest]] = {}

    def get(self, root_key: str, path: str) -> CachedDigest | None:
        return self._roots.get(root_key, {}).get(path)

    def get_under(self, root_key: str, prefix: str) -> Mapping[str, CachedDigest]:
        entries = self._roots.get(root_key, {})
        if not prefix:
            return dict(entries)
        below = prefix + "/"
        return {p: c for p, c in entries.items() if p == prefix or p.startswith(below)}

    def put_many(self, root_key: str, entries: Iterable[CachedDigest]) -> None:
        self._roots.setdefault(root_key, {}).update((c.path, c) for c in entries)

    def local_folders(self, root_key: str) -> FolderRows[CachedDigest] | None:
        return None  # in memory already
