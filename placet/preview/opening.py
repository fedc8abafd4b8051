"""Opening one op's preview: what was captured when proposed, or a read now, each checked.

The shells (`placet show --diff`, the review UI's content view, `placet web`) call
`open_preview` with the op they show. For a proposal that may still run (pending,
approved, executing, failed, interrupted), every side is checked now against the
evidence (`placet.preview.reading`): a local file is re-read (bounded) and compared, a
remote one looked up; so a file edited after proposing shows as "changed since
proposed", never as the content that would land. A side captured when proposed is
shown from the store; one that was not (a sync's ops, a crash before the previews were
stored) is read now, at most `Settings.preview_op_bytes`. A decided proposal's stored
previews are shown as captured, said so, and nothing is read for it.
"""

from __future__ import annotations

from placet.config import Settings
from placet.errors import PlacetError
from placet.preview.capture import op_cap
from placet.preview.model import OpPreview, Side
from placet.preview.reading import (
    DriveSource,
    read_local,
    read_remote,
    recheck_remote,
    stored_binding,
)
from placet.preview.render import Content
from placet.schema import LocalFileEvidence, Op, RemoteEvidence, RootRef
from placet.store import ProposalRecord, Store
from placet.store.lifecycle import ACCEPTABLE, APPROVED, EXECUTING
from placet.store.previews import StoredPreview
from placet.text import inert

__all__ = ["LIVE", "open_preview", "root_of", "writes_file"]

LIVE = frozenset({*ACCEPTABLE, APPROVED, EXECUTING})
"""Statuses of a proposal that may still run: its previews are checked when opened."""


def root_of(record: ProposalRecord) -> RootRef | None:
    """The local root of `record`'s request, or None (a mkdir, or unreadable)."""
    raw = record.request.get("root") if isinstance(record.request, dict) else None
    try:
        return RootRef.model_validate(raw) if isinstance(raw, dict) else None
    except ValueError:
        return None


def writes_file(op: Op) -> bool:
    """Whether `op` writes a file (so has content to preview)."""
    return op.kind in ("upload", "upload_revision", "download")


class _Opener:
    def __init__(
        self, store: Store, settings: Settings, record: ProposalRecord, drive: DriveSource | None
    ) -> None:
        self.record = record
        self.cap = op_cap(settings)
        self.drive = drive
        self.root = root_of(record)
        self.live = record.status in LIVE
        self.store = store

    def side(
        self,
        role: str,
        where: str,
        path: str | None,
        evidence: LocalFileEvidence | RemoteEvidence | None,
        stored: StoredPreview | None,
    ) -> Side:
        if self.cap <= 0:
            return Side(role, where, "off")
        if not self.live:
            if stored is None:
                why = f"not captured, and the proposal is {self.record.status}"
                return Side(role, where, "unavailable", message=why)
            content = Content(stored.content, stored.size)
            why = (
                f"as captured when proposed (the proposal is {self.record.status}; not re-checked)"
            )
            return Side(role, where, stored_binding(stored), content, message=why)
        if path is None or evidence is None:
            return Side(role, where, "unavailable", message="the op records no evidence of it")
        if isinstance(evidence, LocalFileEvidence):
            if self.root is None:
                return Side(role, where, "unavailable", message="the proposal names no root")
            return read_local(self.root, path, evidence, self.cap, role, stored)
        return self._remote(role, path, evidence, stored)

    def _remote(
        self, role: str, path: str, evidence: RemoteEvidence, stored: StoredPreview | None
    ) -> Side:
        if self.drive is None:
            if stored is None:
                return Side(role, "remote", "unavailable", message="the drive was not read here")
            content = Content(stored.content, stored.size)
            why = "as captured when proposed; the drive was not asked again here"
            return Side(role, "remote", stored_binding(stored), content, message=why)
        try:
            drive = self.drive()
        except PlacetError as e:
            return Side(role, "remote", "unavailable", message=inert(e.message))
        if drive.spec != self.record.drive_spec:
            return Side(role, "remote", "unavailable",
                        message="the proposal was made against another drive")  # fmt: skip
        if stored is not None:
            return recheck_remote(drive, path, evidence, stored, role)
        return read_remote(drive, path, evidence, self.cap, role)


def open_preview(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    op: Op,
    drive: DriveSource | None = None,
) -> OpPreview:
    """The preview of `op` of `record` (see the module docstring). `drive` gives the
    configured drive, asked only when a remote file must be read; without one, a remote
    file's stored capture is shown as captured and one not captured is not shown.

    Raises:
        StoreError: the stored previews could not be read.
    """
    if not writes_file(op):
        return OpPreview(op.index, op.kind, None, None)
    opener = _Opener(store, settings, record, drive)
    stored = store.previews_of(record.id, op.index) if opener.cap > 0 else {}
    if op.kind == "download":
        new = opener.side("new", "remote", op.remote_path, op.expected_remote, stored.get("new"))
        current = None
        if op.expected_local is not None:
            current = opener.side(
                "current", "local", op.local_path, op.expected_local, stored.get("current")
            )
        return OpPreview(op.index, op.kind, new, current)
    new = opener.side("new", "local", op.local_path, op.expected_local, stored.get("new"))
    target = op.expected_remote
    current = None
    if target is not None and target.exists and not target.is_dir:
        current = opener.side("current", "remote", op.remote_path, target, stored.get("current"))
    return OpPreview(op.index, op.kind, new, current)
