"""From a plan and the agent's conflict decisions to the executor's `Op` list.

`propose_sync(plan_id, decisions)` (docs/design.md section 5) stores the plan's full op set
with every conflict decided. This module is where that is checked and built, so the MCP
tool and the CLI refuse the same things with the same words: an undecided conflict, a
decision on a path that is not a conflict, or a decision the conflict kind does not
allow (docs/design.md section 7: file vs folder allows only `skip`).

`baseline_for` is the other half of the loop: the baseline entry to record for a path
whose two sides now hold the same content (a `done` op, or a skip verified by digest).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from placet.drive.base import Entry
from placet.errors import UsageError
from placet.schema import (
    DIGEST_PREFERENCE,
    DigestType,
    LocalFileEvidence,
    Op,
    RemoteEvidence,
    join_remote,
)
from placet.sync.entries import BaselineEntry, LocalEntry, OneDigest, RemoteEntry, nfc
from placet.sync.model import PlanOp, PlanOpKind, PlanReport, SyncPlan

_ABSENT = RemoteEvidence(exists=False)
# Built once: `DigestType | None` written inside `cast` builds (and hashes) a new Union
# per call, which was a third of `propose_sync`'s time at 10,000 ops.
_MaybeDigestType = DigestType | None


def local_evidence(e: LocalEntry) -> LocalFileEvidence:
    """Evidence of a local file for an op (size, mtime, SHA-256, native digest).

    Raises:
        UsageError: the entry is not a hashed regular file.
    """
    if e.kind != "file" or e.sha256 is None:
        raise UsageError(
            f"cannot use local {e.path!r} as evidence: it is a {e.kind} without a SHA-256; "
            "index the folder again",
            details={"path": e.path, "kind": e.kind},
        )
    return LocalFileEvidence(
        size=e.size,
        mtime_ns=e.mtime_ns,
        sha256=e.sha256,
        digest_type=cast(_MaybeDigestType, e.digest_type if e.digest else None),
        digest=e.digest if e.digest_type else None,
    )


def remote_evidence(e: RemoteEntry | None) -> RemoteEvidence:
    """Evidence of a remote path: absent, a folder, or a file with its strongest digest
    among sha256/sha1/md5 (lower-case hex; None if the remote gave none)."""
    if e is None:
        return _ABSENT
    if e.kind == "dir":
        return RemoteEvidence(exists=True, is_dir=True, mtime=e.mtime)
    dtype = next((t for t in DIGEST_PREFERENCE if e.digests.get(t)), None)
    return RemoteEvidence(
        exists=True,
        size=e.size,
        mtime=e.mtime,
        digest_type=dtype,
        digest=e.digests[dtype].lower() if dtype else None,
    )


def baseline_for(path: str, local: LocalEntry, remote: RemoteEntry) -> BaselineEntry:
    """The baseline to record once `local` and `remote` hold the same content at `path`.

    A folder on both sides gives a folder baseline (`sha256` None). A file records its
    SHA-256 and the remote's strongest digest, plus the remote's size and mtime (what a
    remote without digests is compared by).
    """
    if local.kind == "dir" and remote.kind == "dir":
        return BaselineEntry(nfc(path), None, mtime=remote.mtime)
    ev = remote_evidence(remote)
    return BaselineEntry(
        nfc(path),
        local.sha256,
        remote_digest_type=ev.digest_type,
        remote_digest=ev.digest,
        size=remote.size,
        mtime=remote.mtime,
    )


def remote_entries_from_drive(entries: Iterable[Entry], folder: str) -> list[RemoteEntry]:
    """The planner's remote listing from a drive listing of `folder` (recursive).

    Drive entries carry paths relative to the drive root; planner paths are relative to
    the synced folder, so `folder/` is cut off and the folder itself left out. Unknown
    sizes become -1 (compared as unknown, never as equal).
    """
    prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
    out: list[RemoteEntry] = []
    for e in entries:
        if prefix and not e.path.startswith(prefix):
            continue
        rel = e.path[len(prefix) :]
        if not rel:
            continue
        if e.is_dir:
            out.append(RemoteEntry(rel, "dir", 0, e.mtime))
        else:
            size = -1 if e.size is None else e.size
            d = e.digests
            # One digest (the usual listing): a 56-byte mapping instead of a dict.
            digests = OneDigest(*next(iter(d.items()))) if len(d) == 1 else dict(d)
            out.append(RemoteEntry(rel, "file", size, e.mtime, digests))
    return out


def _refuse(code: str, message: str, path: str, report: PlanReport | None) -> UsageError:
    allowed = list(report.allowed_decisions) if report is not None else []
    return UsageError(message, code=code, details={"path": path, "allowed": allowed})


def check_decisions(plan: SyncPlan, decisions: Mapping[str, str]) -> dict[str, str]:
    """Validate `decisions` against the plan's conflicts; returns them keyed by NFC path.

    Raises:
        UsageError: `decision_not_conflict` (the path is not a conflict of this plan),
            `decision_not_allowed` (not among the conflict's allowed decisions),
            `undecided_conflict` (a conflict without a decision). Details name the path
            and the allowed decisions.
    """
    conflicts = {r.path: r for r in plan.reports if r.kind == "conflict"}
    out: dict[str, str] = {}
    for raw, decision in decisions.items():
        path = nfc(raw)
        rep = conflicts.get(path)
        if rep is None:
            raise _refuse(
                "decision_not_conflict",
                f"refusing decision {decision!r} for {path!r}: it is not a conflict of this "
                "plan; decide only the plan's conflicts "
                f"({', '.join(repr(p) for p in sorted(conflicts)[:5]) or 'there are none'})",
                path,
                None,
            )
        if decision not in rep.allowed_decisions:
            raise _refuse(
                "decision_not_allowed",
                f"refusing decision {decision!r} for {path!r} ({rep.conflict_kind}): allowed "
                f"decisions are {', '.join(rep.allowed_decisions)}",
                path,
                rep,
            )
        out[path] = decision
    for path, rep in conflicts.items():
        if path not in out:
            raise _refuse(
                "undecided_conflict",
                f"conflict at {path!r} ({rep.conflict_kind}) has no decision: decide one of "
                f"{', '.join(rep.allowed_decisions)} for it",
                path,
                rep,
            )
    return out


def _decided_op(rep: PlanReport, decision: str) -> PlanOp | None:
    if decision == "skip":
        return None
    if decision == "keep_local":
        kind: PlanOpKind = "upload_revision" if rep.remote is not None else "upload"
        size = rep.local.size if rep.local is not None else None
        return PlanOp(rep.path, kind, size, f"keep_local: {rep.detail}", rep.local, rep.remote)
    size = rep.remote.size if rep.remote is not None else None
    return PlanOp(rep.path, "download", size, f"keep_remote: {rep.detail}", rep.local, rep.remote)


def to_request_ops(
    plan: SyncPlan,
    decisions: Mapping[str, str],
    *,
    local_prefix: str = "",
    remote_prefix: str = "",
) -> list[Op]:
    """The executor's ops for `plan` with its conflicts decided: `request_op_dicts`,
    each validated as an `Op`.

    Raises:
        UsageError: see `check_decisions`.
    """
    dicts = request_op_dicts(
        plan, decisions, local_prefix=local_prefix, remote_prefix=remote_prefix
    )
    return [Op.model_validate(d) for d in dicts]


def _local_dict(e: LocalEntry) -> dict[str, Any]:
    """`local_evidence(e)` dumped (mode json), built without the model (hot path)."""
    if e.kind != "file" or e.sha256 is None:
        local_evidence(e)  # raises the UsageError
    native = bool(e.digest)
    return {
        "size": e.size,
        "mtime_ns": e.mtime_ns,
        "sha256": e.sha256,
        "digest_type": e.digest_type if native else None,
        "digest": e.digest if e.digest_type else None,
    }


def _remote_dict(e: RemoteEntry | None, read: str | None = None) -> dict[str, Any]:
    """`remote_evidence(e)` dumped (mode json), built without the model (hot path).

    `read`: SHA-256 of the file's bytes as placet read them at plan time
    (`SyncPlan.content`), recorded as the evidence's digest with `read_by_placet` when
    the remote gave no digest of its own for the file."""
    if e is None:
        return dict(_ABSENT_DICT)
    if e.kind == "dir":
        return {**_ABSENT_DICT, "exists": True, "is_dir": True, "mtime": e.mtime}
    if read is not None and not any(e.digests.get(t) for t in DIGEST_PREFERENCE):
        return {
            "exists": True,
            "is_dir": False,
            "size": e.size,
            "mtime": e.mtime,
            "digest_type": "sha256",
            "digest": read,
            "read_by_placet": True,
        }
    dtype = next((t for t in DIGEST_PREFERENCE if e.digests.get(t)), None)
    return {
        "exists": True,
        "is_dir": False,
        "size": e.size,
        "mtime": e.mtime,
        "digest_type": dtype,
        "digest": e.digests[dtype].lower() if dtype else None,
    }


_ABSENT_DICT = _ABSENT.model_dump(mode="json")


def request_op_dicts(
    plan: SyncPlan,
    decisions: Mapping[str, str],
    *,
    local_prefix: str = "",
    remote_prefix: str = "",
) -> list[dict[str, Any]]:
    """The executor's ops for `plan` with its conflicts decided, as the JSON objects
    `Op.model_dump(mode="json")` gives (what a sync proposal stores; built directly,
    since validating 100,000 models was most of `propose_sync`'s time; `to_request_ops`
    validates them, and the executor parses every stored op before it runs).

    Args:
        plan: from `plan()`.
        decisions: NFC path -> `keep_local` | `keep_remote` | `skip`, one per conflict.
            keep_local: `upload_revision` (remote exists) or `upload` (deleted there,
            with `mkdir` for its missing parents); keep_remote: `download`, replacing
            the local file when it exists; skip: no op.
        local_prefix: the synced folder relative to its root; joined to local paths.
        remote_prefix: the synced folder relative to the drive root.

    Returns:
        Ops indexed 0..n-1: every `mkdir` first (parents before children), then file
        ops in path order. Uploads expect the remote target absent (new) or as listed
        (revision); downloads expect the remote source as listed and the local target
        absent or as indexed. A remote file the plan read to bind it (`plan.content`)
        is expected to hold those bytes (`RemoteEvidence.read_by_placet`).

    Raises:
        UsageError: see `check_decisions`.
    """
    decided = check_decisions(plan, decisions)
    mkdirs = [o for o in plan.ops if o.kind == "mkdir"]
    files = [o for o in plan.ops if o.kind != "mkdir"]
    have = {o.path for o in mkdirs}
    for rep in plan.conflicts:
        op = _decided_op(rep, decided[rep.path])
        if op is None:
            continue
        files.append(op)
        if op.kind == "upload":
            for parent in rep.missing_parents:
                if parent not in have:
                    have.add(parent)
                    mkdirs.append(PlanOp(parent, "mkdir", None, f"parent of {rep.path!r}"))
    mkdirs.sort(key=lambda o: o.path)
    files.sort(key=lambda o: o.path)
    out: list[dict[str, Any]] = []
    content = plan.content
    for i, o in enumerate(mkdirs + files):
        remote = join_remote(remote_prefix, o.remote_path)
        if o.kind == "mkdir":
            out.append(mkdir_op_dict(i, remote, o.reason))
            continue
        upload = o.kind.startswith("upload")
        out.append(
            {
                "index": i,
                "kind": o.kind,
                "local_path": join_remote(local_prefix, o.local_path),
                "remote_path": remote,
                "size": o.size,
                "expected_local": _local_dict(o.local) if o.local is not None else None,
                "expected_remote": _remote_dict(o.remote, content.get(o.path)),
                "replace": (o.remote is not None) if upload else (o.local is not None),
                "reason": o.reason,
            }
        )
    return out


def mkdir_op_dict(index: int, remote_path: str, reason: str) -> dict[str, Any]:
    """A sync's mkdir op of `remote_path` (expected absent), as `Op` dumps it."""
    return {
        "index": index,
        "kind": "mkdir",
        "local_path": None,
        "remote_path": remote_path,
        "size": None,
        "expected_local": None,
        "expected_remote": dict(_ABSENT_DICT),
        "replace": False,
        "reason": reason,
    }
