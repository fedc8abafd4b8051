"""Binding a sync's transfers to content on remotes without digests.

A remote file without a digest of the remote's own (crypt, many WebDAV servers, multipart
S3 objects) has only a size and an mtime, both restorable after a rewrite. So a sync op
that reads or replaces one (a `download`, an `upload_revision`, a conflict whose decision
would give one) is bound to the bytes placet reads while planning: each file is read once
through rcd (`Drive.content_sha256`), its SHA-256 kept in `SyncPlan.content` and recorded
as the op's evidence, which the executor compares with the bytes it reads
(docs/decisions/0011-no-digest-binding.md). A file over `CONTENT_READ_MAX`, beyond the
plan's `ReadBudget` or gone when read is reported `unbound` and gets no op; a drive error
that may pass fails the plan, retryably. Remotes with digests cost nothing here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from placet.drive.base import Drive
from placet.errors import PlacetError
from placet.proposals.evidence import CONTENT_READ_MAX
from placet.schema import DIGEST_PREFERENCE, join_remote
from placet.sync.entries import RemoteEntry
from placet.sync.jobs import Progress
from placet.sync.model import PlanOp, PlanReport, SyncPlan

__all__ = ["ReadBudget", "bind_content", "needs_content"]

PLAN_READ_MAX_BYTES = 1 << 30
"""Most bytes one plan reads to bind transfers to content."""
PLAN_READ_MAX_FILES = 5_000
"""Most files one plan reads to bind transfers to content (each is one rcd call: about
30 ms for a small file on a WebDAV server on 127.0.0.1, docs/performance.md)."""
_THREADS = 4


@dataclass(frozen=True)
class ReadBudget:
    """How much one plan reads to bind transfers: at most `file_bytes` a file, and
    `total_bytes` and `files` in all."""

    file_bytes: int = CONTENT_READ_MAX
    total_bytes: int = PLAN_READ_MAX_BYTES
    files: int = PLAN_READ_MAX_FILES


def needs_content(e: RemoteEntry | None) -> bool:
    """True for a remote file listed without a digest placet can compare (sha256, sha1,
    md5): a transfer reading or replacing it must be bound to its bytes."""
    if e is None or e.kind != "file":
        return False
    d = e.digests
    return not any(d.get(t) for t in DIGEST_PREFERENCE)


def _binds(item: PlanOp | PlanReport) -> bool:
    """An op that reads or replaces its remote file, or a conflict a decision could turn
    into one (keep_remote downloads it, keep_local over it replaces it)."""
    if isinstance(item, PlanOp):
        return item.kind in ("download", "upload_revision") and needs_content(item.remote)
    return (
        item.kind == "conflict"
        and any(d != "skip" for d in item.allowed_decisions)
        and needs_content(item.remote)
    )


def _what(item: PlanOp | PlanReport) -> str:
    if isinstance(item, PlanOp):
        return item.kind
    return f"conflict {item.conflict_kind}: {item.detail}"


def bind_content(
    plan: SyncPlan,
    drive: Drive,
    remote_folder: str,
    *,
    budget: ReadBudget | None = None,
    progress: Progress | None = None,
    read: Callable[[str], str] | None = None,
) -> SyncPlan:
    """`plan` with every transfer on a remote file without digests bound to its content
    (see the module docstring); the plan itself when there is none.

    Args:
        remote_folder: the synced folder relative to the drive root (plan paths are
            relative to it).
        budget: what may be read (default `ReadBudget()`).
        read: drive path -> SHA-256 of its bytes (default `drive.content_sha256`).

    Returns:
        A `SyncPlan` whose `content` maps each bound path to its SHA-256; ops and
        conflicts that could not be bound are `unbound` reports instead, and the
        summary counts them so.

    Raises:
        DriveUnavailable (retryable) from a read; the plan is not stored.
    """
    items: list[PlanOp | PlanReport] = [o for o in plan.ops if _binds(o)]
    if plan.summary.get("conflict"):
        items += [r for r in plan.reports if _binds(r)]
    if not items:
        return plan
    items.sort(key=lambda i: i.path)
    budget = budget or ReadBudget()
    why: dict[int, str] = {}  # id(item) -> reason it is not bound
    chosen: list[PlanOp | PlanReport] = []
    used = 0
    for it in items:
        assert it.remote is not None
        size = it.remote.size
        if size < 0 or size > budget.file_bytes:
            how = "the remote does not give its size" if size < 0 else f"it is {size} bytes"
            why[id(it)] = (
                f"not planned ({_what(it)}): the remote gives no digest for this file, so "
                f"placet binds a transfer to the bytes it reads while planning, at most "
                f"{budget.file_bytes} bytes a file, and {how}; transfer it outside placet, "
                "or use a remote that gives digests"
            )
        elif used + size > budget.total_bytes or len(chosen) >= budget.files:
            why[id(it)] = (
                f"not planned ({_what(it)}): the remote gives no digest, so placet reads "
                f"each file it would transfer while planning, at most {budget.files} files "
                f"and {budget.total_bytes} bytes a plan, and this plan reached that; apply "
                "this plan, then plan again for the rest"
            )
        else:
            chosen.append(it)
            used += size
    if progress is not None:
        progress.phase = f"reading {len(chosen)} remote files ({used} bytes) to bind them"
    read = read or drive.content_sha256

    def one(it: PlanOp | PlanReport) -> tuple[PlanOp | PlanReport, str | PlacetError]:
        assert it.remote is not None
        try:
            return it, read(join_remote(remote_folder, it.remote.path))
        except PlacetError as e:
            if e.retryable:
                raise
            return it, e

    content: dict[str, str] = {}
    with ThreadPoolExecutor(_THREADS, thread_name_prefix="placet-bind") as ex:
        for it, got in ex.map(one, chosen):
            if isinstance(got, str):
                content[it.path] = got
            else:
                why[id(it)] = (
                    f"not planned ({_what(it)}): placet could not read it to bind the "
                    f"transfer to its content ({got.message}); plan again"
                )
    return _rebuilt(plan, items, why, content)


def _rebuilt(
    plan: SyncPlan,
    items: list[PlanOp | PlanReport],
    why: dict[int, str],
    content: dict[str, str],
) -> SyncPlan:
    """`plan` with the items in `why` moved to `unbound` reports and `content` kept."""
    if not why:
        return dataclasses.replace(plan, content=content)
    dropped = [it for it in items if id(it) in why]
    gone = {id(it) for it in dropped}
    summary = dict(plan.summary)
    unbound: list[PlanReport] = []
    for it in dropped:
        if isinstance(it, PlanOp):
            summary[it.kind] -= 1
            moved = "download_bytes" if it.kind == "download" else "upload_bytes"
            summary[moved] -= max(it.size or 0, 0)
        else:
            summary["conflict"] -= 1
        summary["unbound"] = summary.get("unbound", 0) + 1
        unbound.append(
            PlanReport(it.path, "unbound", why[id(it)], local=it.local, remote=it.remote)
        )
    ops = tuple(o for o in plan.ops if id(o) not in gone)
    reports = [r for r in plan.reports if id(r) not in gone] + unbound
    reports.sort(key=lambda r: r.path)
    return SyncPlan(
        ops,
        tuple(reports),
        summary,
        plan.local_fingerprint,
        plan.remote_fingerprint,
        content=content,
    )
