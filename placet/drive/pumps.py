"""Moving bytes between placet's own descriptors and rclone's pipes, hashing as they pass.

rclone reopens local paths by name, which would undo the `O_NOFOLLOW` descriptor walk
of docs/design.md section 6, so placet never gives rclone a local path: an upload streams a
descriptor placet opened into `rclone rcat`'s stdin (or, for a small new file, reads
it into memory with the same checks and sends those bytes to rcd), a download streams `rclone cat`'s
stdout into a temp file placet created (docs/design.md section 9, "transfers go through
placet's own descriptors"). Hashing happens in the same pass, so the digest describes
exactly the bytes that went over the pipe, not a second read of the file.

Progress is throttled: at most one call per MiB or per 100 ms, plus one at the end.

Thread-safe: the pumps share no state (each transfer has its own descriptors, hashers and
`Ticker`, and reads the source with `pread` at explicit offsets), so a sync's transfer
pool runs several at once; `progress` is called on the pumping thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterable

from placet.drive.base import ProgressFn
from placet.errors import DriveError, StaleEvidence

CHUNK = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux fcntl; a 1 MiB pipe halves the context switches of 64 KiB
_PROGRESS_BYTES = 1 << 20
_PROGRESS_SECONDS = 0.1


def widen_pipe(fd: int) -> None:
    """Best effort: raise the pipe's buffer to 1 MiB (Linux); ignored where refused."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, CHUNK)


def hashers(types: Iterable[str]) -> dict[str, hashlib._Hash]:
    """One hashlib object per type name (``sha256``, ``sha1``, ``md5``)."""
    return {t: hashlib.new(t) for t in dict.fromkeys(types)}


class Ticker:
    """Calls `progress(done, total)` at most every 1 MiB or 100 ms, and at `finish`."""

    def __init__(self, progress: ProgressFn | None, total: int) -> None:
        self._progress = progress
        self._total = total
        self._last_bytes = 0
        self._last_time = time.monotonic()

    def tick(self, done: int) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if done - self._last_bytes >= _PROGRESS_BYTES or now - self._last_time >= _PROGRESS_SECONDS:
            self._last_bytes, self._last_time = done, now
            self._progress(done, self._total)

    def finish(self, done: int) -> None:
        if self._progress is not None:
            self._progress(done, self._total)


def _local_io(what: str, e: OSError) -> DriveError:
    return DriveError(
        f"{what} failed: {e.strerror or e}; fix the local disk (space, permissions) and "
        "accept the proposal again",
        code="local_io_error",
        details={"errno": e.errno},
    )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def pump_file_to_pipe(
    src_fd: int,
    size: int,
    pipe_fd: int,
    hs: dict[str, hashlib._Hash],
    ticker: Ticker,
    confirm: Callable[[dict[str, str]], None] | None = None,
) -> int:
    """`pump_file` into the pipe `pipe_fd` (rcat's stdin); same rules, same errors."""
    return pump_file(src_fd, size, lambda chunk: _write_all(pipe_fd, chunk), hs, ticker, confirm)


def read_held(
    src_fd: int,
    size: int,
    hs: dict[str, hashlib._Hash],
    ticker: Ticker,
    confirm: Callable[[dict[str, str]], None],
) -> list[bytes]:
    """All `size` bytes of `src_fd` as chunks, hashed, held back until `confirm` returned.

    `pump_file` with every chunk held: the caller sends these very bytes (never a second
    read) only after `confirm` accepted their digests, so a changed file sends nothing.
    Meant for small files (the rcd upload path, `Transfers.rcd_upload_max`); raises
    as `pump_file`.
    """
    chunks: list[bytes] = []
    pump_file(src_fd, size, chunks.append, hs, ticker, confirm)
    return chunks


def pump_file(
    src_fd: int,
    size: int,
    write: Callable[[bytes], None],
    hs: dict[str, hashlib._Hash],
    ticker: Ticker,
    confirm: Callable[[dict[str, str]], None] | None = None,
) -> int:
    """Send exactly `size` bytes of `src_fd` (read from offset 0 with `pread`) to `write`.

    The last chunk is held back until every byte has been read and hashed, the file is
    known to end at `size`, and `confirm(hex digests by type)` has returned: a remote
    commits an object once it has all `size` bytes (an S3 PUT, a Proton revision), so a
    file that changed since the proposal must be refused before that, not after.

    Returns the bytes sent (= `size`).

    Raises:
        StaleEvidence: the file is shorter or longer than `size`, or `confirm` raised it
            (it changed since the proposal); the caller must stop rclone before it sees
            EOF, so that what it received is never committed.
        DriveError (code ``local_io_error``): the local file could not be read.
        whatever `write` raises: BrokenPipeError when rcat stopped reading (it failed;
            its exit status says why).
    """
    offset = 0
    while True:
        want = min(CHUNK, size - offset)
        try:
            chunk = os.pread(src_fd, want, offset) if want else b""
            beyond = os.pread(src_fd, 1, size) if offset + len(chunk) >= size else b""
        except OSError as e:
            raise _local_io("reading the local file", e) from e
        if want and not chunk:
            raise StaleEvidence(
                f"the local file ended after {offset} of {size} bytes during the upload: it "
                "changed since the proposal; propose the upload again",
                details={"expected_size": size, "read_size": offset},
            )
        if beyond:
            raise StaleEvidence(
                f"the local file grew past {size} bytes during the upload: it changed since "
                "the proposal; propose the upload again",
                details={"expected_size": size},
            )
        for h in hs.values():
            h.update(chunk)
        last = offset + len(chunk) >= size
        if last and confirm is not None:
            confirm({t: h.hexdigest() for t, h in hs.items()})
        if chunk:
            write(chunk)
        offset += len(chunk)
        if last:
            break
        ticker.tick(offset)
    ticker.finish(offset)
    return offset


def pump_pipe_to_file(
    pipe_fd: int, dst_fd: int | None, hs: dict[str, hashlib._Hash], ticker: Ticker
) -> int:
    """Copy everything from `pipe_fd` into `dst_fd` (None: only hash). Returns bytes copied.

    Raises:
        DriveError (code ``local_io_error``): writing `dst_fd` failed (disk full...).
    """
    done = 0
    while True:
        chunk = os.read(pipe_fd, CHUNK)
        if not chunk:
            break
        for h in hs.values():
            h.update(chunk)
        if dst_fd is not None:
            try:
                _write_all(dst_fd, chunk)
            except OSError as e:
                raise _local_io("writing the downloaded bytes", e) from e
        done += len(chunk)
        ticker.tick(done)
    ticker.finish(done)
    return done
