"""Listings of the rclone drive: paged folders, whole trees, and digests kept by version.

Listings go to rcd (`placet.drive.rclone_core`). This module decides which digest a
listed file carries: one, the remote's preferred type (docs/design.md section 9). A remote
that stores digests returns them free; where rclone computes them by reading (local, sftp)
they are kept in the shared `DigestStore` by path, size and mtime and reused while both
match; a miss is hashed and checked against a fresh stat, many misses by one hashed
listing (docs/decisions/0025-digest-caches.md). Folder pages are cut before digests are
added, and the cursor is versioned and names its folder, so another folder's or an older
format's cursor is refused, never misread."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import replace

from placet.drive.base import Entry, preferred_digest
from placet.drive.rclone_core import RcloneCore
from placet.drive.spec import check_drive_path
from placet.errors import NotFound, PathRefused, UsageError

__all__ = ["RcloneListing"]

_BULK_HASH_THRESHOLD = 64  # more cache misses than this: one hashed listing, not N calls
_CURSOR_VERSION = 1


def _size(e: Entry) -> int:
    return -1 if e.size is None else e.size


class RcloneListing(RcloneCore):
    """`RcloneCore` plus listings with cached digests and paged folders (the listing half
    of `placet.drive.rclone.RcloneDrive`; construct that one)."""

    def _digest_types(self) -> tuple[str, ...]:
        """Listings carry one digest per file: the preferred type (docs/design.md section 9)."""
        t = preferred_digest(self.capabilities())
        return (t,) if t else ()

    def _with_digests(self, path: str, entries: list[Entry], *, recurse: bool) -> list[Entry]:
        """Digests for `entries` of an on-demand remote: from the digest store while a
        file's size and mtime match, misses hashed one by one (and checked against a stat
        afterwards, so a file changed meanwhile gets none) or, when there are many, by
        one hashed listing; fresh ones are remembered in the store."""
        types = self._digest_types()
        if not types:
            return entries
        t = types[0]
        store = self._digests
        cached = store.cached(t)

        def known(e: Entry) -> str | None:
            c = cached.get(e.path)
            return c[2] if c is not None and c[0] == e.size and c[1] == e.mtime else None

        misses = [e for e in entries if not e.is_dir and known(e) is None]
        fresh: dict[str, str] = {}
        if len(misses) > _BULK_HASH_THRESHOLD:
            want = {e.path: e for e in misses}
            for p, _, size, mtime, d in self.list_rows(path, recurse=recurse, digest_type=t):
                e = want.get(p)
                if e is not None and d and size == _size(e) and mtime == e.mtime:
                    fresh[p] = d
        else:
            for e in misses:
                try:
                    d = self.digest_of(e.path, t)
                    after = self.stat(e.path)  # computed for the listed version only
                except (PathRefused, NotFound):  # a name placet refuses to pass on (one
                    continue  # not valid UTF-8 lists with U+FFFD), or gone: no digest
                if d and after is not None and (after.size, after.mtime) == (e.size, e.mtime):
                    fresh[e.path] = d
        out = []
        for e in entries:
            d = None if e.is_dir else (fresh.get(e.path) or known(e))
            out.append(replace(e, digests={t: d}) if d else e)
        store.remember(
            t,
            [
                (e.path, e.size, e.mtime, fresh[e.path])
                for e in misses
                if e.path in fresh and e.size is not None and e.mtime
            ],
        )
        return out

    def _listing(
        self,
        path: str,
        *,
        recurse: bool,
        include_digest: bool,
        page: Callable[[list[Entry]], list[Entry]] = lambda es: es,
    ) -> list[Entry]:
        """List `path`, cut the result with `page`, then add digests to what is left."""
        caps = self.capabilities()
        types = self._digest_types() if include_digest else ()
        if types and not caps.hashes_on_demand:  # stored digests cost nothing extra
            return page(self._list(path, recurse=recurse, types=types))
        entries = page(self._list(path, recurse=recurse))
        return self._with_digests(path, entries, recurse=recurse) if types else entries

    def list_folder(
        self,
        path: str,
        *,
        include_digest: bool = False,
        cursor: str | None = None,
        limit: int = 500,
    ) -> tuple[list[Entry], str | None]:
        """One folder's entries, sorted by name, `limit` at a time (1-1000).

        Returns:
            (entries, next_cursor); next_cursor is None on the last page. Paths are
            relative to the drive root; temporary upload objects are left out. With
            `include_digest`, each file carries the remote's preferred digest type
            (`preferred_digest`), when the remote has one for it.

        Raises:
            UsageError: a cursor from another folder or a malformed one (`invalid_cursor`);
                bad `limit`.
            NotFound: no such folder (or it is a file).
        """
        path = check_drive_path(path)
        if not 1 <= limit <= 1000:
            raise UsageError(f"limit must be between 1 and 1000, got {limit}")
        after = self._decode_cursor(cursor, path) if cursor else None
        more = False

        def cut(entries: list[Entry]) -> list[Entry]:
            nonlocal more
            entries = sorted(entries, key=lambda e: e.name)
            if after is not None:
                entries = [e for e in entries if e.name > after]
            more = len(entries) > limit
            return entries[:limit]

        got = self._listing(path, recurse=False, include_digest=include_digest, page=cut)
        return got, (self._encode_cursor(path, got[-1].name) if more and got else None)

    @staticmethod
    def _encode_cursor(path: str, after: str) -> str:
        raw = json.dumps({"v": _CURSOR_VERSION, "p": path, "a": after}).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _decode_cursor(cursor: str, path: str) -> str:
        try:
            data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            ok = data.get("v") == _CURSOR_VERSION and isinstance(data.get("a"), str)
        except (ValueError, binascii.Error, AttributeError):
            ok = False
        if not ok:
            raise UsageError(
                "the cursor is malformed; list the folder again without a cursor to restart paging",
                code="invalid_cursor",
                details={"field": "cursor"},
            )
        if data["p"] != path:
            raise UsageError(
                f"the cursor belongs to folder {data['p']!r}, not {path!r}; "
                "list the folder again without a cursor to restart paging",
                code="invalid_cursor",
                details={"field": "cursor"},
            )
        return str(data["a"])

    def list_tree(self, path: str, *, include_digest: bool = True) -> list[Entry]:
        """Every entry under `path`, recursively, in rclone's order (for sync planning).

        With `include_digest`, each file carries the remote's preferred digest type
        (cached by (path, size, mtime) where rclone computes it by reading the data).
        Temp objects are left out.

        Raises:
            NotFound: no such folder. DriveUnavailable / DriveError: as rclone failed.
        """
        path = check_drive_path(path)
        return self._listing(path, recurse=True, include_digest=include_digest)
