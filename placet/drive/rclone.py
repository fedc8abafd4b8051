"""The drive as rclone reaches it: metadata through `rclone rcd`, bytes through the CLI.

Metadata goes to one long-lived `rclone rcd` (`placet.drive.rclone_core`, listings in
`placet.drive.rclone_listing`). This module decides how bytes move and when an upload
counts as stored: through `rclone rcat` / `rclone cat` fed from placet's own descriptors
(`placet.drive.transfer`), through rcd for small new files (`Rcd.upload`) and, on
`RCD_STREAM_BACKENDS`, for larger ones up to their cap (`Rcd.upload_stream`);
docs/decisions/0006-rcd-and-uploads.md says which and why.

An upload never shows unapproved bytes under the target name (docs/design.md section 3;
docs/decisions/0007-upload-checks.md): it goes to a temporary name, its stream is hashed
and matched before the last chunk, the temporary object is checked, moved, and the object
under the target checked again; a replaced object waits under a backup name until then.
Any failure deletes the temporary object. `clear_caches` drops rcd's cached backends
before an evidence check or a plan's listing."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

from placet.drive import transfer
from placet.drive.base import (
    DownloadResult,
    JournalFn,
    ProgressFn,
    UploadResult,
    preferred_digest,
)
from placet.drive.failures import digest_mismatch, size_mismatch
from placet.drive.proc import spawn, stop
from placet.drive.rclone_batch import BatchOutcome, NewFile, batch_ok, upload_new_batch
from placet.drive.rclone_core import (
    RCD_STREAM_BACKENDS,
    RCD_STREAM_LOCAL_MAX,
    RCD_STREAM_MAX,
    RCD_UPLOAD_MAX,
    backup_name,
    split_path,
    temp_name,
)
from placet.drive.rclone_listing import RcloneListing
from placet.drive.spec import check_drive_path
from placet.errors import (
    AlreadyExists,
    DriveError,
    DriveUnavailable,
    NotFound,
    PlacetError,
    StaleEvidence,
    UsageError,
)
from placet.schema import DIGEST_PREFERENCE

__all__ = ["RcloneDrive"]

Via = Literal["rcat", "rcd", "rcd-stream"]
"""How an upload's bytes reach rclone (`RcloneDrive._stream_up`)."""


class RcloneDrive(RcloneListing):
    """A `Drive` over rclone: listings with cached digests (`RcloneListing`), paged
    folders, transfers.

    Construct with `RcloneDrive(spec, *, rclone_path, env, run_dir, flags=(), verify_readback=True)`
    (see `RcloneCore`), or get the configured one from `placet.drive.drive_for`.

    `rcd_upload_max`: new files up to this many bytes go through rcd rather than rcat
    (default `RCD_UPLOAD_MAX`; -1 sends every upload through rcat, as benchmarks compare).
    `rcd_stream_backends`: on these backends (default `RCD_STREAM_BACKENDS`; empty
    sends them through rcat, as benchmarks compare), larger uploads to a temporary
    object, up to `rcd_stream_max` bytes (default `RCD_STREAM_MAX`; on a local folder
    at most `RCD_STREAM_LOCAL_MAX`), stream through rcd rather than rcat.
    """

    rcd_upload_max: int = RCD_UPLOAD_MAX
    rcd_stream_backends: frozenset[str] = RCD_STREAM_BACKENDS
    rcd_stream_max: int = RCD_STREAM_MAX

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
                self._env,
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
                raise self._cli_failure(action, target, code, err.read())

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
        rcd sent as the file is read, `Rcd.upload_stream`): `confirm(digests)` runs
        before the last chunk is sent. ``rcd`` (a small new file): read, hash and
        confirm every byte first (`transfer.read_held`), then send those bytes to rcd as
        one request."""
        hs = transfer.hashers(types)
        ticker = transfer.Ticker(progress, size)
        if via == "rcd":
            self._rc_upload(dest, transfer.read_held(fd, size, hs, ticker, confirm))
            return {t: h.hexdigest() for t, h in hs.items()}
        if via == "rcd-stream":
            self._rc_upload_stream(
                dest, size, lambda write: transfer.pump_file(fd, size, write, hs, ticker, confirm)
            )
            return {t: h.hexdigest() for t, h in hs.items()}
        argv = self._argv(
            "rcat", "--ignore-checksum", "--size", str(size), "--", self._fs().join(dest)
        )
        with self._cli_child(argv, "upload to", dest, upload=True) as proc:
            assert proc.stdin is not None
            transfer.widen_pipe(proc.stdin.fileno())
            try:
                transfer.pump_file_to_pipe(fd, size, proc.stdin.fileno(), hs, ticker, confirm)
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
        hs = transfer.hashers(types)
        argv = self._argv("cat", "--", self._fs().join(path))
        with self._cli_child(argv, "download", path, upload=False) as proc:
            assert proc.stdout is not None
            transfer.widen_pipe(proc.stdout.fileno())
            n = transfer.pump_pipe_to_file(
                proc.stdout.fileno(), fd, hs, transfer.Ticker(progress, total)
            )
        return n, {t: h.hexdigest() for t, h in hs.items()}

    def _verify(
        self, dest: str, size: int, streamed: dict[str, str]
    ) -> tuple[str, str | None, str | None]:
        """Check the stored object at `dest`; returns (verification, remote digest, its
        mtime as RFC 3339 or None).

        One `operations/stat` gives its size, mtime and the remote's own digest of it.
        """
        vtype = preferred_digest(self.capabilities())
        found = self._stat(check_drive_path(dest), (vtype,) if vtype else ())
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
            if self.stat(target) is not None:
                raise AlreadyExists(
                    f"refusing to move the upload onto {target!r}: something appeared "
                    "there during the upload; propose a replacement",
                    details={"path": target},
                )
        elif self._stat(target, ()) is not None:
            backup = f"{parent}/{backup_name(name)}".lstrip("/")
            if journal is not None:
                journal(backup)
            try:
                self._move(target, backup)
            except NotFound:
                backup = None  # gone meanwhile: the upload makes a new file
        try:
            self._move(temp, target)
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
                self._delete(backup, "delete backup")
        return mtime

    def _undo_place(self, target: str, backup: str | None) -> None:
        """Undo a move onto `target`: its previous content moved back from `backup`, or
        (a new file) the object deleted. Quiet: the caller reports its own error; a
        backup that could not be moved back stays under its name (the journal has it)."""
        with contextlib.suppress(PlacetError):
            if backup is not None:
                self._move(backup, target)
            else:
                self._delete(target, "remove unverified")

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
        if expected_digest is not None and expected_digest[0].lower() not in DIGEST_PREFERENCE:
            raise UsageError(
                f"expected_digest type {expected_digest[0]!r} is not one of {DIGEST_PREFERENCE}"
            )
        caps = self.capabilities()
        existing = self.stat(remote_path)
        self._refuse_normalization_twin(remote_path, existing)
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
                lambda got: self._check_expected(
                    got, expected_sha256, expected_digest, remote_path
                ),
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
            mtime=mtime,
        )

    # ----- batches of small new files (placet.drive.rclone_batch) ------------------------

    def can_batch(self) -> bool:
        """True when `upload_new_batch` may be used on this drive (see `batch_ok`)."""
        return batch_ok(self)

    def upload_new_batch(
        self,
        files: Sequence[NewFile],
        *,
        journal: Callable[[list[tuple[int, str]]], None] | None = None,
        ready: Callable[[int], None] | None = None,
    ) -> list[BatchOutcome]:
        """Upload new small files of one folder in a few requests, each verified and
        moved into place as `upload_from_fd` does; see `rclone_batch.upload_new_batch`."""
        return upload_new_batch(self, files, journal=journal, ready=ready)

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
