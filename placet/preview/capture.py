"""Capturing previews when a proposal is made, and storing them with it.

A local file's preview is kept by the read that computes its digest
(`placet.proposals.evidence.local_file_evidence_and_head`), so it is of the very bytes
the evidence names (``same_read``). A remote file's is read through rclone right after
its evidence (`Drive.read_head`, at most the per-op cap) and checked against the
evidence's digest when the whole file fits (``digest``), else kept ``unchecked``; one
whose digest differs is not kept (the file changed in between, and the executor will
say so). A sync's ops are not captured: they are read op by op when the owner opens one
(`placet.preview.opening`), so a sync of any size stays within the caps.

The captures are stored by the transaction that creates the proposal
(`Store.create_proposal(previews=...)`), cut to `Settings.preview_proposal_bytes`.
Capturing never fails a proposal: an unreadable remote leaves it without that preview,
which is then read, and checked, when opened.
"""

from __future__ import annotations

import logging

from placet.config import Settings
from placet.drive.base import Drive
from placet.errors import PlacetError
from placet.preview.reading import remote_binding
from placet.schema import LocalFileEvidence, RemoteEvidence
from placet.store.db import utcnow
from placet.store.previews import StoredPreview

__all__ = ["capture_local", "capture_remote", "op_cap"]

log = logging.getLogger(__name__)


def op_cap(settings: Settings) -> int:
    """Bytes of one file a preview holds (0: previews are off)."""
    return min(settings.preview_op_bytes, settings.preview_proposal_bytes)


def capture_local(
    op_index: int, role: str, head: bytes, evidence: LocalFileEvidence, cap: int
) -> StoredPreview | None:
    """The preview a local file's digest read kept (`head`), bound ``same_read``; None
    when previews are off (`cap` 0)."""
    if cap <= 0:
        return None
    return StoredPreview(op_index, role, evidence.size, "same_read", head[:cap], utcnow())


def capture_remote(
    drive: Drive, path: str, evidence: RemoteEvidence, cap: int, op_index: int, role: str
) -> StoredPreview | None:
    """The first `cap` bytes of the remote file `path` (read now), bound to `evidence`;
    None when it is no file, previews are off, it cannot be read, or its digest differs."""
    if cap <= 0 or not evidence.exists or evidence.is_dir:
        return None
    size = evidence.size
    want = cap if size is None else min(cap, size)
    try:
        data = drive.read_head(path, want) if want > 0 else b""
    except PlacetError as e:
        log.info("no preview of remote %r: %s", path, e.message)
        return None
    binding = remote_binding(data, size, evidence)
    if binding is None:
        return None
    return StoredPreview(op_index, role, size, binding, data, utcnow())
