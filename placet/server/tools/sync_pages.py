"""What one page of a sync read tool holds: the result models of `local_index`,
`sync_plan` and `drive_changes`, the page builders and their opaque cursors.

Split from `placet.server.tools.sync` (which keeps the tool handlers) because this is
the agent's view of a result, not the call into the core: bounded pages (docs/design.md
section 5) whose cursor carries enough to go on after the last path shown, and which a
tool refuses (`invalid_cursor`) when it was not one it gave. A plan's page lists, in
this order, its conflicts (they need decisions), the remote folders to create, the file
ops, then the other reports (deleted on one side, unverified, collisions, special files
and names placet cannot use, errors); `skip` paths are only counted in the summary.
Pages of a plan come from the stored plan, never from a new listing. Every page holds
at most its count (`INDEX_PAGE`, `PLAN_PAGE`, `CHANGES_PAGE`) and no more items than fit
the reply budget (`placet.server.budget.fit`), so a page of long names is shorter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from placet.errors import UsageError
from placet.server.budget import fit, room_for
from placet.server.framework import ToolOutput
from placet.sync.download_policy import policy_note, replaces_local, replacing_downloads
from placet.sync.entries import LocalEntry, RemoteEntry
from placet.sync.model import PlanOp, PlanReport
from placet.sync.service import IndexedFolder, SyncService
from placet.sync.tables import StoredPlan
from placet.text import inert

INDEX_PAGE = 500
PLAN_PAGE = 200
CHANGES_PAGE = 500
FOLDER_ITSELF = "."  # in dirs_to_create: the synced remote folder itself (it is missing)


_CURSOR_KEY = secrets.token_bytes(32)
"""This process's key for signed cursors: a signed cursor is good in the server that
made it only (another `placet serve` refuses it; the agent restarts paging)."""


def _mac(tag: str, body: str) -> str:
    digest = hmac.new(_CURSOR_KEY, f"{tag}.{body}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def encode_cursor(tag: str, value: Any, *, signed: bool = False) -> str:
    """An opaque cursor: `tag` ("i1" index, "p1" plan, "o1" a proposal's ops) and
    base64url JSON of `value`; `signed`: followed by an HMAC of both under this process's
    key, so that `decode_cursor` refuses an altered or forged one."""
    body = base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{tag}.{body}.{_mac(tag, body)}" if signed else f"{tag}.{body}"


def decode_cursor(tag: str, cursor: str, tool: str, *, signed: bool = False) -> Any:
    """The JSON value of a cursor `encode_cursor(tag, ..., signed=signed)` made.

    Raises:
        UsageError (`invalid_cursor`): not such a cursor (or, `signed`, altered or made by
            another process); names `tool` to call again.
    """
    head, _, body = cursor.partition(".")
    if signed:
        body, _, mac = body.partition(".")
        if not hmac.compare_digest(mac.encode(), _mac(tag, body).encode()):
            head = ""
    try:
        if head == tag:
            return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error):
        pass
    raise UsageError(
        f"the cursor is not one {tool} gave; call {tool} again without a cursor to restart paging",
        code="invalid_cursor",
    )


# ---- local_index pages ---------------------------------------------------------------


class LocalEntryView(BaseModel):
    path: str = Field(description="Relative to the indexed folder.")
    kind: str = Field(description="file | dir | skipped (symlink, FIFO...) | error")
    size: int = Field(description="Bytes (files).")
    mtime_ns: int = Field(description="Modification time, ns since the epoch.")
    sha256: str | None
    digest_type: str | None = Field(description="The drive's digest type, computed here.")
    digest: str | None
    note: str = Field(description="Why an entry is skipped or in error.")

    @classmethod
    def of(cls, e: LocalEntry) -> LocalEntryView:
        return cls(path=e.path, kind=e.kind, size=e.size, mtime_ns=e.mtime_ns, sha256=e.sha256,
                   digest_type=e.digest_type, digest=e.digest, note=e.note)  # fmt: skip


class LocalIndexOut(ToolOutput):
    root: str
    path: str = Field(description='The indexed folder, relative to the root ("" = root).')
    digest_type: str | None = Field(description="The drive's digest type (null: none).")
    total_entries: int
    files_hashed: int = Field(description="Files read and hashed (the rest came from cache).")
    entries: list[LocalEntryView] = Field(
        description=f"At most {INDEX_PAGE} per page, fewer when they would not fit the reply."
    )
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")

    def summary(self) -> str:
        more = "; more with next_cursor" if self.next_cursor else ""
        return inert(
            f"{self.root}:{self.path or '.'}: {self.total_entries} entries, "
            f"{self.files_hashed} hashed now{more}"
        )


def index_page(
    svc: SyncService, ix: IndexedFolder, token: str, after: str | None, budget: int
) -> LocalIndexOut:
    """The page of `ix` after path `after` (None: the first): at most `INDEX_PAGE` entries
    and what fits a reply of `budget` bytes; its cursor carries `token`
    (`SyncService.remember_index`), the folder and the last path.
    """
    entries = ix.result.entries
    start = 0
    if after is not None:
        start = next((i for i, e in enumerate(entries) if e.path > after), len(entries))
    views = [LocalEntryView.of(e) for e in entries[start : start + INDEX_PAGE]]
    f = ix.folder
    out = LocalIndexOut(
        root=f.root.name,
        path=f.rel,
        digest_type=ix.digest_type,
        total_entries=len(entries),
        files_hashed=ix.result.hashed_count,
        entries=[],
        next_cursor=None,
    )
    longest = max((v.path for v in views), key=len, default="")
    cursor_room = len(encode_cursor("i1", [token, str(f.root.path), f.rel, True, longest]))
    n = fit(views, lambda v: v, room_for(budget, out) - cursor_room, INDEX_PAGE)
    out.entries = views[:n]
    if n and start + n < len(entries):  # an empty folder is one empty page, not an error
        out.next_cursor = encode_cursor(
            "i1", [token, str(f.root.path), f.rel, ix.include_hidden, views[n - 1].path]
        )
    return out


# ---- sync_plan pages -----------------------------------------------------------------


def _local_facts(e: LocalEntry | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {"kind": e.kind, "size": e.size, "mtime_ns": e.mtime_ns, "sha256": e.sha256,
            "digest": e.digest}  # fmt: skip


def _remote_facts(e: RemoteEntry | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {"kind": e.kind, "size": e.size, "mtime": e.mtime, "digests": dict(e.digests)}


class PlanOpView(BaseModel):
    kind: str = Field(description="upload | upload_revision | download")
    path: str = Field(description="Relative to the synced folders.")
    size: int | None
    reason: str
    local: dict[str, Any] | None
    remote: dict[str, Any] | None
    blocked_by_policy: bool = Field(
        description="A download replacing a local file while the root's policy is "
        "downloads = new-only: propose_sync refuses the plan (see policy_note)."
    )

    @classmethod
    def of(cls, o: PlanOp, policy: str) -> PlanOpView:
        blocked = replaces_local(o) and policy != "allow-overwrite"
        return cls(kind=o.kind, path=o.path, size=o.size, reason=o.reason,
                   local=_local_facts(o.local), remote=_remote_facts(o.remote),
                   blocked_by_policy=blocked)  # fmt: skip


class ConflictView(BaseModel):
    path: str
    conflict_kind: str = Field(
        description="content_differs | edited_here_deleted_there | deleted_here_edited_there "
        "| type_conflict"
    )
    detail: str
    allowed_decisions: list[str] = Field(description="Decide one in propose_sync(decisions).")
    keep_remote_blocked_by_policy: bool = Field(
        description="keep_remote would replace the local file, which the root's policy "
        "(downloads = new-only) refuses: decide keep_local or skip, or see policy_note."
    )
    local: dict[str, Any] | None
    remote: dict[str, Any] | None


class ReportView(BaseModel):
    path: str
    kind: str = Field(
        description="deleted_remote | deleted_local | unverified | collision | "
        "skipped_special | error | unbound (nothing is done for these). skipped_special: a special "
        "file (symlink, FIFO...) or a name placet cannot use (':', a leading '-', control "
        "characters, the reserved '.placet-tmp-' prefix, too long or too deep); detail "
        "says which. Rename it to sync it. unbound: a transfer of a remote file without "
        "a digest that placet could not read while planning to bind it to its content "
        "(over 64 MiB, beyond the plan's read budget, or gone); detail says which."
    )
    detail: str
    blocked_by: str | None


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
        description='propose_sync creates it first (counted in mkdir, "." in dirs_to_create).'
    )
    counts: dict[str, int] = Field(
        description="Paths per op and report kind (skip included), and upload/download bytes; "
        "mkdir includes the remote folder itself when it is missing."
    )
    download_policy: str = Field(
        description="The root's downloads policy: new-only (default) | allow-overwrite."
    )
    downloads_blocked_by_policy: int = Field(
        description="Downloads replacing local files that the policy refuses; propose_sync "
        "refuses the plan while any is in it."
    )
    policy_note: str | None = Field(description="How the owner allows them, when any.")
    conflicts: list[ConflictView]
    dirs_to_create: list[str] = Field(
        description='Remote folders, parents first; "." is the synced remote folder itself.'
    )
    ops: list[PlanOpView]
    reports: list[ReportView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")

    def summary(self) -> str:
        c = self.counts
        kinds = ("upload", "upload_revision", "download", "mkdir", "conflict", "skip", "unbound")
        parts = [f"{c[k]} {k}" for k in kinds if c.get(k)]
        more = "; more with next_cursor" if self.next_cursor else ""
        blocked = ""
        if self.downloads_blocked_by_policy:
            blocked = (
                f"; {self.downloads_blocked_by_policy} download(s) would replace local files "
                f"and are refused by policy: {self.policy_note}"
            )
        return inert(f"plan {self.plan_id}: {', '.join(parts) or 'nothing to do'}{more}{blocked}")


def _folder_missing(meta: Mapping[str, Any], remote_path: str) -> bool:
    return bool(meta.get("remote_folder_missing")) and bool(remote_path)


_ORDERS: OrderedDict[int, tuple[list[PlanOp | PlanReport], list[str], set[str]]] = OrderedDict()
_ORDERS_LOCK = threading.Lock()


def _plan_order(sp: StoredPlan) -> tuple[list[PlanOp | PlanReport], list[str], set[str]]:
    """The plan's items in page order, its plain downloads replacing a local file and
    the conflicts whose keep_remote would (`replacing_downloads`); kept for the 4 plans
    paged last, as a stored plan never changes (paging 100,000 items is then linear)."""
    with _ORDERS_LOCK:
        hit = _ORDERS.get(sp.id)
    if hit is not None:
        return hit
    p = sp.plan
    conflicts = [r for r in p.reports if r.kind == "conflict"]
    mkdirs = [o for o in p.ops if o.kind == "mkdir"]
    files = [o for o in p.ops if o.kind != "mkdir"]
    others = [r for r in p.reports if r.kind not in ("conflict", "skip")]
    plain, kept = replacing_downloads(p, None)
    seq: list[PlanOp | PlanReport] = [*conflicts, *mkdirs, *files, *others]
    got = (seq, plain, set(kept))
    with _ORDERS_LOCK:
        _ORDERS[sp.id] = got
        while len(_ORDERS) > 4:
            _ORDERS.popitem(last=False)
    return got


def plan_page(svc: SyncService, plan_id: int, offset: int, budget: int) -> SyncPlanOut:
    """The page of stored plan `plan_id` from item `offset`: at most `PLAN_PAGE` items, in
    the order the module docstring gives, and what fits a reply of `budget` bytes;
    flagged by the root's downloads policy.

    Raises:
        NotFound: no such plan (or pruned after 7 days).
    """
    sp = svc.load_plan(plan_id)
    seq, plain, kept = _plan_order(sp)
    page = seq[offset : offset + PLAN_PAGE]
    policy = svc.settings.download_policy(Path(sp.pair.root_path))
    blocking = policy != "allow-overwrite"
    counts = dict(sp.summary)
    dv: list[str] = []
    if _folder_missing(sp.meta, sp.pair.remote_path):  # propose_sync creates it first
        counts["mkdir"] = counts.get("mkdir", 0) + 1
        if offset == 0:
            dv.append(FOLDER_ITSELF)
    views: list[ConflictView | str | PlanOpView | ReportView] = []
    for x in page:
        if isinstance(x, PlanOp):
            views.append(x.path if x.kind == "mkdir" else PlanOpView.of(x, policy))
        elif x.kind == "conflict":
            views.append(
                ConflictView(
                    path=x.path,
                    conflict_kind=x.conflict_kind or "",
                    detail=x.detail,
                    allowed_decisions=list(x.allowed_decisions),
                    keep_remote_blocked_by_policy=blocking and x.path in kept,
                    local=_local_facts(x.local),
                    remote=_remote_facts(x.remote),
                )
            )
        else:
            views.append(
                ReportView(path=x.path, kind=x.kind, detail=x.detail, blocked_by=x.blocked_by)
            )
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
        downloads_blocked_by_policy=len(plain) if blocking else 0,
        policy_note=policy_note(sp.pair.root_path) if blocking and (plain or kept) else None,
        conflicts=[],
        dirs_to_create=dv,
        ops=[],
        reports=[],
        next_cursor=encode_cursor("p1", [sp.id, len(seq)]),
    )
    n = fit(views, lambda v: v, room_for(budget, out), PLAN_PAGE)
    for v in views[:n]:
        if isinstance(v, str):
            out.dirs_to_create.append(v)
        elif isinstance(v, ConflictView):
            out.conflicts.append(v)
        elif isinstance(v, PlanOpView):
            out.ops.append(v)
        else:
            out.reports.append(v)
    more = offset + n < len(seq)
    out.next_cursor = encode_cursor("p1", [sp.id, offset + n]) if n and more else None
    return out


# ---- drive_changes pages -------------------------------------------------------------


class ChangeView(BaseModel):
    path: str = Field(description="Relative to the folder asked about.")
    change: Literal["added", "changed", "removed"]
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class DriveChangesOut(ToolOutput):
    path: str
    anchor: str = Field(description="Pass as since_anchor next time.")
    taken_at: str = Field(description="When this listing was taken (UTC).")
    since: str | None = Field(description="When the anchor's listing was taken; null: none given.")
    entry_count: int = Field(description="Entries under the folder now.")
    counts: dict[str, int] = Field(description="added / changed / removed in total.")
    changes: list[ChangeView] = Field(
        description=f"At most {CHANGES_PAGE} per page, fewer when they would not fit the reply."
    )
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")

    def summary(self) -> str:
        c = self.counts
        base = (
            f"{c['added']} added, {c['changed']} changed, {c['removed']} removed"
            if self.since
            else "anchor set; call again with since_anchor to see changes"
        )
        return inert(f"{self.path or '(drive root)'}: {base}")
