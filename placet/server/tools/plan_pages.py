"""What the agent reads of a stored sync plan: the summary `sync_plan` answers and the
pages `sync_plan_ops` lists, both in one compact item form.

The agent's whole task must fit its context, not only each reply
(docs/decisions/0015-reply-budget.md): a plan of any size is answered as a summary
(counts and bytes by kind, every conflict, a few examples of every other kind, each
kind's usual reason) that says `propose_sync` needs only `plan_id` and the conflicts'
decisions. Ops are listed only when asked for, by kind or folder, from the stored plan,
each once. An item says nothing its page already says (the kind listed, the kind's
usual reason, a side that is a file, a size equal to the op's, a digest equal to the
SHA-256, an empty field). A page holds at most `PLAN_PAGE` items and what fits the
reply budget.
"""

from __future__ import annotations

import threading
import unicodedata
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from placet.errors import UsageError
from placet.paths.local import MAX_LOCAL_PATH_BYTES
from placet.paths.shape import utf8_len
from placet.server.budget import fitting, json_bytes, room_for
from placet.server.framework import ToolOutput
from placet.server.tools.params import NextCursor
from placet.server.tools.sync_pages import (
    decode_cursor,
    encode_cursor,
    examples_by_kind,
    optional,
    page_field,
)
from placet.sync.download_policy import policy_note, replaces_local, replacing_downloads
from placet.sync.entries import LocalEntry, RemoteEntry
from placet.sync.model import PlanOp, PlanReport
from placet.sync.service import SyncService
from placet.sync.tables import StoredPlan
from placet.text import inert

PLAN_PAGE = 200
EXAMPLES = 3
"""Items of each kind the summary shows (conflicts: every one that fits)."""
FOLDER_ITSELF = "."  # a mkdir item: the synced remote folder itself (it is missing)
_MISSING = "the synced remote folder does not exist yet"
_TAG = "q1"
USUAL_REASONS = "Each kind's most common reason; an item leaves its reason out when it is this one."

ItemKind = Literal[
    "conflict", "mkdir", "upload", "upload_revision", "download", "deleted_remote",
    "deleted_local", "unverified", "collision", "skipped_special", "error", "unbound",
]  # fmt: skip


class PlanItem(BaseModel):
    """One path of a plan: an op, a conflict or another report, compact."""

    path: str = Field(description='Relative to the synced folders ("." the remote folder).')
    kind: str | None = optional(
        "An op (mkdir | upload | upload_revision | download), a conflict, or a report, for "
        "which nothing is done: deleted_remote | deleted_local | unverified | collision | "
        "skipped_special | error | unbound. skipped_special: a special file (symlink, "
        "FIFO...) or a name placet cannot use (':', a leading '-', control characters, the "
        "reserved '.placet-tmp-' prefix, too long or too deep); reason says which; rename "
        "it to sync it. unbound: a transfer of a remote file without a digest that placet "
        "could not read while planning to bind it to its content (over 64 MiB, beyond the "
        "plan's read budget, or gone). Left out where the page lists one kind."
    )
    size: int | None = optional("Bytes the op moves.")
    reason: str | None = optional(
        "Why: the op's reason or the report's detail; left out when it is the kind's usual "
        "one (usual_reasons)."
    )
    conflict_kind: str | None = optional(
        "content_differs | edited_here_deleted_there | deleted_here_edited_there | type_conflict"
    )
    allowed_decisions: list[str] | None = optional(
        "A conflict's decisions: give one in propose_sync(decisions)."
    )
    local: dict[str, Any] | None = optional(
        "The local side as planned: mtime_ns, sha256, digest (the drive's type, when it is "
        "not the sha256), size when not the op's, kind when not a file; absent: none."
    )
    remote: dict[str, Any] | None = optional(
        "The remote side as listed: mtime, digests, size when not the op's, kind when not a "
        "file; absent: none."
    )
    blocked_by: str | None = optional("The ancestor whose state stopped planning here.")
    blocked_by_policy: bool = Field(
        default=False,
        exclude_if=lambda v: not v,
        description="A download (a conflict: its keep_remote) replacing a local file, which "
        "the root's policy (downloads = new-only) refuses: see policy_note.",
    )


def _local_facts(e: LocalEntry | None, size: int | None) -> dict[str, Any] | None:
    if e is None:
        return None
    out: dict[str, Any] = {} if e.kind == "file" else {"kind": e.kind}
    if e.kind != "dir":
        if e.size != size:
            out["size"] = e.size
        if e.sha256:
            out["sha256"] = e.sha256
        if e.digest and e.digest != e.sha256:
            out["digest"] = e.digest
    out["mtime_ns"] = e.mtime_ns
    return out


def _remote_facts(e: RemoteEntry | None, size: int | None) -> dict[str, Any] | None:
    if e is None:
        return None
    out: dict[str, Any] = {} if e.kind == "file" else {"kind": e.kind}
    if e.kind != "dir" and e.size != size:
        out["size"] = e.size
    if e.mtime is not None:
        out["mtime"] = e.mtime
    if e.digests:
        out["digests"] = dict(e.digests)
    return out


# ---- the plan's items, in page order (kept for the last plans read) -------------------


Entry = PlanOp | PlanReport


@dataclass(frozen=True)
class _Order:
    """A stored plan's items in page order, and what is said of them once."""

    items: list[Entry]
    usual: dict[str, str]  # kind -> its most common reason
    plain: set[str]  # downloads replacing a local file
    kept: set[str]  # conflicts whose keep_remote would replace one


_ORDERS: OrderedDict[int, _Order] = OrderedDict()
_ORDERS_LOCK = threading.Lock()


def _kind(x: Entry) -> str:
    return x.kind


def _why(x: Entry) -> str:
    return x.reason if isinstance(x, PlanOp) else x.detail


def _order(sp: StoredPlan) -> _Order:
    """`sp`'s items in page order, kept for the 4 plans read last (a stored plan never
    changes, so paging 100,000 items is linear)."""
    with _ORDERS_LOCK:
        hit = _ORDERS.get(sp.id)
    if hit is not None:
        return hit
    p = sp.plan
    itself: list[Entry] = []
    if sp.meta.get("remote_folder_missing") and sp.pair.remote_path:
        itself = [PlanOp(FOLDER_ITSELF, "mkdir", None, _MISSING)]
    items: list[Entry] = [
        *(r for r in p.reports if r.kind == "conflict"),
        *itself,
        *(o for o in p.ops if o.kind == "mkdir"),
        *(o for o in p.ops if o.kind != "mkdir"),
        *(r for r in p.reports if r.kind not in ("conflict", "skip")),
    ]
    reasons: dict[str, Counter[str]] = {}
    for x in items:
        reasons.setdefault(x.kind, Counter())[_why(x)] += 1
    plain, kept = replacing_downloads(p, None)
    got = _Order(items, {k: c.most_common(1)[0][0] for k, c in reasons.items()}, set(plain),
                 set(kept))  # fmt: skip
    with _ORDERS_LOCK:
        _ORDERS[sp.id] = got
        while len(_ORDERS) > 4:
            _ORDERS.popitem(last=False)
    return got


@dataclass(frozen=True)
class _Viewer:
    """Makes the compact `PlanItem` of a plan's entries (module docstring)."""

    order: _Order
    blocking: bool  # the root's policy refuses downloads replacing local files
    with_kind: bool  # the page mixes kinds
    facts: bool = True  # with the local and remote sides

    def __call__(self, x: Entry) -> PlanItem:
        why = _why(x)
        item = PlanItem(
            path=x.path,
            kind=x.kind if self.with_kind else None,
            reason=None if why == self.order.usual.get(x.kind) else why,
        )
        size = x.size if isinstance(x, PlanOp) else None
        if isinstance(x, PlanOp):
            item.size = size
            item.blocked_by_policy = self.blocking and replaces_local(x)
        else:
            item.blocked_by = x.blocked_by
            if x.kind == "conflict":
                item.conflict_kind = x.conflict_kind
                item.allowed_decisions = list(x.allowed_decisions)
                item.blocked_by_policy = self.blocking and x.path in self.order.kept
        if self.facts:
            item.local = _local_facts(x.local, size)
            item.remote = _remote_facts(x.remote, size)
        return item


def _policy(svc: SyncService, sp: StoredPlan) -> str:
    return svc.settings.download_policy(Path(sp.pair.root_path))


# ---- sync_plan: the summary ------------------------------------------------------------


class SyncPlanOut(ToolOutput):
    plan_id: int = Field(description="Pass to propose_sync.")
    created_at: str
    expires_at: str = Field(description="The stored plan is pruned after this time.")
    reused: bool = Field(description="Nothing changed since an identical plan; its id again.")
    root: str
    local_path: str
    remote_path: str
    digest_type: str | None = Field(description="Compared by this digest (null: size only).")
    remote_folder_missing: bool = Field(
        description='propose_sync creates it first (counted in mkdir, "." among its items).'
    )
    counts: dict[str, int] = Field(
        description="Paths per op and report kind (skip included), upload_bytes and "
        "download_bytes; mkdir includes the remote folder itself when it is missing."
    )
    download_policy: str = Field(
        description="The root's downloads policy: new-only (default) | allow-overwrite."
    )
    downloads_blocked_by_policy: int = Field(
        description="Downloads replacing local files that the policy refuses; propose_sync "
        "refuses the plan while any is in it."
    )
    policy_note: str | None = Field(description="How the owner allows them, when any.")
    conflicts: list[PlanItem] = Field(
        description="Every conflict (each needs a decision in propose_sync), as many as fit."
    )
    conflicts_cursor: str | None = Field(
        description="More conflicts than fit: sync_plan_ops(plan_id, kind='conflict', "
        "cursor=this) lists the rest; null: all are above."
    )
    usual_reasons: dict[str, str] = Field(description=USUAL_REASONS)
    examples: dict[str, list[PlanItem]] = Field(
        description=f"The first {EXAMPLES} items of each other kind (skip: only counted); "
        "every item: sync_plan_ops."
    )
    next_step: str = Field(description="What to call now.")

    def summary(self) -> str:
        c = self.counts
        kinds = ("upload", "upload_revision", "download", "mkdir", "conflict", "skip", "unbound")
        parts = [f"{c[k]} {k}" for k in kinds if c.get(k)]
        blocked = ""
        if self.downloads_blocked_by_policy:
            blocked = (
                f"; {self.downloads_blocked_by_policy} download(s) would replace local files "
                f"and are refused by policy: {self.policy_note}"
            )
        return inert(f"plan {self.plan_id}: {', '.join(parts) or 'nothing to do'}{blocked}")


def _next_step(sp: StoredPlan, conflicts: int, blocked: int) -> str:
    if blocked:
        return (
            f"propose_sync refuses plan {sp.id} while {blocked} download(s) would replace "
            "local files against the root's policy (policy_note); ask the owner, then call "
            "sync_plan again"
        )
    decide = (
        f" and decisions (one of its allowed_decisions for each of the {conflicts} "
        "conflicts, by path)"
        if conflicts
        else ""
    )
    return (
        f"To propose this sync call propose_sync(plan_id={sp.id}, reason=...){decide}; it "
        "needs nothing else: reading the ops is not needed. sync_plan_ops(plan_id, kind, "
        "folder) lists them only if you want to check some."
    )


def plan_summary(svc: SyncService, plan_id: int, budget: int) -> SyncPlanOut:
    """The summary of stored plan `plan_id` (module docstring) in a reply of `budget`
    bytes: every conflict that fits, then up to `EXAMPLES` items of every other kind.

    Raises:
        NotFound: no such plan (or pruned after 7 days).
    """
    sp = svc.load_plan(plan_id)
    order = _order(sp)
    policy = _policy(svc, sp)
    blocking = policy != "allow-overwrite"
    counts = dict(sp.summary)
    if sp.meta.get("remote_folder_missing") and sp.pair.remote_path:
        counts["mkdir"] = counts.get("mkdir", 0) + 1
    conflicts = [x for x in order.items if x.kind == "conflict"]
    blocked = len(order.plain) if blocking else 0
    out = SyncPlanOut(
        plan_id=sp.id,
        created_at=sp.created_at.isoformat(),
        expires_at=sp.expires_at.isoformat(),
        reused=sp.reused,
        root=sp.root_name,
        local_path=sp.pair.local_path,
        remote_path=sp.pair.remote_path,
        digest_type=sp.meta.get("digest_type"),
        remote_folder_missing=bool(sp.meta.get("remote_folder_missing")),
        counts=counts,
        download_policy=policy,
        downloads_blocked_by_policy=blocked,
        policy_note=policy_note(sp.pair.root_path)
        if blocking and (order.plain or order.kept)
        else None,
        conflicts=[],
        conflicts_cursor=encode_cursor(_TAG, [sp.id, "conflict", "", len(conflicts)]),
        usual_reasons=order.usual,
        examples={},
        next_step=_next_step(sp, len(conflicts), blocked),
    )
    room = room_for(budget, out)
    view = _Viewer(order, blocking, with_kind=False)
    out.conflicts = fitting(map(view, conflicts), room, len(conflicts))
    room -= json_bytes(out.conflicts)
    n = len(out.conflicts)
    more = n < len(conflicts)
    out.conflicts_cursor = encode_cursor(_TAG, [sp.id, "conflict", "", n]) if more else None
    brief = _Viewer(order, blocking, with_kind=False, facts=False)
    others = (x for x in order.items if x.kind != "conflict")
    out.examples = examples_by_kind(others, _kind, brief, room)
    return out


# ---- sync_plan_ops: the items, paged ---------------------------------------------------


class SyncPlanOpsOut(ToolOutput):
    plan_id: int
    kind: str | None = Field(description="The kind listed (null: every kind, in page order).")
    folder: str | None = Field(description="The folder listed, with everything under it.")
    total: int = Field(description="Items of this kind and folder in the plan.")
    usual_reasons: dict[str, str] = Field(description=USUAL_REASONS)
    items: list[PlanItem] = page_field(PLAN_PAGE)
    next_cursor: NextCursor

    def summary(self) -> str:
        what = self.kind or "item"
        where = f" under {self.folder}" if self.folder else ""
        more = "; more with next_cursor" if self.next_cursor else ""
        shown = f"{len(self.items)} of {self.total} {what}(s)"
        return inert(f"plan {self.plan_id}: {shown}{where}{more}")


def clean_folder(folder: str | None) -> str | None:
    """`folder` as plan paths name it (NFC, no surrounding slashes); None for the whole
    plan ("", "."). Raises UsageError (``invalid_argument``): longer than a local path."""
    if folder is None:
        return None
    f = unicodedata.normalize("NFC", folder).strip("/")
    if utf8_len(f) > MAX_LOCAL_PATH_BYTES:  # the reply names it: it must fit the reply
        raise UsageError(
            f"folder is {utf8_len(f)} bytes long, over {MAX_LOCAL_PATH_BYTES}; name a shorter "
            "folder of the plan, or list the plan by kind without a folder",
            code="invalid_argument",
            details={"field": "folder"},
        )
    return None if f in ("", FOLDER_ITSELF) else f


_CHOSEN: OrderedDict[tuple[int, str | None, str | None], list[Entry]] = OrderedDict()


def _matching(sp: StoredPlan, kind: str | None, folder: str | None) -> list[Entry]:
    """`sp`'s items of `kind` under `folder`, in page order; kept for the 8 lists paged
    last, so that paging through 100,000 items filters them once, not once a page."""
    key = (sp.id, kind, folder)
    with _ORDERS_LOCK:
        hit = _CHOSEN.get(key)
    if hit is not None:
        return hit
    prefix = f"{folder}/" if folder else ""
    got = [
        x
        for x in _order(sp).items
        if (kind is None or x.kind == kind)
        and (folder is None or x.path == folder or x.path.startswith(prefix))
    ]
    with _ORDERS_LOCK:
        _CHOSEN[key] = got
        while len(_CHOSEN) > 8:
            _CHOSEN.popitem(last=False)
    return got


def plan_items_page(
    svc: SyncService,
    sp: StoredPlan,
    kind: str | None,
    folder: str | None,
    cursor: str | None,
    budget: int,
) -> SyncPlanOpsOut:
    """The page of `sp`'s items of `kind` under `folder` (None: all) that `cursor`
    continues (None: the first), in page order, at most `PLAN_PAGE` and what fits a
    reply of `budget` bytes.

    Raises:
        UsageError (`invalid_cursor`): a cursor of another plan, kind or folder.
    """
    offset = 0
    if cursor is not None:
        got = decode_cursor(_TAG, cursor, "sync_plan_ops")
        ok = isinstance(got, list) and len(got) == 4 and isinstance(got[3], int)
        if not ok or got[:3] != [sp.id, kind or "", folder or ""] or got[3] < 0:
            raise UsageError(
                "the cursor belongs to another plan, kind or folder; call sync_plan_ops "
                "again with the same plan_id, kind and folder, or without a cursor to restart",
                code="invalid_cursor",
            )
        offset = got[3]
    order = _order(sp)
    chosen = _matching(sp, kind, folder)
    blocking = _policy(svc, sp) != "allow-overwrite"
    view = _Viewer(order, blocking, with_kind=kind is None)
    page = chosen[offset : offset + PLAN_PAGE]
    kinds = {x.kind for x in page}
    out = SyncPlanOpsOut(
        plan_id=sp.id,
        kind=kind,
        folder=folder,
        total=len(chosen),
        usual_reasons={k: v for k, v in order.usual.items() if k in kinds},
        items=[],
        next_cursor=encode_cursor(_TAG, [sp.id, kind or "", folder or "", len(chosen)]),
    )
    out.items = fitting(map(view, page), room_for(budget, out), PLAN_PAGE)
    end = offset + len(out.items)
    more = bool(out.items) and end < len(chosen)
    out.next_cursor = encode_cursor(_TAG, [sp.id, kind or "", folder or "", end]) if more else None
    return out


__all__ = [
    "EXAMPLES",
    "PLAN_PAGE",
    "ItemKind",
    "PlanItem",
    "SyncPlanOpsOut",
    "SyncPlanOut",
    "clean_folder",
    "plan_items_page",
    "plan_summary",
]
