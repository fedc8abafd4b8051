"""Making a proposal: validate what an agent asked for, capture the evidence, store it inert.

One module shared by the MCP tools (`placet.server`) and any CLI that proposes, so a
request is checked the same way whoever makes it (DESIGN.md section 9, "Where things
live"). Nothing here writes to the drive or to a local root: the only write is one
pending row in the store (`Store.create_proposal`), which the owner later accepts or
discards.

Order of checks, cheapest and clearest first:

1. The agent's text: the reason (one line, at most 200 characters,
   `placet.text.one_line_reason`) and the TTL (the owner's range, 5..30 minutes by
   default; DESIGN.md section 9, "TTL").
2. Path shape and containment (`placet.paths`): local paths resolved inside a root with no
   symlink on the way; remote paths relative to the drive root with nothing rclone could
   read as an option or a remote prefix. When the MCP client sent roots, the local path
   must also lie inside one of them (`ProposeContext.allowed`; they only ever narrow).
3. The state of the target, so the owner decides on facts: the remote target's existence
   and digest (`Drive.stat`), the local file's size, mtime, SHA-256 and the remote's
   preferred digest type, hashed in one pass from a descriptor opened without following
   links (`placet.localfs`); for an upload or mkdir, the remote parent folders that do
   not exist yet (evidence `missing_parents`: the executor creates them on the way, and
   the owner is shown which). An upload onto an existing remote name needs
   `replace_existing`; a download onto an existing local file needs `overwrite` *and* the
   root's policy `downloads = "allow-overwrite"`.
4. The request and evidence, dumped from `placet.requests` models, go to the store; the
   same kind + request + evidence while one is pending returns that one (`created=False`).

The evidence is what the executor re-checks before it acts: a change in between fails the
op as `stale` (DESIGN.md section 4).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from placet import localfs
from placet.errors import (
    AlreadyExists,
    LimitExceeded,
    NotFound,
    PathRefused,
    PolicyRefused,
    StaleEvidence,
    UsageError,
)
from placet.paths import Root, check_name, check_remote_path, resolve_local
from placet.requests import (
    DigestType,
    DownloadEvidence,
    DownloadRequest,
    LocalFileEvidence,
    MkdirEvidence,
    MkdirRequest,
    RemoteEvidence,
    UploadEvidence,
    UploadRequest,
    join_remote,
)
from placet.text import inert, one_line_reason

if TYPE_CHECKING:
    from placet.config import Settings
    from placet.drive.base import Drive, Entry
    from placet.store import ProposalRecord, Store

__all__ = [
    "DIGEST_PREFERENCE",
    "ProposeContext",
    "local_file_evidence",
    "preferred_digest_type",
    "propose_download",
    "propose_mkdir",
    "propose_upload",
    "remote_evidence",
    "ttl_seconds",
]

DIGEST_PREFERENCE: tuple[DigestType, ...] = ("sha256", "sha1", "md5")
"""Strongest first (DESIGN.md section 9, "Digest choice")."""


@dataclass(frozen=True)
class ProposeContext:
    """Everything a proposal needs besides the agent's arguments.

    `run_id`, `client_name`, `client_version` and `label` are attribution only: they are
    stored and shown, and grant nothing. `allowed`, when not None, is the set of absolute
    folders a local path must also lie in (the MCP client's roots intersected with the
    owner's; an empty tuple allows nothing).
    """

    settings: Settings
    store: Store
    drive: Drive
    roots: tuple[Root, ...]
    run_id: str
    drive_spec: str
    client_name: str | None = None
    client_version: str | None = None
    label: str | None = None
    allowed: tuple[Path, ...] | None = None


def _q(s: str) -> str:
    return f"'{inert(s)}'"


def ttl_seconds(settings: Settings, ttl_minutes: int | None) -> int:
    """The TTL in seconds for a request asking `ttl_minutes` (None: the owner's default).

    Raises:
        UsageError: outside the owner's range (`min_ttl_minutes`..`max_ttl_minutes`,
            5..30 by default).
    """
    if ttl_minutes is None:
        return settings.default_ttl_minutes * 60
    lo, hi = settings.min_ttl_minutes, settings.max_ttl_minutes
    if isinstance(ttl_minutes, bool) or not lo <= ttl_minutes <= hi:
        raise UsageError(
            f"ttl_minutes={ttl_minutes} is outside the allowed range {lo}..{hi}; "
            f"ask for {lo} to {hi} minutes, or leave it out for the default "
            f"({settings.default_ttl_minutes})",
            details={"field": "ttl_minutes", "min": lo, "max": hi},
        )
    return ttl_minutes * 60


def preferred_digest_type(hash_types: Sequence[str]) -> DigestType | None:
    """The strongest of sha256, sha1, md5 the remote offers (case-insensitive), or None."""
    offered = {h.lower() for h in hash_types}
    return next((t for t in DIGEST_PREFERENCE if t in offered), None)


def _remote_digest_type(ctx: ProposeContext) -> DigestType | None:
    return preferred_digest_type(ctx.drive.capabilities().hash_types)


def remote_evidence(ctx: ProposeContext, path: str, *, with_digest: bool = True) -> RemoteEvidence:
    """What the drive reports for `path` now: absent, a folder, or a file with its digest
    (of the remote's preferred type; None when it reports none or `with_digest` is False).

    Raises:
        DriveUnavailable / DriveError: from the drive adapter.
    """
    entry: Entry | None = ctx.drive.stat(path, include_digest=with_digest)
    if entry is None:
        return RemoteEvidence(exists=False)
    if entry.is_dir:
        return RemoteEvidence(exists=True, is_dir=True)
    dtype = _remote_digest_type(ctx)
    digest = entry.digests.get(dtype) if dtype is not None else None
    return RemoteEvidence(
        exists=True,
        is_dir=False,
        size=entry.size,
        mtime=entry.mtime,
        digest_type=dtype if digest else None,
        digest=digest.lower() if digest else None,
    )


def local_file_evidence(
    root: Root, rel: PurePosixPath, digest_type: DigestType | None, *, size_cap: int | None
) -> LocalFileEvidence:
    """Size, mtime, SHA-256 and `digest_type` of the regular file `root/rel`, in one pass.

    The file is opened by `placet.localfs.open_file_for_read`, which walks from the root's
    descriptor with `O_NOFOLLOW` and refuses links, FIFOs, devices and hard-linked files.

    Raises:
        PathRefused: not a regular file, a symlink, more than one hard link.
        NotFound: the file is gone.
        LimitExceeded: larger than `size_cap` bytes.
        StaleEvidence (retryable): the file changed while it was read.
    """
    fd, st = localfs.open_file_for_read(root, str(rel))
    try:
        if size_cap is not None and st.st_size > size_cap:
            raise LimitExceeded(
                f"local file {_q(str(rel))} in root {root.name} is {st.st_size} bytes; "
                f"the owner's upload cap is {size_cap} bytes",
                details={"path": str(rel), "size": st.st_size, "cap": size_cap},
            )
        types: list[str] = ["sha256"]
        if digest_type is not None and digest_type != "sha256":
            types.append(digest_type)
        digests, hashed = localfs.hash_fd_sized(fd, types)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if hashed != st.st_size or (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise StaleEvidence(
            f"local file {_q(str(rel))} in root {root.name} changed while placet read it; "
            "propose again once it is no longer being written",
            details={"path": str(rel), "root": root.name},
            retryable=True,
        )
    return LocalFileEvidence(
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        sha256=digests["sha256"].lower(),
        digest_type=digest_type,
        digest=digests[digest_type].lower() if digest_type is not None else None,
    )


def _is_within(child: Path, parent: Path) -> bool:
    c, p = os.fspath(child), os.fspath(parent)
    return os.path.commonpath([c, p]) == p


def _local(
    ctx: ProposeContext, local_path: str, root_name: str | None, *, must_exist: bool
) -> tuple[Root, PurePosixPath]:
    root, rel = resolve_local(ctx.roots, local_path, root_name or None, must_exist=must_exist)
    if not rel.parts:
        raise PathRefused(
            f"refusing path {_q(local_path)}: it names the root {root.name} itself; "
            "name a file inside it",
            code="not_regular_file",
            details={"path": local_path, "root": root.name},
        )
    if ctx.allowed is not None:
        target = root.path.joinpath(*rel.parts)
        if not any(_is_within(target, a) for a in ctx.allowed):
            shown = ", ".join(_q(str(a)) for a in ctx.allowed) or "none overlap placet's roots"
            raise PathRefused(
                f"refusing path {_q(local_path)}: it lies outside the roots your MCP client "
                f"declared ({shown}); name a path inside them",
                code="path_outside_root",
                details={"path": local_path, "client_roots": [str(a) for a in ctx.allowed]},
            )
    return root, rel


def _missing_parents(ctx: ProposeContext, parent: str) -> tuple[str, ...]:
    """The folders of the drive-relative `parent` that do not exist, outermost first
    (``"a/b/c"`` on an empty drive: ``("a", "a/b", "a/b/c")``); () when it exists.

    One `Drive.stat` of `parent` answers the common case (it exists); otherwise the
    ancestors are read from the top, one call each until the first missing one (every
    folder below it is missing too). The executor (rclone) creates them on the way; the
    owner is told which (`placet.display.missing_folders_line`).

    Raises:
        PathRefused (``not_a_directory``): `parent` or one of its ancestors is a file.
        DriveUnavailable / DriveError: from the drive adapter.
    """
    if not parent:
        return ()
    entry = ctx.drive.stat(parent)
    if entry is not None and entry.is_dir:
        return ()
    parts = parent.split("/")
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        found = entry if depth == len(parts) else ctx.drive.stat(here)
        if found is None:
            return tuple("/".join(parts[:d]) for d in range(depth, len(parts) + 1))
        if not found.is_dir:
            inside = "" if here == parent else f" (on the way to {_q(parent)})"
            raise PathRefused(
                f"refusing remote parent {_q(here)}{inside}: it is a file, not a folder; "
                "name a folder (see drive_list)",
                code="not_a_directory",
                details={"remote_parent": parent, "file": here},
            )
    return ()  # pragma: no cover - the loop returns or raises at the last part


def _create(
    ctx: ProposeContext,
    kind: str,
    request: dict[str, Any],
    evidence: dict[str, Any],
    reason: str,
    ttl: int,
) -> tuple[ProposalRecord, bool]:
    return ctx.store.create_proposal(
        kind=kind,
        request=request,
        evidence=evidence,
        reason=reason,
        drive_spec=ctx.drive_spec,
        run_id=ctx.run_id,
        client_name=ctx.client_name,
        client_version=ctx.client_version,
        label=ctx.label,
        ttl_seconds=ttl,
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
        PathRefused: local or remote path refused (codes of `placet.paths`), the source
            is not a regular file or is hard-linked, the remote parent is a file.
        NotFound: the local file does not exist.
        AlreadyExists: the remote name exists (a folder, or a file without
            `replace_existing`).
        LimitExceeded: the file is over the upload cap, or the pending caps are reached.
        DriveUnavailable / DriveError: the drive could not be read.
    """
    why = one_line_reason(reason)
    ttl = ttl_seconds(ctx.settings, ttl_minutes)
    the_root, rel = _local(ctx, local_path, root, must_exist=True)
    parent = check_remote_path(remote_parent)
    target_name = check_name(name if name else rel.name)
    target = join_remote(parent, target_name)
    remote = remote_evidence(ctx, target)
    if remote.exists and remote.is_dir:
        raise AlreadyExists(
            f"refusing to upload onto remote {_q(target)}: it is a folder; "
            "choose another name or parent",
            details={"remote_path": target, "is_dir": True},
        )
    if remote.exists and not replace_existing:
        seen = f"{remote.digest_type} {remote.digest[:12]}..." if remote.digest else "no digest"
        raise AlreadyExists(
            f"refusing to overwrite remote {_q(target)}: it exists ({remote.size} bytes, "
            f"{seen}); propose again with replace_existing=true, or choose another name",
            details={"remote_path": target, "remote": remote.model_dump(mode="json")},
        )
    # an existing target's folders exist; an absent one's are read from the drive
    missing = _missing_parents(ctx, parent) if not remote.exists else ()
    local = local_file_evidence(
        the_root, rel, _remote_digest_type(ctx), size_cap=ctx.settings.upload_cap_bytes
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
    return _create(
        ctx,
        "upload",
        request.model_dump(mode="json"),
        evidence.model_dump(mode="json"),
        why,
        ttl,
    )


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
            f"remote {_q(target)} already exists ({what}); nothing to create"
            + ("" if remote.is_dir else "; choose another name"),
            details={"remote_path": target, "is_dir": remote.is_dir},
        )
    missing = _missing_parents(ctx, parent)
    request = MkdirRequest(remote_parent=parent, name=folder)
    evidence = MkdirEvidence(remote=remote, missing_parents=missing if parent else None)
    return _create(
        ctx, "mkdir", request.model_dump(mode="json"), evidence.model_dump(mode="json"), why, ttl
    )


def _local_target_state(root: Root, rel: PurePosixPath) -> os.stat_result | None:
    """lstat of the download target; its folder must exist (checked, with no link, by
    `resolve_local`'s walk)."""
    parent = root.path.joinpath(*rel.parts[:-1])
    if not os.path.isdir(parent):
        raise NotFound(
            f"the local folder {_q(str(rel.parent))} does not exist in root {root.name}; "
            "download into an existing folder",
            details={"path": str(rel), "missing": str(rel.parent), "root": root.name},
        )
    try:
        return os.lstat(root.path.joinpath(*rel.parts))
    except FileNotFoundError:
        return None


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
    says `overwrite` and the root's policy is `downloads = "allow-overwrite"` (DESIGN.md
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
    the_root, rel = _local(ctx, local_path, root, must_exist=False)
    remote = remote_evidence(ctx, source)
    if not remote.exists:
        raise NotFound(
            f"remote {_q(source)} does not exist; check the name with drive_list",
            details={"remote_path": source},
        )
    if remote.is_dir:
        raise PathRefused(
            f"refusing to download remote {_q(source)}: it is a folder; name a file",
            code="not_regular_file",
            details={"remote_path": source},
        )
    st = _local_target_state(the_root, rel)
    local: LocalFileEvidence | None = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise AlreadyExists(
                f"refusing to download onto local {_q(str(rel))} in root {the_root.name}: "
                "it is a folder; name a file inside it",
                details={"path": str(rel), "root": the_root.name, "is_dir": True},
            )
        if not overwrite:
            raise AlreadyExists(
                f"refusing to overwrite local {_q(str(rel))} in root {the_root.name}: it "
                "exists; propose again with overwrite=true (if the owner's policy allows "
                "it), or choose another local name",
                details={"path": str(rel), "root": the_root.name},
            )
        policy = ctx.settings.download_policy(the_root.path)
        if policy != "allow-overwrite":
            raise PolicyRefused(
                f"refusing to overwrite local {_q(str(rel))}: the owner's policy for root "
                f"{the_root.name} is downloads = {policy!r} (new files only); download to a "
                "new name instead",
                details={"path": str(rel), "root": the_root.name, "policy": policy},
            )
        local = local_file_evidence(the_root, rel, remote.digest_type, size_cap=None)
    request = DownloadRequest(
        remote_path=source,
        root=the_root.to_ref(),
        local_path=str(rel),
        overwrite=overwrite,
    )
    evidence = DownloadEvidence(remote=remote, local=local)
    return _create(
        ctx,
        "download",
        request.model_dump(mode="json"),
        evidence.model_dump(mode="json"),
        why,
        ttl,
    )
