"""Uploads through `rclone rcd`: bytes as multipart `operations/uploadfile` requests.

`RcdUploads.upload` sends bytes already read and approved as one request (many small
files as one, `upload_many`); `upload_stream` sends a big file's body as placet reads it,
and a stopped stream waits for rclone's answer before the caller deletes the object
(docs/decisions/0006-rcd-and-uploads.md). Every upload goes to a temporary name the
caller verifies before it moves it: rclone may store a body cut short.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import secrets
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from placet.drive.proc import adopted
from placet.drive.rcd import Rcd, UnixHTTPConnection
from placet.errors import DriveError, DriveUnavailable

__all__ = ["RcdUploads"]


def _contains(chunks: Sequence[bytes], marker: bytes) -> bool:
    """`marker` occurs in the concatenation of `chunks` (also across their borders)."""
    tail = b""
    for c in chunks:
        if marker in tail + c[: len(marker)] or marker in c:
            return True
        tail = (tail + c[-(len(marker) - 1) :])[-(len(marker) - 1) :]
    return False


def _part_head(boundary: str, name: str) -> bytes:
    """The multipart header of one file part named `name` (RFC 2231 ``filename*``)."""
    quoted = urllib.parse.quote(name, safe="")
    return (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f"filename*=UTF-8''{quoted}\r\nContent-Type: application/octet-stream\r\n\r\n"
    ).encode()


class _SendFailed(Exception):
    """The socket refused part of a streamed body (rcd answered early, went away, or
    `Children.kill_all` closed the sending side)."""


_ABORT_WAIT_SECONDS = 60.0


class RcdUploads:
    """The uploads of one `Rcd` (the ``uploads`` part of `placet.drive.calls.RcloneCalls`)."""

    def __init__(self, rcd: Rcd) -> None:
        self._rcd = rcd

    def upload(
        self, fs: str, folder: str, name: str, chunks: Sequence[bytes], *, timeout: float
    ) -> dict[str, Any]:
        """`operations/uploadfile`: store `chunks` as object `name` in `folder` of `fs`.

        One multipart/form-data part whose file name is `name` (RFC 2231
        ``filename*=UTF-8''<percent-encoded>``, so any UTF-8 name survives the header);
        rclone stores it at `folder`/`name` (rclone docs: rc, operations/uploadfile, "each
        part in body represents a file to be uploaded"; it pipes the part through `Rcat`).
        The boundary is 128 random bits, checked absent from the content. The whole body
        is in `chunks` already: a request cut short is committed by rclone as a smaller
        file when it is below `--streaming-upload-cutoff`, so callers must only send
        bytes they have approved, and only to a temporary name. `Children.kill_all` of
        the calling thread's group shuts the request's socket down.

        Raises: as `call` (``cancelled`` when the group was killed).
        """
        return self.upload_many(fs, folder, [(name, chunks)], timeout=timeout)

    def upload_many(
        self,
        fs: str,
        folder: str,
        files: Sequence[tuple[str, Sequence[bytes]]],
        *,
        timeout: float,
    ) -> dict[str, Any]:
        """`upload` of several (name, chunks) files into `folder` as one request, one
        multipart part each (rclone stores every part of the body; on an error some may
        be stored and others not, so the caller removes them all). Same rules as
        `upload`: approved bytes only, temporary names only.

        rclone buffers each part up to its streaming cutoff (allocating the whole
        buffer per part), so the request sets the cutoff (`_config`
        ``StreamingUploadCutoff``) just above the largest part: still one known-size
        Put per file, and ~1 ms less CPU per small file than the daemon's 2 MiB cutoff
        (bench/sync_apply.py in docs/performance.md). It also skips rclone's own read-back of each
        object (``IgnoreChecksum``, as `rclone rcat --ignore-checksum` does): the caller
        verifies the stored object against the digest of the bytes it sent. And it sets
        ``LowLevelRetries`` to 1 for the request: rclone's `Copy`, which takes each part,
        tries a failed upload again that many times (deleting between tries) on top of
        the backend's own retries, which made a dead WebDAV server take three PUTs and
        ~10 s to fail; now the PUT is tried once, as `rclone rcat` tries it.

        Raises: as `call` (``cancelled`` when the group was killed).
        """
        every = [c for _, chunks in files for c in chunks]
        boundary = secrets.token_hex(16)
        while _contains(every, boundary.encode()):  # 2**-128 per try for real data
            boundary = secrets.token_hex(16)
        parts: list[bytes] = []
        for name, chunks in files:
            parts.append(_part_head(boundary, name))
            parts.extend(chunks)
            parts.append(b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        largest = max((sum(len(c) for c in chunks) for _, chunks in files), default=0)
        config = json.dumps(
            {"StreamingUploadCutoff": largest + 1, "IgnoreChecksum": True, "LowLevelRetries": 1}
        )
        query = urllib.parse.urlencode(
            {"fs": fs, "remote": folder, "_config": config}, quote_via=urllib.parse.quote
        )
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        answer = self._rcd.send(
            "operations/uploadfile",
            "/operations/uploadfile?" + query,
            [b"".join(parts)] if len(files) > 1 else parts,  # one send for many small ones
            headers,
            timeout=timeout,
            abortable=True,
        )
        return self._rcd.decode(*answer)

    def upload_stream(
        self,
        fs: str,
        folder: str,
        name: str,
        size: int,
        pump: Callable[[Callable[[bytes], None]], object],
        *,
        timeout: float,
    ) -> dict[str, Any]:
        """`operations/uploadfile` of one file of `size` bytes, sent as `pump(write)`
        produces it: nothing is held in memory, and the body goes out while placet reads
        and hashes the file. `pump` must call `write` with exactly `size` bytes in all,
        and raises to stop (a changed file, a local read error).

        rclone pipes the part through `Rcat`: it buffers the first
        `--streaming-upload-cutoff` bytes and streams the rest with `PutStream` (size
        unknown), so callers use this only on backends where an upload of unknown size
        costs nothing more (`placet.drive.routes.RCD_STREAM_BACKENDS`). rclone's own
        read-back is skipped (``IgnoreChecksum``): the caller verifies the stored object.

        A stopped body is never an approved upload: when `pump` raises or the socket
        refuses a write, the sending side is closed, rclone's answer is awaited (up to
        60 s) so that it is done with the object, and the error is raised. rclone may
        have stored what it got (a body cut short within the cutoff is stored as a
        smaller file), so `name` must be a temporary name the caller deletes and never
        moves unverified. A `KeyboardInterrupt` (the owner's second Ctrl-C, "quit at
        once") is raised without waiting: a stalled remote can keep rcd from answering,
        and the caller journaled the temporary name for the next attempt to remove.
        The boundary is 128 random bits, not checked against the content: a boundary
        inside it would end the part early, and the caller's size and digest check of
        the stored object refuses the result. The connection is a
        fresh one (a streamed body cannot be sent twice); `Children.kill_all` of the
        calling thread's group closes its sending side.

        Raises:
            whatever `pump` raised (after rclone answered).
            RcFailure: rclone answered with an error.
            DriveError: ``cancelled`` when the group was killed; the daemon could not be
                reached or stopped reading.
            DriveUnavailable: no progress within `timeout` seconds.
        """
        boundary = secrets.token_hex(16)
        head, tail = _part_head(boundary, name), f"\r\n--{boundary}--\r\n".encode()
        query = urllib.parse.urlencode(
            {"fs": fs, "remote": folder, "_config": json.dumps({"IgnoreChecksum": True})},
            quote_via=urllib.parse.quote,
        )
        group = adopted()
        conn, auth = self._rcd.fresh_connection(timeout)
        try:
            sock = conn.sock
            close_sending = functools.partial(sock.shutdown, socket.SHUT_WR)

            def write(data: bytes) -> None:
                try:
                    sock.sendall(data)
                except OSError as e:
                    raise _SendFailed(str(e)) from e

            with group.abortable(close_sending) if group is not None else contextlib.nullcontext():
                try:
                    conn.putrequest(
                        "POST", "/operations/uploadfile?" + query, skip_accept_encoding=True
                    )
                    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
                    conn.putheader("Authorization", auth)
                    conn.putheader("Content-Length", str(len(head) + size + len(tail)))
                    try:
                        conn.endheaders()
                    except OSError as e:
                        raise _SendFailed(str(e)) from e
                    write(head)
                    pump(write)
                    write(tail)
                except BaseException as e:
                    with contextlib.suppress(OSError):
                        close_sending()
                    if not isinstance(e, Exception):  # Ctrl-C twice: quit, never wait on rcd
                        raise
                    answer = _answer_after_abort(conn)
                    if group is not None and group.killed:
                        raise DriveError(
                            "operations/uploadfile was stopped: the transfers were cancelled",
                            code="cancelled",
                        ) from e
                    if not isinstance(e, _SendFailed):
                        raise
                    if answer is not None and answer[0] != 200:
                        self._rcd.decode(*answer)  # raises rclone's RcFailure
                    if isinstance(e.__cause__, TimeoutError):
                        raise DriveUnavailable(
                            f"rclone did not take the upload within {timeout:.0f} s; "
                            "try again later",
                            details={"method": "operations/uploadfile"},
                        ) from e
                    raise DriveError(
                        f"lost contact with rclone rcd during operations/uploadfile: {e}"
                    ) from e
                try:
                    resp = conn.getresponse()
                    status, raw = resp.status, resp.read()
                except TimeoutError as e:
                    raise DriveUnavailable(
                        f"rclone did not answer operations/uploadfile within {timeout:.0f} s; "
                        "try again later",
                        details={"method": "operations/uploadfile"},
                    ) from e
                except (OSError, http.client.HTTPException) as e:
                    raise DriveError(
                        f"lost contact with rclone rcd during operations/uploadfile: {e}"
                    ) from e
        finally:
            conn.close()
        return self._rcd.decode(status, raw)


def _answer_after_abort(conn: UnixHTTPConnection) -> tuple[int, bytes] | None:
    """rclone's answer to a request whose body was cut short (status, body), read
    within `_ABORT_WAIT_SECONDS`; None when none came."""
    try:
        if conn.sock is not None:
            conn.sock.settimeout(_ABORT_WAIT_SECONDS)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return None
