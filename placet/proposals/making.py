"""Making a proposal: validate what an agent asked for, capture the evidence, store it inert.

Shared by the MCP tools and any CLI that proposes, so a request is checked the same way
whoever makes it (docs/design.md section 2). The only write is one pending row in the
store. Checks run cheapest and clearest first: the agent's reason and TTL
(docs/design.md section 9, "TTL"); path shape and containment (`placet.paths`, narrowed
by the client's roots); then the target's state, so the owner decides on facts (the
remote target's existence and digest, the local file's size, mtime and digests hashed
from a descriptor, the missing remote parents). Replacing needs `replace_existing`;
overwriting a local file needs `overwrite` and the root's `allow-overwrite` policy. The
same request pending returns that proposal (`created=False`). The executor re-checks
this evidence before it acts (docs/design.md section 4). Scope checks live in
`placet.proposals.context`, evidence capture in `placet.proposals.evidence`."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from placet.errors import AlreadyExists, PathRefused, PolicyRefused
from placet.paths.remote import check_name, check_remote_path, refuse_unless_file
from placet.preview.capture import capture_local, capture_remote, op_cap
from placet.proposals.context import (
    ProposeContext,
    resolve_in_client_roots,
    store_proposal,
    ttl_seconds,
)
from placet.proposals.evidence import (
    local_file_evidence_and_head,
    local_target_state,
    missing_parents,
    remote_digest_type,
    remote_evidence,
)
from placet.schema import (
    DownloadEvidence,
    DownloadRequest,
    LocalFileEvidence,
    MkdirEvidence,
    MkdirRequest,
    UploadEvidence,
    UploadRequest,
    join_remote,
)
from placet.text import one_line_reason, quote

if TYPE_CHECKING:
    from collections.abc import Sequence

    from placet.store import ProposalRecord
    from placet.store.previews import StoredPreview

__all__ = [
    "propose_download",
    "propose_mkdir",
    "propose_upload",
]


def _store(
    ctx: ProposeContext,
    request: UploadRequest | MkdirRequest | DownloadRequest,
    evidence: UploadEvidence | MkdirEvidence | DownloadEvidence,
    why: str,
    ttl: int,
    previews: Sequence[StoredPreview | None] = (),
) -> tuple[ProposalRecord, bool]:
    """`store_proposal` for a single-op request and its evidence, as their JSON, and the
    content previews captured (`placet.preview.capture`)."""
    return store_proposal(
        ctx,
        request.kind,
        request.model_dump(mode="json"),
        evidence.model_dump(mode="json"),
        why,
        ttl,
        [p for p in previews if p is not None],
    )


def propose_upload(
    ctx: ProposeContext,
    *,
    local_path: str,
    remote_parent: str,
    reason: str,
    name: str | None = None,
    replace_existing: bool = False,
    ttl_minutes: int | None = None,
    root: str | None = None,
) -> tuple[ProposalRecord, bool]:
    """Propose uploading one local file to `remote_parent/name` (name: the file's own).

    Returns:
        (the pending proposal, True) or, for an identical pending one, (it, False).

    Raises:
        UsageError: reason or TTL refused.
        PathRefused: local or remote path refused (codes of `placet.paths.local`), the source
            is not a regular file or is hard-linked, the remote parent is a file.
        NotFound: the local file does not exist.
        AlreadyExists: the remote name exists (a folder, or a file without
            `replace_existing`).
        LimitExceeded: the file is over the upload cap, or the pending caps are reached.
        DriveUnavailable / DriveError: the drive could not be read.
    """
    why = one_line_reason(reason)
    ttl = ttl_seconds(ctx.settings, ttl_minutes)
    the_root, rel = resolve_in_client_roots(ctx, local_path, root, must_exist=True)
    parent = check_remote_path(remote_parent)
    target_name = check_name(name if name else rel.name)
    target = join_remote(parent, target_name)
    remote = remote_evidence(ctx, target, read_content=replace_existing)
    if remote.exists and remote.is_dir:
        raise AlreadyExists(
            f"refusing to upload onto remote {quote(target)}: it is a folder; "
            "choose another name or parent",
            details={"remote_path": target, "is_dir": True},
        )
    if remote.exists and not replace_existing:
        seen = f"{remote.digest_type} {remote.digest[:12]}..." if remote.digest else "no digest"
        raise AlreadyExists(
            f"refusing to overwrite remote {quote(target)}: it exists ({remote.size} bytes, "
            f"{seen}); propose again with replace_existing=true, or choose another name",
            details={"remote_path": target, "remote": remote.model_dump(mode="json")},
        )
    # an existing target's folders exist; an absent one's are read from the drive
    missing = missing_parents(ctx, parent) if not remote.exists else ()
    cap = op_cap(ctx.settings)
    local, head = local_file_evidence_and_head(
        the_root, rel, remote_digest_type(ctx), size_cap=ctx.settings.upload_cap_bytes, head=cap
    )
    request = UploadRequest(
        root=the_root.to_ref(),
        local_path=str(rel),
        remote_parent=parent,
        name=target_name,
        replace_existing=replace_existing,
    )
    evidence = UploadEvidence(
        local=local, remote=remote, missing_parents=missing if parent else None
    )
    previews = [capture_local(0, "new", head, local, cap)]
    if remote.exists:
        previews.append(capture_remote(ctx.drive, target, remote, cap, 0, "current"))
    return _store(ctx, request, evidence, why, ttl, previews)


def propose_mkdir(
    ctx: ProposeContext,
    *,
    remote_parent: str,
    name: str,
    reason: str,
    ttl_minutes: int | None = None,
) -> tuple[ProposalRecord, bool]:
    """Propose creating the remote folder `remote_parent/name`.

    Raises:
        UsageError: reason or TTL refused.
        PathRefused: the parent or the name is refused, or the parent is a file.
        AlreadyExists: something already has that name.
        LimitExceeded: the pending caps are reached.
        DriveUnavailable / DriveError: the drive could not be read.
    """
    why = one_line_reason(reason)
    ttl = ttl_seconds(ctx.settings, ttl_minutes)
    parent = check_remote_path(remote_parent)
    folder = check_name(name)
    target = join_remote(parent, folder)
    remote = remote_evidence(ctx, target, with_digest=False)
    if remote.exists:
        what = "a folder" if remote.is_dir else "a file"
        raise AlreadyExists(
            f"remote {quote(target)} already exists ({what}); nothing to create"
            + ("" if remote.is_dir else "; choose another name"),
            details={"remote_path": target, "is_dir": remote.is_dir},
        )
    missing = missing_parents(ctx, parent)
    request = MkdirRequest(remote_parent=parent, name=folder)
    evidence = MkdirEvidence(remote=remote, missing_parents=missing if parent else None)
    return _store(ctx, request, evidence, why, ttl)


def propose_download(
    ctx: ProposeContext,
    *,
    remote_path: str,
    local_path: str,
    reason: str,
    overwrite: bool = False,
    ttl_minutes: int | None = None,
    root: str | None = None,
) -> tuple[ProposalRecord, bool]:
    """Propose downloading the remote file `remote_path` to `local_path` in a root.

    The local folder must exist. An existing local file is replaced only when the request
    says `overwrite` and the root's policy is `downloads = "allow-overwrite"` (docs/design.md
    section 9, "Downloads"); its current digest is then part of the evidence.

    Raises:
        UsageError: reason or TTL refused.
        PathRefused: a path refused, the remote is a folder, the local target is not a
            regular file.
        NotFound: the remote file or the local folder does not exist.
        AlreadyExists: the local file exists and `overwrite` is false.
        PolicyRefused: `overwrite` asked but the root's policy is `new-only`.
        LimitExceeded: the pending caps are reached.
        DriveUnavailable / DriveError: the drive could not be read.
    """
    why = one_line_reason(reason)
    ttl = ttl_seconds(ctx.settings, ttl_minutes)
    source = check_remote_path(remote_path)
    if not source:
        raise PathRefused(
            "refusing remote path '': it is the drive root, a folder; name a file",
            code="not_regular_file",
            details={"remote_path": remote_path},
        )
    the_root, rel = resolve_in_client_roots(ctx, local_path, root, must_exist=False)
    remote = remote_evidence(ctx, source, read_content=True)
    refuse_unless_file(
        source, remote.is_dir if remote.exists else None, verb="download", hint="name a file"
    )
    st = local_target_state(the_root, rel)
    local: LocalFileEvidence | None = None
    cap = op_cap(ctx.settings)
    head = b""
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise AlreadyExists(
                f"refusing to download onto local {quote(str(rel))} in root {the_root.name}: "
                "it is a folder; name a file inside it",
                details={"path": str(rel), "root": the_root.name, "is_dir": True},
            )
        if not overwrite:
            raise AlreadyExists(
                f"refusing to overwrite local {quote(str(rel))} in root {the_root.name}: it "
                "exists; propose again with overwrite=true (if the owner's policy allows "
                "it), or choose another local name",
                details={"path": str(rel), "root": the_root.name},
            )
        policy = ctx.settings.download_policy(the_root.path)
        if policy != "allow-overwrite":
            raise PolicyRefused(
                f"refusing to overwrite local {quote(str(rel))}: the owner's policy for root "
                f"{the_root.name} is downloads = {policy!r} (new files only); download to a "
                "new name instead",
                details={"path": str(rel), "root": the_root.name, "policy": policy},
            )
        local, head = local_file_evidence_and_head(
            the_root, rel, remote.digest_type, size_cap=None, head=cap
        )
    request = DownloadRequest(
        remote_path=source,
        root=the_root.to_ref(),
        local_path=str(rel),
        overwrite=overwrite,
    )
    evidence = DownloadEvidence(remote=remote, local=local)
    previews = [capture_remote(ctx.drive, source, remote, cap, 0, "new")]
    if local is not None:
        previews.append(capture_local(0, "current", head, local, cap))
    return _store(ctx, request, evidence, why, ttl, previews)
