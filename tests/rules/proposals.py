"""Proposals as the propose tools store them, built from placet's schema models, for the
rules tests: `record` makes the stored value, `facts` what rules see of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from placet.executor.ops import plan_for
from placet.rules.facts import ProposalFacts, facts_of
from placet.schema import (
    DownloadEvidence,
    DownloadRequest,
    LocalFileEvidence,
    MkdirEvidence,
    MkdirRequest,
    Op,
    RemoteEvidence,
    RootRef,
    UploadEvidence,
    UploadRequest,
    request_hash,
)
from placet.store import ProposalRecord

DRIVE = "/srv/drive"
ROOT = RootRef(name="proj", path="/home/o/proj", device=1, inode=2)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ABSENT = RemoteEvidence(exists=False)


def record(
    kind: str,
    request: dict[str, Any],
    evidence: dict[str, Any],
    *,
    pid: int = 1,
    drive: str = DRIVE,
    client: str | None = "claude-code",
) -> ProposalRecord:
    return ProposalRecord(
        id=pid, kind=kind, status="pending", request=request, evidence=evidence,
        request_hash=request_hash(kind, request, evidence), reason="trust me, approve it",
        drive_spec=drive, run_id="run", client_name=client, client_version="1",
        label=None, host="h", created_at=NOW, expires_at=NOW + timedelta(minutes=30),
        resolved_at=None, resolved_by=None, attempt=0, lease_holder=None,
        lease_expires_at=None, summary=None,
    )  # fmt: skip


def facts(rec: ProposalRecord) -> ProposalFacts:
    ops = plan_for(rec.kind, rec.request, rec.evidence, rec.request.get("ops")).ops
    return facts_of(rec, ops)


def local_file(size: int, sha: str = "a" * 64) -> LocalFileEvidence:
    return LocalFileEvidence(size=size, mtime_ns=1, sha256=sha)


def mkdir(parent: str, name: str, *, missing: tuple[str, ...] | None = None, **kw: Any) -> Any:
    req = MkdirRequest(remote_parent=parent, name=name).model_dump(mode="json")
    ev = MkdirEvidence(remote=ABSENT, missing_parents=missing).model_dump(mode="json")
    return record("mkdir", req, ev, **kw)


def upload(
    parent: str,
    name: str,
    size: int,
    *,
    local: str | None = None,
    replace: bool = False,
    missing: tuple[str, ...] | None = None,
    **kw: Any,
) -> ProposalRecord:
    req = UploadRequest(
        root=ROOT, local_path=local or f"out/{name}", remote_parent=parent, name=name,
        replace_existing=replace,
    ).model_dump(mode="json")  # fmt: skip
    remote = RemoteEvidence(exists=True, size=9, digest_type="sha256", digest="b" * 64)
    ev = UploadEvidence(
        local=local_file(size), remote=remote if replace else ABSENT, missing_parents=missing
    ).model_dump(mode="json")
    return record("upload", req, ev, **kw)


def download(remote_path: str, local: str, size: int, **kw: Any) -> ProposalRecord:
    req = DownloadRequest(remote_path=remote_path, root=ROOT, local_path=local)
    ev = DownloadEvidence(
        remote=RemoteEvidence(exists=True, size=size, digest_type="sha256", digest="c" * 64)
    )
    return record("download", req.model_dump(mode="json"), ev.model_dump(mode="json"), **kw)


def sync(ops: list[Op], **kw: Any) -> ProposalRecord:
    req = {
        "kind": "sync", "plan_id": 1, "root": ROOT.model_dump(mode="json"), "local_path": "out",
        "remote_path": "reports", "decisions": {},
        "ops": [o.model_dump(mode="json") for o in ops],
    }  # fmt: skip
    return record("sync", req, {}, **kw)


def sync_upload(index: int, path: str, size: int, *, revision: bool = False) -> Op:
    remote = (
        RemoteEvidence(exists=True, size=1, digest_type="sha256", digest="d" * 64)
        if revision
        else ABSENT
    )
    return Op(
        index=index, kind="upload_revision" if revision else "upload",
        local_path=f"out/{path.rsplit('/', 1)[-1]}", remote_path=path, size=size,
        expected_local=local_file(size), expected_remote=remote, replace=revision,
    )  # fmt: skip


def sync_mkdir(index: int, path: str) -> Op:
    return Op(index=index, kind="mkdir", remote_path=path, expected_remote=ABSENT)


def sync_download(index: int, path: str, size: int) -> Op:
    return Op(
        index=index, kind="download", local_path=f"out/{path.rsplit('/', 1)[-1]}",
        remote_path=path, size=size,
        expected_remote=RemoteEvidence(exists=True, size=size, digest_type="sha256",
                                       digest="e" * 64),
    )  # fmt: skip
