"""The drive as rclone reaches it: metadata through `rclone rcd`, bytes through the CLI.

Listings, stat, mkdir, digests, moves and deletes go to one long-lived `rclone rcd` on a
private unix socket: a call costs well under a millisecond there against ~45 ms for a
fresh `rclone` process (measured; docs/decisions.md), and an evidence check or a sync
plan makes many of them. Bytes go through `rclone rcat` / `rclone cat` children fed
from and into placet's own descriptors (`placet.drive.transfer`), because rcd can only
open local files by name; the exception is a small new file (at most `RCD_UPLOAD_MAX`
bytes), whose bytes placet reads from its descriptor into memory and sends to rcd's
`operations/uploadfile` itself (`Rcd.upload`), sparing the ~70 ms an rcat process costs
to start (docs/performance.md "Sync apply").

An upload never shows unapproved bytes under the target name (DESIGN.md sections 3-4):
it streams to ``<folder>/.placet-tmp-<random>-<name>``, hashes the stream (SHA-256 plus
the remote's type), checks size and the remote's digest of the temporary object (or
reads it back when the remote has no digest), and only then moves it into place. A
replacement on a remote that cannot move onto an existing name server-side (Proton
Drive) uploads straight onto the target and verifies afterwards; the result says which
path was taken. Any failure deletes the temporary object. rcat gets all but the last
chunk before the digest is confirmed; the rcd path holds back every chunk, because rclone
stores a multipart body cut short below its streaming cutoff as a smaller file (so an
aborted request is not a refusal), and rcd only ever receives bytes already confirmed,
for a temporary name.

rclone's caches: `clear_caches` drops rcd's cached backends before an evidence check or
a plan's listing; for Proton Drive the backend's own metadata cache is turned off and
`replace_existing_draft` turned on in the spec placet hands rclone (DESIGN.md section 3).
Digests that rclone computes by reading the data (local folders, sftp) are kept in a
`DigestStore` by path with the size and mtime they were computed for (the sync service
hands over its persistent remote digest cache, `use_digest_store`, so there is one), and
listings reuse them while both match. `list_rows` is the lean listing a sync plan reads:
tuples, no `Entry` objects, and no caching (the planner's lister keeps the cache).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import replace

from placet.drive import transfer
from placet.drive.base import (
    DIGEST_PREFERENCE,
    DownloadResult,
    Entry,
    JournalFn,
    ProgressFn,
    UploadResult,
    preferred_digest,
)
from placet.drive.proc import spawn, stop
from placet.drive.rclone_core import (
    LONG_CALL_SECONDS,
    RCD_UPLOAD_MAX,
    RcloneCore,
    split_path,
    temp_name,
)
from placet.drive.spec import check_drive_path
from placet.errors import (
    AlreadyExists,
    DriveError,
    DriveUnavailable,
    PathRefused,
    StaleEvidence,
    UsageError,
)

_BULK_HASH_THRESHOLD = 64  # more cache misses than this: one hashed listing, not N calls
_CURSOR_VERSION = 1


def _size(e: Entry) -> int:
    return -1 if e.size is None else e.size


class RcloneDrive(RcloneCore):
    """A `Drive` over rclone: listings with cached digests, paged folders, transfers.

    Construct with `RcloneDrive(spec, *, rclone_path, env, run_dir, flags=(), verify_readback=True)`
    (see `RcloneCore`), or get the configured one from `placet.drive.drive_for`.

    `rcd_upload_max`: new files up to this many bytes go through rcd rather than rcat
    (default `RCD_UPLOAD_MAX`; -1 sends every upload through rcat, as benchmarks compare).
    """

    rcd_upload_max: int = RCD_UPLOAD_MAX

    def _digest_types(self) -> tuple[str, ...]:
        """Listings carry one digest per file: the preferred type (DESIGN.md section 9)."""
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
                except PathRefused:  # a listed name placet refuses to pass on: no digest
                    continue
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

    def read_head(self, path: str, max_bytes: int) -> bytes:
        """The first `max_bytes` bytes (1-1 MiB) of file `path` (`rclone cat --count`)."""
        path = check_drive_path(path)
        if not 1 <= max_bytes <= 1 << 20:
            raise UsageError(f"max_bytes must be between 1 and 1048576, got {max_bytes}")
        self._require_file(path, "read")
        argv = self._argv("cat", "--count", str(max_bytes), "--", self._fs().join(path))
        try:
            r = subprocess.run(argv, env=self._env, capture_output=True, check=False, timeout=120)
        except subprocess.TimeoutExpired:
            raise DriveUnavailable(
                f"reading {path!r} took longer than 120 s; try again later",
                details={"path": path},
            ) from None
        if r.returncode != 0:
            raise self._cli_failure("read", path, r.returncode, r.stderr)
        return r.stdout[:max_bytes]

    # ----- transfers ------------------------------------------------------------------

    def _stream_up(
        self,
        fd: int,
        size: int,
        dest: str,
        types: list[str],
        progress: ProgressFn | None,
        confirm: Callable[[dict[str, str]], None],
    ) -> dict[str, str]:
        hs = transfer.hashers(types)
        argv = self._argv(
            "rcat", "--ignore-checksum", "--size", str(size), "--", self._fs().join(dest)
        )
        with tempfile.TemporaryFile() as err:
            proc = spawn(
                argv,
                self._env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
                bufsize=0,
            )
            try:
                assert proc.stdin is not None
                transfer.widen_pipe(proc.stdin.fileno())
                try:
                    transfer.pump_file_to_pipe(
                        fd, size, proc.stdin.fileno(), hs, transfer.Ticker(progress, size), confirm
                    )
                except BrokenPipeError:
                    pass  # rclone stopped reading; its exit status says why
                except BaseException:
                    proc.kill()  # never let rclone commit a partial or changed stream
                    raise
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()
                code = proc.wait()
            finally:
                stop(proc, grace=0)
            if code != 0:
                err.seek(0)
                raise self._cli_failure("upload to", dest, code, err.read())
        return {t: h.hexdigest() for t, h in hs.items()}

    def _stream_up_rcd(
        self,
        fd: int,
        size: int,
        dest: str,
        types: list[str],
        progress: ProgressFn | None,
        confirm: Callable[[dict[str, str]], None],
    ) -> dict[str, str]:
        """`_stream_up` for a small new file: read, hash and confirm every byte first
        (`transfer.read_held`), then send those bytes to rcd as one request."""
        hs = transfer.hashers(types)
        chunks = transfer.read_held(fd, size, hs, transfer.Ticker(progress, size), confirm)
        self._rc_upload(dest, chunks)
        return {t: h.hexdigest() for t, h in hs.items()}

    def _stream_down(
        self, path: str, fd: int | None, types: list[str], progress: ProgressFn | None, total: int
    ) -> tuple[int, dict[str, str]]:
        hs = transfer.hashers(types)
        argv = self._argv("cat", "--", self._fs().join(path))
        with tempfile.TemporaryFile() as err:
            proc = spawn(
                argv,
                self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                bufsize=0,
            )
            try:
                assert proc.stdout is not None
                transfer.widen_pipe(proc.stdout.fileno())
                n = transfer.pump_pipe_to_file(
                    proc.stdout.fileno(), fd, hs, transfer.Ticker(progress, total)
                )
                code = proc.wait()
            finally:
                stop(proc, grace=0)
            if code != 0:
                err.seek(0)
                raise self._cli_failure("download", path, code, err.read())
        return n, {t: h.hexdigest() for t, h in hs.items()}

    def _verify(self, dest: str, size: int, streamed: dict[str, str]) -> tuple[str, str | None]:
        """Check the stored object at `dest`; returns (verification, remote digest).

        One `operations/stat` gives its size and the remote's own digest of it.
        """
        vtype = preferred_digest(self.capabilities())
        found = self._stat(check_drive_path(dest), (vtype,) if vtype else ())
        if found is None or found.is_dir or (found.size is not None and found.size != size):
            raise DriveError(
                f"verifying {dest!r} failed: the remote holds "
                f"{'nothing' if found is None else found.size} bytes, expected {size}; "
                "the upload was not kept, accept the proposal again to retry",
                code="verify_failed",
                details={
                    "path": dest,
                    "expected_size": size,
                    "remote_size": None if found is None else found.size,
                },
            )
        remote = found.digests.get(vtype) if vtype else None
        if vtype and remote:
            if remote != streamed[vtype]:
                raise DriveError(
                    f"verifying {dest!r} failed: the remote's {vtype} is {remote}, the bytes "
                    f"sent hash to {streamed[vtype]}; accept the proposal again to retry",
                    code="verify_failed",
                    details={
                        "path": dest,
                        "digest_type": vtype,
                        "remote": remote,
                        "sent": streamed[vtype],
                    },
                )
            return f"digest:{vtype}", remote
        if not self._verify_readback:
            return "size", None
        _, back = self._stream_down(dest, None, ["sha256"], None, size)
        if back["sha256"] != streamed["sha256"]:
            raise DriveError(
                f"verifying {dest!r} failed: reading it back gave sha256 {back['sha256']}, "
                f"the bytes sent hash to {streamed['sha256']}; accept the proposal again",
                code="verify_failed",
                details={"path": dest, "readback": back["sha256"], "sent": streamed["sha256"]},
            )
        return "readback:sha256", None

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
    ) -> UploadResult:
        """Upload `size` bytes of `fd` (read from offset 0) to `remote_path`, verified.

        New files (and replacements where the remote can move onto an existing name)
        go to a temporary object in the target folder, are verified, then moved into
        place; `journal(temp_path)` is called before any byte is sent. Other
        replacements upload straight onto the target and are verified afterwards.
        Up to `rcd_upload_max` bytes, a temporary object is written through rcd (the
        bytes read and confirmed before any is sent), else through `rclone rcat`.

        Raises:
            AlreadyExists: the target exists (or is a folder) and `replace` is False.
            StaleEvidence: the bytes read differ from `expected_sha256`/`expected_digest`
                or from `size` (the file changed since the proposal). This is known before
                the last chunk goes to rclone, which is then stopped: no remote receives
                the whole of an unapproved file, nothing is moved or replaced.
            DriveError (code ``verify_failed``): the stored object does not match.
            DriveUnavailable, DriveError, NotFound: rclone failed.
        """
        remote_path = check_drive_path(remote_path)
        if not remote_path:
            raise UsageError("upload needs a file path, not the drive root")
        if expected_digest is not None and expected_digest[0].lower() not in DIGEST_PREFERENCE:
            raise UsageError(
                f"expected_digest type {expected_digest[0]!r} is not one of {DIGEST_PREFERENCE}"
            )
        caps = self.capabilities()
        existing = self.stat(remote_path)
        if existing is not None and (existing.is_dir or not replace):
            what = "a folder" if existing.is_dir else "a file"
            raise AlreadyExists(
                f"refusing to upload to {remote_path!r}: {what} exists there; "
                + ("choose another name" if existing.is_dir else "propose a replacement"),
                details={"path": remote_path, "is_dir": existing.is_dir},
            )
        direct = existing is not None and not caps.server_side_replace
        parent, name = split_path(remote_path)
        dest = remote_path if direct else f"{parent}/{temp_name(name)}".lstrip("/")
        vtype = preferred_digest(caps)
        types = [
            "sha256",
            *([vtype] if vtype else []),
            *([expected_digest[0].lower()] if expected_digest else []),
        ]
        via_rcd = not direct and size <= self.rcd_upload_max
        if not direct and journal is not None:
            journal(dest)
        try:
            streamed = (self._stream_up_rcd if via_rcd else self._stream_up)(
                fd,
                size,
                dest,
                types,
                progress,
                lambda got: self._check_expected(
                    got, expected_sha256, expected_digest, remote_path
                ),
            )
            verification, remote_digest = self._verify(dest, size, streamed)
            if not direct:
                if not replace and self.stat(remote_path) is not None:
                    raise AlreadyExists(
                        f"refusing to move the upload onto {remote_path!r}: something appeared "
                        "there during the upload; propose a replacement",
                        details={"path": remote_path},
                    )
                params = {
                    "srcFs": self._fs().raw,
                    "srcRemote": dest,
                    "dstFs": self._fs().raw,
                    "dstRemote": remote_path,
                }
                self._rc(
                    "operations/movefile",
                    params,
                    action="move into",
                    target=remote_path,
                    timeout=LONG_CALL_SECONDS,
                )
        except BaseException:
            if not direct:
                self.remove_temp(dest, quiet=True)
            raise
        return UploadResult(
            remote_path=remote_path,
            size=size,
            sha256=streamed["sha256"],
            verification=verification,  # type: ignore[arg-type]
            path_taken="direct-replace" if direct else "temp+move",
            digest_type=vtype if remote_digest else None,
            digest=remote_digest,
            temp_path=None if direct else dest,
        )

    @staticmethod
    def _check_expected(
        streamed: dict[str, str], sha256: str, digest: tuple[str, str] | None, target: str
    ) -> None:
        pairs = [("sha256", sha256.lower())]
        if digest is not None:
            pairs.append((digest[0].lower(), digest[1].lower()))
        for t, want in pairs:
            if streamed[t] != want:
                raise StaleEvidence(
                    f"the local file's {t} is now {streamed[t]}, the proposal approved {want}: "
                    f"it changed since the proposal; nothing was written to {target!r}; "
                    "propose the upload again",
                    details={"digest_type": t, "approved": want, "now": streamed[t]},
                )

    def download_to_fd(
        self, remote_path: str, fd: int, *, progress: ProgressFn | None = None
    ) -> DownloadResult:
        """Stream file `remote_path` into `fd` (`rclone cat`), hashing as it goes.

        The caller created `fd` (O_EXCL|O_NOFOLLOW temp file), and fsyncs and renames it.
        `digest_by_type` holds sha256 and each of the remote's hashlib types.

        Raises:
            NotFound: no such file (or it is a folder). DriveUnavailable / DriveError.
        """
        remote_path = check_drive_path(remote_path)
        found = self._require_file(remote_path, "download")
        types = ["sha256", *self.capabilities().hash_types]
        n, digests = self._stream_down(remote_path, fd, types, progress, found.size or 0)
        return DownloadResult(sha256=digests["sha256"], size=n, digest_by_type=digests)
