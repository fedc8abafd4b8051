"""What placet needs from a remote drive, independent of how it is reached.

The executor, the sync planner and the MCP read tools talk to a `Drive`; rclone sits
behind it (`placet.drive.rclone`). A drive declares what it can do as `Capabilities`
(which digests it reports, whether names fold case, how precise its mtimes are, whether
a temporary object can be moved onto an existing name server-side), so that callers
choose a digest and a replacement strategy from flags rather than from backend names
(docs/design.md sections 3 and 9, "digest choice").

Paths are POSIX strings relative to the drive root (``""`` is the root). Every `Entry`
carries its path relative to the drive root, whatever folder was listed. Digests are
lower-case hex keyed by lower-case type name. Temporary upload objects are named with
`TEMP_PREFIX` (the same literal `placet.local.atomic` uses for local temp files) and are never
shown in a listing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from placet.errors import PlacetError
from placet.schema import DIGEST_PREFERENCE

ProgressFn = Callable[[int, int], None]
"""`progress(bytes_done, bytes_total)`; called at most every 1 MiB or 100 ms, and at the end."""

JournalFn = Callable[[str], None]
"""`journal(temp_remote_path)`: called before bytes go to a temporary object, and before
a replaced object is moved aside to a backup name (`placet.names.is_placet_backup`)."""

ListRow = tuple[str, bool, int, str | None, str | None]
"""One entry of a lean listing (`Drive.list_rows`): (path relative to the drive root,
is a folder, size in bytes (-1: a folder or unknown), mtime RFC 3339 as rclone reports
it (None: unknown), digest of the asked type, lower-case hex (None: not asked or none))."""

DigestRow = tuple[str, int, str, str]
"""(path relative to the drive root, size, mtime RFC 3339, lower-case hex digest)."""

Verification = Literal["digest:sha256", "digest:sha1", "digest:md5", "readback:sha256", "size"]
PathTaken = Literal["temp+move", "direct-replace"]


@dataclass(frozen=True)
class Capabilities:
    """What a remote supports, as rclone reports it (`operations/fsinfo`).

    Attributes:
        hash_types: the hashlib-computable digest types the remote reports, lower-case,
            strongest first (subset of `DIGEST_PREFERENCE`); empty when it reports none.
        case_insensitive: the remote folds the case of names (two local names that
            differ only in case collide there).
        modtime_precision_ns: mtime resolution in nanoseconds (1 on a local disk,
            1_000_000_000 on WebDAV and Proton Drive).
        can_move: the remote moves an object server-side (else rclone copies + deletes).
        server_side_replace: a temporary object can be moved onto an existing name
            server-side; False on Proton Drive, where a replacement uploads straight onto
            the target (docs/design.md section 3).
        backend: rclone backend type (``local``, ``sftp``, ``webdav``, ``protondrive``…)
            when known.
        hashes_on_demand: the remote computes digests by reading the data on every
            request (local, sftp), so listings with digests are cached by
            (path, size, mtime).
    """

    hash_types: tuple[str, ...]
    case_insensitive: bool
    modtime_precision_ns: int
    can_move: bool
    server_side_replace: bool
    backend: str | None = None
    hashes_on_demand: bool = False


@dataclass(frozen=True)
class Entry:
    """One file or folder of the drive.

    Attributes:
        path: relative to the drive root, POSIX (``docs/a.txt``).
        name: the last segment of `path`.
        is_dir: a folder.
        size: bytes; None for folders and for objects of unknown size.
        mtime: RFC 3339 as rclone reports it (``2026-11-30T04:52:39.072439210Z``).
        digests: lower-case type -> lower-case hex, only the types asked for and reported.
    """

    path: str
    name: str
    is_dir: bool
    size: int | None
    mtime: str | None
    digests: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UploadResult:
    """How an upload ended.

    Attributes:
        remote_path: the target, relative to the drive root.
        size: bytes sent.
        sha256: SHA-256 of the bytes sent (computed as they streamed).
        verification: ``digest:<type>`` (the remote's digest of the stored object matched
            the streamed bytes), ``readback:sha256`` (the remote has no usable digest; the
            object was read back and hashed), or ``size`` (size only; readback disabled).
        path_taken: ``temp+move`` or ``direct-replace`` (docs/design.md section 3).
        digest_type: the remote's digest type used for `digest`, None if it has none.
        digest: the remote's digest of the stored object (hex), None if it has none.
        temp_path: the temporary object used, None for a direct replacement.
        mtime: the stored object's mtime (RFC 3339) as its last check read it (after
            the move), when the drive reports one; else None.
    """

    remote_path: str
    size: int
    sha256: str
    verification: Verification
    path_taken: PathTaken
    digest_type: str | None
    digest: str | None
    temp_path: str | None = None
    mtime: str | None = None


@dataclass(frozen=True)
class DownloadResult:
    """What a download wrote: SHA-256, size in bytes, and the digests of the remote's types."""

    sha256: str
    size: int
    digest_by_type: dict[str, str]


class DigestStore(Protocol):
    """Where a drive keeps the digests rclone computed by reading the data
    (`Capabilities.hashes_on_demand`): per digest type, path -> (size, mtime, digest),
    reused only while size and mtime match. The sync service hands the drive its
    persistent remote digest cache (`RcloneDrive.use_digest_store`), so a process holds
    one such cache, not one in the drive and another in the store."""

    def cached(self, digest_type: str) -> Mapping[str, tuple[int, str, str]]:
        """The known digests of `digest_type` by path (read with `.get` only)."""
        ...

    def remember(self, digest_type: str, rows: Sequence[DigestRow]) -> None:
        """Keep fresh `(path, size, mtime, digest)` rows of `digest_type`."""
        ...


class MemoryDigestStore:
    """A `DigestStore` in the process, at most `max_entries` paths per type (the oldest
    written dropped first); a drive's default until a persistent one is handed over."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self._types: dict[str, dict[str, tuple[int, str, str]]] = {}
        self._max = max_entries

    def cached(self, digest_type: str) -> Mapping[str, tuple[int, str, str]]:
        return self._types.get(digest_type, {})

    def remember(self, digest_type: str, rows: Sequence[DigestRow]) -> None:
        d = self._types.setdefault(digest_type, {})
        for path, size, mtime, digest in rows:
            d.pop(path, None)  # re-inserted last: the newest is dropped last
            d[path] = (size, mtime, digest)
        while len(d) > self._max:
            del d[next(iter(d))]


def preferred_digest(caps: Capabilities) -> str | None:
    """The strongest digest type both sides can compute: sha256, then sha1, then md5.

    Returns None when the remote reports none of them (compare by size, `unverified`).
    Source: docs/design.md section 9, "digest choice".
    """
    for t in DIGEST_PREFERENCE:
        if t in caps.hash_types:
            return t
    return None


@runtime_checkable
class Drive(Protocol):
    """The remote drive as placet uses it. Errors are `placet.errors` classes:
    `NotFound`, `AlreadyExists`, `DriveUnavailable` (retryable), `DriveError` (fatal),
    `PathRefused` (a path that may not fill the path-within-drive slot)."""

    spec: str

    def capabilities(self) -> Capabilities: ...

    def list_folder(
        self,
        path: str,
        *,
        include_digest: bool = False,
        cursor: str | None = None,
        limit: int = 500,
    ) -> tuple[list[Entry], str | None]: ...

    def list_tree(self, path: str, *, include_digest: bool = True) -> list[Entry]: ...

    def list_rows(
        self, path: str, *, recurse: bool = True, digest_type: str | None = None
    ) -> list[ListRow]: ...

    def list_folders_rows(
        self, paths: Sequence[str], *, digest_type: str | None = None, concurrency: int = 4
    ) -> list[list[ListRow] | PlacetError]: ...

    def list_folders_raw(
        self, paths: Sequence[str], *, digest_type: str | None = None, concurrency: int = 4
    ) -> bytes: ...

    def folders_from_raw(
        self, raw: bytes, paths: Sequence[str], *, digest_type: str | None = None
    ) -> list[list[ListRow] | PlacetError]: ...

    def soft_memory_limit(self, limit: int) -> int | None: ...

    def use_digest_store(self, store: DigestStore) -> None: ...

    def stat(self, path: str, *, include_digest: bool = False) -> Entry | None: ...

    def mkdir(self, path: str) -> None: ...

    def read_head(self, path: str, max_bytes: int) -> bytes: ...

    def upload_from_fd(
        self,
        fd: int,
        size: int,
        remote_path: str,
        *,
        expected_sha256: str,
        expected_digest: tuple[str, str] | None = None,
        replace: bool = False,
        progress: ProgressFn | None = None,
        journal: JournalFn | None = None,
    ) -> UploadResult: ...

    def download_to_fd(
        self, remote_path: str, fd: int, *, progress: ProgressFn | None = None
    ) -> DownloadResult: ...

    def remove_temp(self, path: str) -> bool: ...

    def restore_backup(self, backup: str, target: str) -> bool: ...

    def discard_backup(self, backup: str) -> bool: ...

    def cleanup_temps(self, folder: str) -> list[str]: ...

    def digest_of(self, path: str, digest_type: str) -> str | None: ...

    def content_sha256(self, path: str) -> str: ...

    def clear_caches(self) -> None: ...

    def close(self) -> None: ...
