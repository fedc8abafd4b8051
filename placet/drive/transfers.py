"""How bytes move between placet's descriptors and the drive, and when an upload counts.

Bytes go through `rclone rcat` / `rclone cat` fed from placet's own descriptors
(`placet.drive.pumps`), through rcd for small new files (`RcdUploads.upload`) and, on
`RCD_STREAM_BACKENDS`, for larger ones up to their cap (`RcdUploads.upload_stream`);
`placet.drive.routes` says which and why.

An upload never shows unapproved bytes under the target name (docs/design.md section 3;
docs/decisions/0007-upload-checks.md): it goes to a temporary name, its stream is hashed
and matched before the last chunk, the temporary object is checked, moved, and the object
under the target checked again; a replaced object waits under a backup name until then.
Any failure deletes the temporary object. A name that differs from one in its folder only
by Unicode normalization is refused (`placet.drive.twins`), for files and folders alike.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Callable, Iterator

from placet.drive import pumps
from placet.drive.base import (
    DownloadResult,
    Entry,
    JournalFn,
    ProgressFn,
    UploadResult,
    preferred_digest,
)
from placet.drive.calls import RcloneCalls
from placet.drive.failures import check_digest_type, check_expected, digest_mismatch, size_mismatch
from placet.drive.listing import Listing
from placet.drive.proc import spawn, stop
from placet.drive.routes import (
    RCD_STREAM_BACKENDS,
    RCD_STREAM_LOCAL_MAX,
    RCD_STREAM_MAX,
    RCD_UPLOAD_MAX,
    Via,
)
from placet.drive.spec import check_drive_path, split_path
from placet.drive.temps import Temps, backup_name, temp_name
from placet.drive.twins import normalization_twin, twin_free, twin_refused
from placet.errors import (
    AlreadyExists,
    DriveError,
    DriveUnavailable,
    NotFound,
    PlacetError,
    UsageError,
)

__all__ = ["Transfers"]


class Transfers:
    """Uploads, downloads, reads and new folders (the ``transfers`` part of `RcloneDrive`).

    `rcd_upload_max`: new files up to this many bytes go through rcd rather than rcat
    (default `RCD_UPLOAD_MAX`; -1 sends every upload through rcat, as benchmarks compare).
    `rcd_stream_backends`: on these backends (default `RCD_STREAM_BACKENDS`; empty
    sends them through rcat, as benchmarks compare), larger uploads to a temporary
    object, up to `rcd_stream_max` bytes (default `RCD_STREAM_MAX`; on a local folder
    at most `RCD_STREAM_LOCAL_MAX`), stream through rcd rather than rcat.
    `verify_readback`: on a remote without digests, read an upload back to verify it
    (True) or trust the size alone (False; the result says ``size``).
    """

    rcd_upload_max: int = RCD_UPLOAD_MAX
    rcd_stream_backends: frozenset[str] = RCD_STREAM_BACKENDS
    rcd_stream_max: int = RCD_STREAM_MAX

    def __init__(
        self, calls: RcloneCalls, listing: Listing, temps: Temps, *, verify_readback: bool
    ) -> None:
        self._calls = calls
        self._listing = listing
        self._temps = temps
        self._verify_readback = verify_readback

    def mkdir(self, path: str) -> None:
        """Create folder `path` and its parents; an existing folder is fine.

        Raises:
            AlreadyExists: a file occupies `path` or one of its parents, or `path`'s
                name differs only by Unicode normalization from a name in its folder
                (details ``existing_name``; `placet.drive.twins`).
        """
        path = check_drive_path(path)
        found = self._listing.stat(path) if path else None
        if path:
            self.refuse_normalization_twin(path, found, action="create folder")
        if found is not None and not found.is_dir:
            raise AlreadyExists(
                f"cannot create folder {path!r}: a file has that name; choose another name",
                details={"path": path},
            )
        params = {"fs": self._calls.fs().raw, "remote": path}
        self._calls.rc("operations/mkdir", params, action="create folder", target=path)

    def refuse_normalization_twin(
        self, path: str, existing: Entry | None, *, action: str = "upload to"
    ) -> None:
        """Refuse to write `path` when its folder holds another name equal to its name
        only under Unicode normalization (`placet.drive.twins`): `existing` is the stat
        of `path` (a remote may answer it with the twin); a name not `twin_free` (non-ASCII,
        or holding ``K``, ``;`` or a backquote) costs one listing of the folder. Only the
        last component is checked.

        Raises:
            AlreadyExists: such a twin exists (details ``path``, ``existing_name``).
        """
        parent, name = split_path(path)
        # the stat's answer under another name: a twin only if the NFC forms match (a
        # case-folding remote answering ``foo`` for ``Foo`` is not this rule's concern)
        twin = normalization_twin(name, [existing.name]) if existing is not None else None
        if twin is None and not twin_free(name):
            try:
                rows = self._listing.list_rows(parent, recurse=False)
            except NotFound:
                rows = []
            twin = normalization_twin(name, (split_path(row[0])[1] for row in rows))
        if twin is not None:
            raise twin_refused(path, twin, action)

    def read_head(self, path: str, max_bytes: int) -> bytes:
        """The first `max_bytes` bytes (1-1 MiB) of file `path` (`rclone cat --count`)."""
        path = check_drive_path(path)
        if not 1 <= max_bytes <= 1 << 20:
            raise UsageError(f"max_bytes must be between 1 and 1048576, got {max_bytes}")
        self._listing.require_file(path, "read")
        argv = self._calls.argv("cat", "--count", str(max_bytes), "--", self._calls.fs().join(path))
        try:
            r = subprocess.run(
                argv, env=self._calls.env, capture_output=True, check=False, timeout=120
            )
        except subprocess.TimeoutExpired:
            raise DriveUnavailable(
                f"reading {path!r} took longer than 120 s; try again later",
                details={"path": path},
            ) from None
        if r.returncode != 0:
            raise self._calls.cli_failure("read", path, r.returncode, r.stderr)
        return r.stdout[:max_bytes]

    # ----- uploads and downloads -------------------------------------------------------

    @contextlib.contextmanager
    def _cli_child(
        self, argv: list[str], action: str, target: str, *, upload: bool
    ) -> Iterator[subprocess.Popen[bytes]]:
        """Run one rclone CLI child around the body: its stdin a pipe (`upload`) or its
        stdout a pipe (download), stderr kept in a temporary file. After the body the
        child is waited for; it is stopped however the body ends, and a non-zero exit
        raises `_cli_failure(action, target, ...)`."""
        with tempfile.TemporaryFile() as err:
            proc = spawn(
                argv,
                self._calls.env,
                stdin=subprocess.PIPE if upload else subprocess.DEVNULL,
                stdout=subprocess.DEVNULL if upload else subprocess.PIPE,
                stderr=err,
                bufsize=0,
            )
            try:
                yield proc
                code = proc.wait()
            finally:
                stop(proc, grace=0)
            if code != 0:
                err.seek(0)
                raise self._calls.cli_failure(action, target, code, err.read())

    def _stream_up(
        self,
        fd: int,
        size: int,
        dest: str,
        types: list[str],
        progress: ProgressFn | None,
        confirm: Callable[[dict[str, str]], None],
        *,
        via: Via,
    ) -> dict[str, str]:
        """Send `size` bytes of `fd` to `dest`, hashed as `types`; returns {type: hex}.

        `via` ``rcat`` (an `rclone rcat` child's stdin) and ``rcd-stream`` (a request to
        rcd sent as the file is read, `RcdUploads.upload_stream`): `confirm(digests)` runs
        before the last chunk is sent. ``rcd`` (a small new file): read, hash and
        confirm every byte first (`pumps.read_held`), then send those bytes to rcd as
        one request."""
        hs = pumps.hashers(types)
        ticker = pumps.Ticker(progress, size)
        if via == "rcd":
            self._calls.rc_upload(dest, pumps.read_held(fd, size, hs, ticker, confirm))
            return {t: h.hexdigest() for t, h in hs.items()}
        if via == "rcd-stream":
            self._calls.rc_upload_stream(
                dest, size, lambda write: pumps.pump_file(fd, size, write, hs, ticker, confirm)
            )
            return {t: h.hexdigest() for t, h in hs.items()}
        argv = self._calls.argv(
            "rcat", "--ignore-checksum", "--size", str(size), "--", self._calls.fs().join(dest)
        )
        with self._cli_child(argv, "upload to", dest, upload=True) as proc:
            assert proc.stdin is not None
            pumps.widen_pipe(proc.stdin.fileno())
            try:
                pumps.pump_file_to_pipe(fd, size, proc.stdin.fileno(), hs, ticker, confirm)
            except BrokenPipeError:
                pass  # rclone stopped reading; its exit status says why
            except BaseException:
                proc.kill()  # never let rclone commit a partial or changed stream
                raise
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        return {t: h.hexdigest() for t, h in hs.items()}

    def _stream_down(
        self, path: str, fd: int | None, types: list[str], progress: ProgressFn | None, total: int
    ) -> tuple[int, dict[str, str]]:
        hs = pumps.hashers(types)
        argv = self._calls.argv("cat", "--", self._calls.fs().join(path))
        with self._cli_child(argv, "download", path, upload=False) as proc:
            assert proc.stdout is not None
            pumps.widen_pipe(proc.stdout.fileno())
            n = pumps.pump_pipe_to_file(proc.stdout.fileno(), fd, hs, pumps.Ticker(progress, total))
        return n, {t: h.hexdigest() for t, h in hs.items()}

    def _verify(
        self, dest: str, size: int, streamed: dict[str, str]
    ) -> tuple[str, str | None, str | None]:
        """Check the stored object at `dest`; returns (verification, remote digest, its
        mtime as RFC 3339 or None).

        One `operations/stat` gives its size, mtime and the remote's own digest of it.
        """
        vtype = preferred_digest(self._calls.capabilities())
        found = self._listing.fresh_stat(check_drive_path(dest), (vtype,) if vtype else ())
        if found is None or found.is_dir or (found.size is not None and found.size != size):
            raise size_mismatch(dest, size, found)
        remote = found.digests.get(vtype) if vtype else None
        if vtype and remote:
            if remote != streamed[vtype]:
                raise digest_mismatch(dest, vtype, remote, streamed[vtype])
            return f"digest:{vtype}", remote, found.mtime
        if not self._verify_readback:
            return "size", None, found.mtime
        _, back = self._stream_down(dest, None, ["sha256"], None, size)
        if back["sha256"] != streamed["sha256"]:
            raise DriveError(
                f"verifying {dest!r} failed: reading it back gave sha256 {back['sha256']}, "
                f"the bytes sent hash to {streamed['sha256']}; accept the proposal again",
                code="verify_failed",
                details={"path": dest, "readback": back["sha256"], "sent": streamed["sha256"]},
            )
        return "readback:sha256", None, found.mtime

    def _place(
        self,
        temp: str,
        target: str,
        size: int,
        streamed: dict[str, str],
        *,
        replace: bool,
        journal: JournalFn | None,
    ) -> str | None:
        """Move verified temporary object `temp` onto `target`, then prove that what now
        sits under `target` is the approved bytes (the temporary object
        can be swapped between its check and the move, and a move takes whatever is
        there). A replaced object is first moved aside to a backup name (journaled like
        a temp, `placet.names.BACKUP_PREFIX`); when the proof fails it is moved back, a
        new target is deleted, and `verify_failed` is raised. The backup is deleted once
        the proof holds. Returns the target's mtime as the proof read it (None: unknown).

        Raises:
            AlreadyExists: not `replace` and something appeared at `target`.
            DriveError (``verify_failed``): `target` did not hold the approved bytes after
                the move (the previous state was put back).
            DriveUnavailable, DriveError: rclone failed (a backup is moved back first).
        """
        parent, name = split_path(target)
        backup: str | None = None
        if not replace:
            if self._listing.stat(target) is not None:
                raise AlreadyExists(
                    f"refusing to move the upload onto {target!r}: something appeared "
                    "there during the upload; propose a replacement",
                    details={"path": target},
                )
        elif self._listing.fresh_stat(target, ()) is not None:
            backup = f"{parent}/{backup_name(name)}".lstrip("/")
            if journal is not None:
                journal(backup)
            try:
                self._calls.move(target, backup)
            except NotFound:
                backup = None  # gone meanwhile: the upload makes a new file
        try:
            self._calls.move(temp, target)
        except BaseException:
            if backup is not None:
                self._undo_place(target, backup)
            raise
        try:
            _, _, mtime = self._verify(target, size, streamed)
        except DriveError as e:
            if e.error_code != "verify_failed":
                if backup is not None:
                    self._undo_place(target, backup)
                raise
            self._undo_place(target, backup)
            raise DriveError(
                f"after the move, {target!r} did not hold the approved bytes (the temporary "
                "object was changed after it was verified); "
                + ("its previous content was put back" if backup else "it was removed")
                + "; accept the proposal again to retry",
                code="verify_failed",
                details={**e.details, "path": target, "restored": backup is not None},
            ) from e
        if backup is not None:
            with contextlib.suppress(PlacetError):
                self._calls.delete(backup, "delete backup")
        return mtime

    def _undo_place(self, target: str, backup: str | None) -> None:
        """Undo a move onto `target`: its previous content moved back from `backup`, or
        (a new file) the object deleted. Quiet: the caller reports its own error; a
        backup that could not be moved back stays under its name (the journal has it)."""
        with contextlib.suppress(PlacetError):
            if backup is not None:
                self._calls.move(backup, target)
            else:
                self._calls.delete(target, "remove unverified")

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
        bytes read and confirmed before any is sent); a larger one on a backend of
        `rcd_stream_backends`, up to `rcd_stream_max` bytes, streams to rcd as it is
        read; else it goes through `rclone rcat`
        (both get the last chunk only after the digests are confirmed).

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
        check_digest_type(expected_digest)
        caps = self._calls.capabilities()
        existing = self._listing.stat(remote_path)
        self.refuse_normalization_twin(remote_path, existing)
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
        via: Via = "rcat"
        if not direct and size <= self.rcd_upload_max:
            via = "rcd"
        elif not direct and caps.backend in self.rcd_stream_backends:
            cap = self.rcd_stream_max
            if caps.backend == "local":
                cap = min(cap, RCD_STREAM_LOCAL_MAX)
            if size <= cap:
                via = "rcd-stream"
        if not direct and journal is not None:
            journal(dest)
        try:
            streamed = self._stream_up(
                fd,
                size,
                dest,
                types,
                progress,
                lambda got: check_expected(got, expected_sha256, expected_digest, remote_path),
                via=via,
            )
            verification, remote_digest, mtime = self._verify(dest, size, streamed)
            if not direct:
                mtime = self._place(
                    dest, remote_path, size, streamed, replace=replace, journal=journal
                )
        except KeyboardInterrupt:
            raise  # quit at once: a stalled remote would hold the delete; the journal has it
        except BaseException:
            if not direct:
                self._temps.remove_temp(dest, quiet=True)
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
            mtime=mtime,
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
        found = self._listing.require_file(remote_path, "download")
        types = ["sha256", *self._calls.capabilities().hash_types]
        n, digests = self._stream_down(remote_path, fd, types, progress, found.size or 0)
        return DownloadResult(sha256=digests["sha256"], size=n, digest_by_type=digests)
