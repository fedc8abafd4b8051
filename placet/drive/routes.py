"""Which way an upload's bytes reach rclone: through rcd, or an `rclone rcat` child.

A new file up to `RCD_UPLOAD_MAX` bytes goes to rcd as one request (`RcdUploads.upload`); a
larger one on `RCD_STREAM_BACKENDS`, up to its cap, streams to rcd as it is read
(`RcdUploads.upload_stream`); every other upload, and every direct replacement, goes through
`rclone rcat --size`. The figures come from bench/sync_apply.py and
bench/big_upload_floor.py (docs/performance.md; docs/decisions/0006-rcd-and-uploads.md).
"""

from __future__ import annotations

from typing import Literal

Via = Literal["rcat", "rcd", "rcd-stream"]
"""How an upload's bytes reach rclone (`placet.drive.transfers.Transfers`)."""

RCD_UPLOAD_MAX = 2 << 20
"""New files of at most this many bytes are uploaded through rcd (`operations/uploadfile`),
larger ones and direct replacements through `rclone rcat` (bench/sync_apply.py in
docs/performance.md: a small file costs ~70 ms of rcat start-up against a few ms through
rcd)."""


RCD_STREAM_BACKENDS = frozenset({"sftp", "local"})
"""Backends whose uploads above `RCD_UPLOAD_MAX` stream through rcd (`RcdUploads.upload_stream`)
instead of an `rclone rcat` process (and, on sftp, an SSH handshake) per file: rcd
stores a streamed body with `PutStream` (size unknown), which sftp and a local folder
write as they read it. Others size a chunked upload by the known size (S3: an unknown
size caps a file at chunk size x 10,000) or spool a stream to a local temporary file,
so they keep `rclone rcat --size`. On a local folder the rcat process costs ~40-60 ms
of wall and CPU per file, a third of a 32 MiB upload, up to `RCD_STREAM_LOCAL_MAX`
(bench/sync_apply.py in docs/performance.md)."""

RCD_STREAM_MAX = 256 << 20
"""Uploads above this many bytes go through `rclone rcat` even on `RCD_STREAM_BACKENDS`:
rcd reads a multipart body in 4 KiB pieces (Go's multipart reader), ~0.35 s more CPU
per GiB than rcat reading its pipe, against ~0.1 s for an rcat process and SSH handshake
per file (bench/big_upload_floor.py in docs/performance.md)."""

RCD_STREAM_LOCAL_MAX = 48 << 20
"""On a local folder, uploads above this many bytes go through `rclone rcat`: rcd's 4 KiB
reads cost more CPU than the rcat process saves from ~48 MiB on (measured per file,
alternating: 32 MiB -40 ms of CPU through rcd, 64 MiB +57 ms, 256 MiB +357 ms)."""
