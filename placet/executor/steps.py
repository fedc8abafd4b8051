"""The remote-side ops: mkdir and upload, each re-checking its evidence before it acts.

With `placet.executor.download`, this is the one choke point where an accepted proposal
becomes drive calls and local writes, each after its evidence was re-checked
(`placet.executor.checks`), each returning an `OpOutcome`; only `Aborted` (a cancel, a
lost lease) escapes. An upload asks already_done first, then stale (the remote target
as the proposal saw it; the local file opened by descriptor walk, size and mtime
compared), then streams that descriptor to the drive, which refuses to move bytes into
place unless they hash to the approved digests; the temporary name is journaled before
the first byte (docs/design.md sections 4, 6 and 9)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placet.config import Settings
from placet.drive.base import Drive, ProgressFn
from placet.drive.twins import normalization_twin
from placet.errors import AlreadyExists, NotFound, PlacetError, StaleEvidence
from placet.executor.checks import (
    RemoteProbe,
    local_as_seen,
    local_found,
    remote_as_seen,
    remote_found,
    remote_holds,
)
from placet.executor.progress import OpOutcome
from placet.local import walk
from placet.schema import Op, RemoteEvidence, RootRef
from placet.text import quote

JournalTemp = Callable[[str, str], None]
"""`journal_temp(side, path)`: side ``remote`` (drive-relative) or ``local`` (root-relative)."""


@dataclass
class OpContext:
    """What every op needs: the drive, settings, the root, and the runner's hooks.

    `progress` is handed to the drive's transfers (it raises `Aborted` to stop one);
    `journal_temp` durably records a temporary name before bytes go to it.
    """

    drive: Drive
    settings: Settings
    root: RootRef | None
    proposal_kind: str
    progress: ProgressFn
    journal_temp: JournalTemp


def stale(
    side: str, path: str, expected: dict[str, Any] | None, found: dict[str, Any], why: str
) -> OpOutcome:
    """A `stale` outcome naming both values (docs/design.md section 4)."""
    err = StaleEvidence(
        f"{side} {quote(path)} {why} since the proposal was made; nothing was changed for "
        "this op: ask the agent to propose again",
        details={"side": side, "path": path, "expected": expected, "found": found},
    )
    return OpOutcome.error("stale", err)


def failed(e: PlacetError, **extra: Any) -> OpOutcome:
    """A `failed` outcome carrying the typed error (retryable when the error is)."""
    return OpOutcome.error("failed", e, **extra)


def run_mkdir(ctx: OpContext, op: Op) -> OpOutcome:
    """Create remote folder `op.remote_path` (and its parents).

    already_done when a folder is there; failed (already_exists) when a file is, or
    when the folder's name differs only by Unicode normalization from a name there
    (the drive's mkdir refuses it, even when the remote's stat answered with the twin).
    """
    path = op.remote_path or ""
    probe = RemoteProbe(ctx.drive, path)
    found = probe.entry()
    twin = found is not None and normalization_twin(path.rpartition("/")[2], [found.name])
    if found is not None and found.is_dir and not twin:
        return OpOutcome("already_done", {"remote_path": path})
    if found is not None and not found.is_dir:
        return failed(
            AlreadyExists(
                f"cannot create folder {quote(path)}: a file has that name on the drive; "
                "nothing was changed",
                details={"path": path, "found": remote_found(probe, None)},
            )
        )
    ctx.drive.mkdir(path)
    return OpOutcome("done", {"remote_path": path})


def run_upload(ctx: OpContext, op: Op) -> OpOutcome:
    """Upload `op.local_path` (in the root) to `op.remote_path`; see the module docstring."""
    ev = op.expected_local
    target = op.remote_path or ""
    if ev is None or op.local_path is None or ctx.root is None:
        raise PlacetError(
            f"upload op {op.index} has no local source or evidence; the request is malformed",
            code="request_invalid",
        )
    ev_remote = op.expected_remote or RemoteEvidence(exists=False)
    probe = RemoteProbe(ctx.drive, target)
    now = probe.entry()
    if now is not None and not now.is_dir:
        unchanged = ev_remote.exists and remote_as_seen(probe, ev_remote)
        if unchanged:
            # The target is the one the owner saw; it holds the approved bytes only if
            # the evidence says so (same digest), which needs no read-back.
            same = (
                ev_remote.digest is not None
                and ev_remote.digest_type == ev.digest_type
                and ev_remote.digest == ev.digest
            )
        else:
            same = remote_holds(probe, ev)
        if same:
            return OpOutcome("already_done", _upload_detail(target, ev, probe))
    if not remote_as_seen(probe, ev_remote):
        why = "appeared" if not ev_remote.exists and now is not None else "changed"
        return stale(
            "remote",
            target,
            ev_remote.model_dump(mode="json"),
            remote_found(probe, ev_remote.digest_type or ev.digest_type),
            why,
        )
    try:
        fd, st = walk.open_file_for_read(ctx.root, op.local_path)
    except NotFound:
        gone = {"exists": False}
        return stale("local", op.local_path, ev.model_dump(mode="json"), gone, "vanished")
    try:
        if not local_as_seen(st, ev):
            return stale(
                "local", op.local_path, ev.model_dump(mode="json"), local_found(st), "changed"
            )
        started = time.monotonic()
        digest = (ev.digest_type, ev.digest) if ev.digest_type and ev.digest else None
        try:
            result = ctx.drive.upload_from_fd(
                fd,
                ev.size,
                target,
                expected_sha256=ev.sha256,
                expected_digest=digest,
                replace=op.replace,
                progress=ctx.progress,
                journal=lambda temp: ctx.journal_temp("remote", temp),
            )
        except StaleEvidence as e:
            return OpOutcome.error("stale", e, remote_path=target)
        except AlreadyExists as e:
            probe.forget()
            return OpOutcome.error(
                "stale", e, remote_path=target, found=remote_found(probe, ev.digest_type)
            )
        return OpOutcome(
            "done",
            {
                "remote_path": target,
                "size": result.size,
                "sha256": result.sha256,
                "local_digest_type": ev.digest_type,
                "local_digest": ev.digest,
                "digest_type": result.digest_type,
                "digest": result.digest,
                "verification": result.verification,
                "path_taken": result.path_taken,
                "seconds": round(time.monotonic() - started, 3),
            },
            remote_mtime=result.mtime,  # the sync baseline need not stat it again
        )
    finally:
        os.close(fd)


def _upload_detail(target: str, ev: Any, probe: RemoteProbe) -> dict[str, Any]:
    """Detail of an upload found already done: what proves it."""
    return upload_found_detail(target, ev, probe.known_digest(ev.digest_type))


def upload_found_detail(target: str, ev: Any, digest: str | None) -> dict[str, Any]:
    """Detail of an upload found already done, by the remote's `digest` of
    `ev.digest_type` (None: by reading the object back)."""
    return {
        "remote_path": target,
        "size": ev.size,
        "sha256": ev.sha256,
        "local_digest_type": ev.digest_type,
        "local_digest": ev.digest,
        "digest_type": ev.digest_type if digest else None,
        "digest": digest,
        "verification": f"digest:{ev.digest_type}" if digest else "readback:sha256",
    }
