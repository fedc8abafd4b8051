"""Digests for the remote side of a sync, hashing as little as possible.

On remotes whose digests rclone computes by reading (`Capabilities.hashes_on_demand`),
a digest comes from the one persistent remote digest cache while size and mtime match,
and only misses are hashed: per file (checked against a stat), or, past `BULK_MISSES` in a
folder, by listing that folder again with digests (docs/design.md section 9, "Digest
choice"; docs/decisions/0025-digest-caches.md). A remote with no cached digest beneath
the synced folder (cold) is listed with digests from the start, rclone hashing a few
folders at once, and what it hashed is remembered. Rows (`ListRow`) become
`RemoteEntry`s directly; a cache too big to keep is read a folder at a time as the
listing goes (`placet.sync.cache.FolderRows`). Other remotes list stored digests at no
cost.
The listing itself is `placet.sync.remote_tree`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from placet.drive.base import DigestRow, Drive, ListRow, preferred_digest
from placet.errors import NotFound, PathRefused
from placet.sync.cache import NO_DIGESTS, FolderRows
from placet.sync.entries import OneDigest, RemoteEntry, new_remote_entry
from placet.sync.stored import SyncData
from placet.text import inert

BULK_MISSES = 64
"""More remote digest misses than this in a folder (and a tenth of its files): the
folder is listed again with digests instead of hashed file by file."""
_THREADS = 4
"""Remote files hashed at once, and folders listed at once while rclone hashes (cold)."""


class SyncDigestStore:
    """`SyncData`'s remote digest cache for one drive, as the drive's `DigestStore`."""

    def __init__(self, data: SyncData, drive_spec: str) -> None:
        self.data, self.spec = data, drive_spec

    def cached(self, digest_type: str) -> Mapping[str, tuple[int, str, str]]:
        return self.data.remote_digests(self.spec, digest_type)

    def remember(self, digest_type: str, rows: Sequence[DigestRow]) -> None:
        self.data.put_remote_digests(self.spec, digest_type, rows)


class RemoteLister:
    """Remote listings with digests for one process; `files_hashed` counts the remote
    files whose digest was computed rather than taken from the cache."""

    def __init__(self, data: SyncData) -> None:
        self.data = data
        self.files_hashed = 0

    def missing(self, drive: Drive, folder: str) -> None:
        """`folder` did not list: a missing folder (an empty side), unless it is a file.

        Raises:
            PathRefused (`not_a_directory`): `folder` is a file.
        """
        found = drive.stat(folder) if folder else None
        if found is not None and not found.is_dir:
            raise PathRefused(
                f"refusing remote {inert(folder)!r}: it is a file, not a folder; name a "
                "folder of the drive",
                code="not_a_directory",
                details={"remote_path": folder},
            ) from None

    def hash_files(self, drive: Drive, dtype: str, misses: list[ListRow]) -> dict[str, str]:
        """Digests of `misses` computed by rclone one file at a time (`_THREADS` at
        once); a file changed since it was listed gets none."""

        def one(r: ListRow) -> tuple[str, str | None]:
            try:
                d = drive.digest_of(r[0], dtype)
                after = drive.stat(r[0])  # computed for the listed version only
            except (PathRefused, NotFound):  # a name placet cannot use (the plan says
                return r[0], None  # why), or a file removed since the listing: no digest
            size = -1 if after is None or after.size is None else after.size
            same = after is not None and (size, after.mtime) == (r[2], r[3])
            return r[0], d if same else None

        with ThreadPoolExecutor(_THREADS, thread_name_prefix="placet-rhash") as ex:
            return {p: d for p, d in ex.map(one, misses) if d}


class RowDigests:
    """The digests of one remote listing's rows (see the module docstring): `entries`
    turns a folder's rows into entries; `listing_type` is the digest type to list with
    (None: list without, the cache gives them); `close` ends the cache's read."""

    def __init__(self, lister: RemoteLister, drive: Drive, folder: str) -> None:
        self.lister, self.drive = lister, drive
        caps = drive.capabilities()
        self.dtype = preferred_digest(caps)
        self.on_demand = self.dtype is not None and caps.hashes_on_demand
        self.cut = len(folder) + 1 if folder else 0
        self.copy: Mapping[str, tuple[int, str, str]] | None = None
        self.by_folder: FolderRows[tuple[int, str, str]] | None = None
        self.cold = False
        if self.on_demand:
            assert self.dtype is not None
            data, spec = lister.data, drive.spec
            self.copy = data.remote_digest_copy(spec, self.dtype)
            if self.copy is not None:
                below = f"{folder}/" if folder else ""
                self.cold = not any(p.startswith(below) for p in self.copy)
            else:
                self.cold = not data.has_remote_digests_under(spec, self.dtype, folder)
                if not self.cold:
                    self.by_folder = data.remote_folders(spec, self.dtype)
        self.listing_type = self.dtype if not self.on_demand or self.cold else None

    def remember_listed(self, listed: Sequence[object]) -> None:
        """Remember the digests rclone computed for a cold listing's rows (each item
        of `listed` a folder's rows, or an error)."""
        assert self.dtype is not None
        fresh: list[DigestRow] = []
        files = 0
        for rows in listed:
            if not isinstance(rows, list):
                continue
            for p, is_dir, size, mtime, d in rows:
                if not is_dir:
                    files += 1
                    if d and size >= 0 and mtime:
                        fresh.append((p, size, mtime, d))
        self.lister.files_hashed += files
        self.lister.data.put_remote_digests(self.drive.spec, self.dtype, fresh)

    def entries(self, rows: list[ListRow], folders: Sequence[str]) -> list[RemoteEntry]:
        """`rows` (those of `folders`, drive paths, in listing order) as entries with
        their digests, relative to the synced folder; misses hashed first."""
        dtype, cut = self.dtype, self.cut
        out: list[RemoteEntry] = []
        append = out.append
        if self.listing_type is not None or dtype is None:
            for p, is_dir, size, mtime, d in rows:
                if is_dir:
                    append(new_remote_entry(p[cut:], "dir", 0, mtime, NO_DIGESTS))
                else:
                    digests = OneDigest(dtype, d) if d and dtype else NO_DIGESTS
                    append(new_remote_entry(p[cut:], "file", size, mtime, digests))
            return out
        get = (self.copy if self.copy is not None else self._cached(rows, folders)).get
        missed: list[int] = []  # where a miss's entry goes once it is hashed
        for p, is_dir, size, mtime, _ in rows:
            if is_dir:
                append(new_remote_entry(p[cut:], "dir", 0, mtime, NO_DIGESTS))
                continue
            c = get(p)
            if c is not None and c[0] == size and c[1] == mtime:
                # The cache's mtime string: one copy kept.
                append(new_remote_entry(p[cut:], "file", size, c[1], OneDigest(dtype, c[2])))
            else:
                missed.append(len(out))
                append(new_remote_entry(p[cut:], "file", size, mtime, NO_DIGESTS))
        if missed:
            misses = [rows[i] for i in missed]  # one entry per row, in order
            fresh = self._hash(misses, len(rows))
            for i, row in zip(missed, misses, strict=True):
                d = fresh.get(row[0])
                if d:
                    e = out[i]
                    out[i] = new_remote_entry(e.path, "file", e.size, e.mtime, OneDigest(dtype, d))
        return out

    def _hash(self, misses: list[ListRow], listed: int) -> dict[str, str]:
        """Digests of `misses` (of `listed` rows of one folder) computed now, and
        remembered in the cache."""
        dtype = self.dtype
        assert dtype is not None
        got: dict[str, str] = {}
        if len(misses) > BULK_MISSES and len(misses) > listed // 10:
            want = {r[0]: r for r in misses}
            folders = sorted({r[0].rpartition("/")[0] for r in misses})
            for rows in self.drive.list_folders_rows(folders, digest_type=dtype):
                if isinstance(rows, list):
                    for p, _, size, mtime, d in rows:
                        r = want.get(p)
                        if r is not None and d and (r[2], r[3]) == (size, mtime):
                            got[p] = d
        else:
            got = self.lister.hash_files(self.drive, dtype, misses)
        self.lister.files_hashed += len(misses)
        fresh = [
            (r[0], r[2], r[3], got[r[0]]) for r in misses if r[0] in got and r[2] >= 0 and r[3]
        ]
        self.lister.data.put_remote_digests(self.drive.spec, dtype, fresh)
        return got

    def _cached(
        self, rows: list[ListRow], folders: Sequence[str]
    ) -> Mapping[str, tuple[int, str, str]]:
        """The cached digests of the files directly in `folders`, read now."""
        assert self.by_folder is not None
        subs: dict[str, list[str]] = {f: [] for f in folders}
        for r in rows:
            if r[1]:
                parent, _, name = r[0].rpartition("/")
                subs.setdefault(parent, []).append(name)
        out: dict[str, tuple[int, str, str]] = {}
        for f, names in subs.items():
            out.update(self.by_folder.rows(f, names))
        return out
