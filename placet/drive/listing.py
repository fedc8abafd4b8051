"""What is on the drive: stats, listings, paged folders, and digests kept by version.

Every read of metadata goes to rcd (`placet.drive.calls`). This module decides which
digest a listed file carries: one, the remote's preferred type (docs/design.md section 9).
A remote that stores digests returns them free; where rclone computes them by reading
(local, sftp) they are kept in the shared `DigestStore` by path, size and mtime and
reused while both match; a miss is hashed and checked against a fresh stat, many misses
by one hashed listing (docs/decisions/0025-digest-caches.md). Folder pages are cut before
digests are added, and the cursor is versioned and names its folder, so another folder's
or an older format's cursor is refused, never misread. Temporary objects are never listed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from placet.drive.base import DigestStore, Entry, ListRow, MemoryDigestStore, preferred_digest
from placet.drive.calls import LONG_CALL_SECONDS, SHORT_CALL_SECONDS, RcloneCalls
from placet.drive.failures import rclone_failure
from placet.drive.rcd import RcFailure
from placet.drive.spec import check_drive_path
from placet.drive.unreadable import DENIED, new_group, refused_in, refused_marked
from placet.errors import (
    AlreadyExists,
    DriveError,
    NotFound,
    PathRefused,
    PlacetError,
    UsageError,
)
from placet.names import TEMP_PREFIX, has_placet_temp

__all__ = ["Listing"]

_BULK_HASH_THRESHOLD = 64  # more cache misses than this: one hashed listing, not N calls
_CURSOR_VERSION = 1


def _size(e: Entry) -> int:
    return -1 if e.size is None else e.size


class Listing:
    """Stats, listings and digests of the drive (the ``listing`` part of `RcloneDrive`)."""

    def __init__(self, calls: RcloneCalls) -> None:
        self._calls = calls
        self._digests: DigestStore = MemoryDigestStore()

    def use_digest_store(self, store: DigestStore) -> None:
        """Keep the digests this drive computes by reading the data in `store` (see
        `placet.drive.base.DigestStore`) instead of its own in-memory one."""
        self._digests = store

    # ----- single objects -------------------------------------------------------------

    def stat(self, path: str, *, include_digest: bool = False) -> Entry | None:
        """The entry at `path`, or None if absent (also when a parent is a file).

        With `include_digest`, digests of every type in `capabilities().hash_types`,
        computed fresh (never from the listing cache): this is the evidence check.
        """
        path = check_drive_path(path)
        types = self._calls.capabilities().hash_types if include_digest else ()
        return self.fresh_stat(path, types)

    def fresh_stat(self, path: str, types: Sequence[str]) -> Entry | None:
        """`stat` of a checked `path` with fresh digests of `types` (none: no digest)."""
        params = self._calls.listing_params(path, types)
        try:
            body = self._calls.rc(
                "operations/stat",
                params,
                action="stat",
                target=path,
                timeout=LONG_CALL_SECONDS if types else SHORT_CALL_SECONDS,
            )
            item = body.get("item")
        except AlreadyExists:  # "not a directory": a parent is a file, so nothing is here
            return None
        return self._calls.entry(item) if item else None

    def require_file(self, path: str, action: str) -> Entry:
        """The entry of file `path`; NotFound (``not_a_file`` for a folder) otherwise."""
        found = self.stat(path)
        if found is None:
            raise NotFound(
                f"cannot {action} {path!r}: no such file on the drive", details={"path": path}
            )
        if found.is_dir:
            raise NotFound(
                f"cannot {action} {path!r}: it is a folder, not a file",
                code="not_a_file",
                details={"path": path},
            )
        return found

    def digest_of(self, path: str, digest_type: str) -> str | None:
        """The remote's own `digest_type` digest of file `path` (hex, lower-case).

        Returns None when the remote does not offer that type, or not for this object.
        Raises NotFound when there is no such file.
        """
        path = check_drive_path(path)
        if digest_type.lower() not in self._calls.capabilities().hash_types:
            return None
        params = {"fs": self._calls.fs().raw, "remote": path, "hashType": digest_type.lower()}
        return self._hashsum(params, "hash", path) or None

    def content_sha256(self, path: str) -> str:
        """SHA-256 (hex, lower-case) of the bytes of file `path`, read now through rcd
        (`operations/hashsumfile` with ``download``): the content itself, never a digest
        the remote stores, in one rcd call and no rclone child (a `download_to_fd` into
        /dev/null spawns `rclone cat`: about 20 times slower per small file on WebDAV,
        docs/performance.md). What binds a transfer to content on a remote without
        digests (docs/decisions/0011-no-digest-binding.md).

        Raises:
            NotFound: no such file. DriveUnavailable / DriveError.
        """
        path = check_drive_path(path)
        params = {"fs": self._calls.fs().raw, "remote": path, "hashType": "sha256"}
        value = self._hashsum({**params, "download": True}, "read", path)
        if len(value) != 64:
            raise DriveError(
                f"rclone read {path!r} but gave no SHA-256 of it ({value[:80]!r}); nothing "
                "was changed: try again, and report it if it persists",
                details={"path": path},
            )
        return value

    def _hashsum(self, params: dict[str, Any], action: str, path: str) -> str:
        body = self._calls.rc(
            "operations/hashsumfile", params, action=action, target=path, timeout=LONG_CALL_SECONDS
        )
        return str(body.get("hash") or "").strip().lower()

    # ----- listings -------------------------------------------------------------------

    def items(self, path: str, *, recurse: bool, types: Sequence[str] = ()) -> list[Any]:
        """rclone's `operations/list` items of `path` (temp objects included)."""
        group = new_group()  # a folder it may not read lists empty: `placet.drive.unreadable`
        params = {**self._calls.listing_params(path, types, recurse=recurse), "_group": group}

        def rc(method: str, params: dict[str, Any]) -> Any:
            return self._calls.rc(
                method, params, action="list", target=path, timeout=LONG_CALL_SECONDS
            )

        try:
            body = rc("operations/list", params)
        except AlreadyExists as e:  # "not a directory": the path names a file
            raise NotFound(
                f"cannot list {path!r}: it is a file, not a folder; stat it or list its parent",
                details=e.details,
            ) from None
        except NotFound:
            if path:
                raise
            return []  # the drive root not created yet is an empty drive
        items = body.get("list")
        items = items if isinstance(items, list) else []
        refused = refused_in(rc, items, recurse, group)
        if refused is not None:
            raise _denied(path, self._calls.redact(refused))
        return items

    def _list(self, path: str, *, recurse: bool, types: tuple[str, ...] = ()) -> list[Entry]:
        return [
            self._calls.entry(i)
            for i in self.items(path, recurse=recurse, types=types)
            if not has_placet_temp(i.get("Path", ""))
        ]

    def list_rows(
        self, path: str, *, recurse: bool = True, digest_type: str | None = None
    ) -> list[ListRow]:
        """The lean listing a sync plan reads: every entry under `path` (recursively
        unless `recurse` is false) as `ListRow` tuples, in rclone's order, temp objects
        left out, with the `digest_type` digest straight from rclone when asked (on a
        `hashes_on_demand` remote that reads every file; nothing is cached here: the
        caller keeps its own digest cache). No `Entry` objects: 100,000 of them cost
        about 0.3 s and 30 MiB more than these tuples (docs/performance.md).

        Raises:
            NotFound: no such folder (or it is a file). PathRefused: a path placet
                refuses to pass on. DriveUnavailable / DriveError: as rclone failed.
        """
        path = check_drive_path(path)
        dtype = digest_type.lower() if digest_type else None
        return _list_rows(self.items(path, recurse=recurse, types=(dtype,) if dtype else ()), dtype)

    def list_folders_rows(
        self, paths: Sequence[str], *, digest_type: str | None = None, concurrency: int = 4
    ) -> list[list[ListRow] | PlacetError]:
        """`list_rows(path, recurse=False)` of each of `paths`, in one rcd request (a
        `job/batch` of listings, `concurrency` at a time): per path its rows, or the
        error its listing met (`NotFound`: no such folder, or a file). Batched, a
        listing of a folder of 100 files costs rclone about what its share of one
        recursive listing does; alone, about twice that.

        Raises:
            PathRefused: a path placet refuses to pass on (nothing is listed).
                DriveUnavailable / DriveError: the request as a whole failed.
        """
        raw = self.list_folders_raw(paths, digest_type=digest_type, concurrency=concurrency)
        return self.folders_from_raw(raw, paths, digest_type=digest_type)

    def list_folders_raw(
        self, paths: Sequence[str], *, digest_type: str | None = None, concurrency: int = 4
    ) -> bytes:
        """The request of `list_folders_rows`, its answer undecoded (`folders_from_raw`
        decodes it): the I/O alone, for a thread that should leave the interpreter lock
        to the one that decodes. Raises what `list_folders_rows` raises."""
        checked = [check_drive_path(p) for p in paths]
        dtype = digest_type.lower() if digest_type else None
        types = (dtype,) if dtype else ()
        group = new_group()  # a folder it may not read lists empty: `placet.drive.unreadable`
        inputs = [
            {"_path": "operations/list", "_group": group,
             **self._calls.listing_params(p, types, recurse=False)}
            for p in checked
        ]  # fmt: skip
        target = checked[0] if checked else ""

        def rc(method: str, params: dict[str, Any]) -> Any:
            return self._calls.rc(method, params, action="list", target=target,
                                  timeout=LONG_CALL_SECONDS)  # fmt: skip

        params = {"inputs": inputs, "concurrency": concurrency}
        raw: bytes = self._calls.mapped(  # undecoded: `Rcd.call_raw`
            lambda: self._calls.rcd.call_raw("job/batch", params, timeout=LONG_CALL_SECONDS),
            action="list",
            target=target,
        )
        return refused_marked(rc, raw, inputs, group)

    def folders_from_raw(
        self, raw: bytes, paths: Sequence[str], *, digest_type: str | None = None
    ) -> list[list[ListRow] | PlacetError]:
        """`list_folders_rows`' result from the answer `list_folders_raw` got for the
        same `paths` and `digest_type`.

        Raises:
            DriveError: the answer is not one result per path.
        """
        dtype = digest_type.lower() if digest_type else None
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != len(paths):
            raise DriveError(
                f"rclone answered a batch of {len(paths)} listings with "
                f"{len(results) if isinstance(results, list) else 'no'} results; try again",
                details={"path": paths[0] if paths else ""},
            )
        out: list[list[ListRow] | PlacetError] = []
        for path, res in zip(paths, results, strict=True):
            p = path[:-1] if path.endswith("/") else path
            res = res if isinstance(res, dict) else {}
            if "error" in res:
                status = res.get("status")
                err = rclone_failure(
                    "list", p, str(res.get("error") or ""), secrets=self._calls.secrets,
                    http_status=status if isinstance(status, int) else 500,
                )  # fmt: skip
                if isinstance(err, AlreadyExists):  # "not a directory": the path names a file
                    err = NotFound(f"cannot list {p!r}: it is a file, not a folder",
                                   details=err.details)  # fmt: skip
                elif status == 403 or DENIED.search(str(res.get("error") or "")):
                    err = _denied(p, str(err.details.get("rclone_message", "")))
                # The drive root not created yet is an empty drive (as `list_rows` says).
                out.append([] if isinstance(err, NotFound) and not p else err)
                continue
            items = res.get("list")
            out.append(_list_rows(items if isinstance(items, list) else [], dtype))
        return out

    def soft_memory_limit(self, limit: int) -> int | None:
        """Set rcd's soft memory limit to `limit` bytes (Go's `SetMemoryLimit`: the
        collector runs more often near it; a negative `limit` only reads it) and return
        the one before, or None when this rclone cannot (the call is then a no-op). A
        plan sets one while it lists (docs/decisions/0026-plan-memory.md): rcd's heap grew
        past its live data while hashing.
        rclone reads JSON numbers as float64: a limit past 2**62 (none, in effect) is sent
        as 2**62."""
        try:
            body = self._calls.rcd.call(
                "debug/set-soft-memory-limit", {"mem-limit": min(limit, 1 << 62)}, timeout=10
            )
        except (RcFailure, PlacetError):
            return None
        prev = body.get("existing-mem-limit") if isinstance(body, dict) else None
        return prev if isinstance(prev, int) else None

    def _digest_types(self) -> tuple[str, ...]:
        """Listings carry one digest per file: the preferred type (docs/design.md section 9)."""
        t = preferred_digest(self._calls.capabilities())
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
        caps = self._calls.capabilities()
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
        after = _decode_cursor(cursor, path) if cursor else None
        more = False

        def cut(entries: list[Entry]) -> list[Entry]:
            nonlocal more
            entries = sorted(entries, key=lambda e: e.name)
            if after is not None:
                entries = [e for e in entries if e.name > after]
            more = len(entries) > limit
            return entries[:limit]

        got = self._listing(path, recurse=False, include_digest=include_digest, page=cut)
        return got, (_encode_cursor(path, got[-1].name) if more and got else None)

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


def _denied(path: str, message: str) -> PathRefused:
    """``permission_denied``: the drive refuses to list a folder at or beneath `path`."""
    return PathRefused(
        f"cannot list remote folder {path!r}: the drive refuses to list it ({message}); "
        "nothing beneath it is known: grant read access to it, or plan a folder outside it",
        code="permission_denied",
        details={"path": path, "rclone_message": message},
    )


def _encode_cursor(path: str, after: str) -> str:
    raw = json.dumps({"v": _CURSOR_VERSION, "p": path, "a": after}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


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


def _list_rows(items: list[Any], dtype: str | None) -> list[ListRow]:
    """rclone's `operations/list` items as `ListRow`s, temp objects left out."""
    out: list[ListRow] = []
    append = out.append
    tmp = TEMP_PREFIX
    for it in items:
        p = it.get("Path")
        if not isinstance(p, str) or (tmp in p and has_placet_temp(p)):
            continue
        if it.get("IsDir"):
            append((p, True, -1, it.get("ModTime"), None))
            continue
        size = it.get("Size")
        d = None
        if dtype is not None and (h := it.get("Hashes")):
            d = h.get(dtype) or None
            if d is not None:
                d = str(d).lower()
        ok = isinstance(size, int) and size >= 0
        append((p, False, size if ok else -1, it.get("ModTime"), d))
    return out
