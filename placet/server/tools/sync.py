"""`local_index`, `sync_plan`, `drive_changes`, `propose_sync`: sync over MCP.

Thin over `placet.sync`: the service indexes, lists, plans and stores
(`placet.sync.service`), `placet.sync.changes` answers what changed on the drive, and
`placet.sync.propose` turns a stored plan into one inert proposal. What this module adds
is the agent's view: bounded pages with opaque cursors (DESIGN.md section 5), and the
long-read budget (`settings.long_read_seconds`, about 45 s): a cold index or plan that
is not done by then answers the retryable `in_progress` with a progress figure and goes
on in this server process; the same call again returns the result.

A plan's page lists, in this order, its conflicts (they need decisions), the remote
folders to create, the file ops, then the other reports (deleted on one side, unverified,
collisions, special files and names placet cannot use, errors); `skip` paths are only
counted in the summary. Pages of a plan come from the stored plan, never from a new
listing.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from placet.errors import UsageError
from placet.paths import check_remote_path
from placet.server.framework import (
    MAX_ID,
    PROPOSE,
    READ_DRIVE,
    READ_LOCAL,
    ToolOutput,
    define_tool,
)
from placet.server.models import ProposalView, ProposeOut
from placet.server.state import ServerState, caller
from placet.sync import changes as ch
from placet.sync.download_policy import (
    policy_note,
    refuse_blocked_downloads,
    replaces_local,
    replacing_downloads,
)
from placet.sync.model import LocalEntry, PlanOp, PlanReport, RemoteEntry
from placet.sync.propose import propose_sync as _propose_sync
from placet.sync.propose import refuse_outdated_plan
from placet.sync.service import IndexedFolder, SyncService
from placet.text import inert

INDEX_PAGE = 500
PLAN_PAGE = 200
CHANGES_PAGE = 500
FOLDER_ITSELF = "."  # in dirs_to_create: the synced remote folder itself (it is missing)

_services: dict[int, tuple[ServerState, SyncService]] = {}
_services_lock = threading.Lock()


def service_of(state: ServerState) -> SyncService:
    """The one `SyncService` of this server (its caches and long reads live there)."""
    with _services_lock:
        got = _services.get(id(state))
        if got is None or got[0] is not state:
            got = _services[id(state)] = (state, SyncService(state.store, state.settings))
        return got[1]


def _enc(tag: str, value: Any) -> str:
    return f"{tag}.{base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip('=')}"


def _dec(tag: str, cursor: str, tool: str) -> Any:
    head, _, body = cursor.partition(".")
    try:
        if head == tag:
            return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error):
        pass
    raise UsageError(
        f"the cursor is not one {tool} gave; call {tool} again without a cursor to restart paging",
        code="invalid_cursor",
    )


RootName = Annotated[
    str | None,
    Field(description="Name of the local root (see roots_list); default: the first root."),
]
IncludeHidden = Annotated[
    bool, Field(description='Also include names starting with "." (left out by default).')
]
Cursor = Annotated[
    str | None, Field(description="The next_cursor of a previous call; omit to start.")
]


# ---- local_index ----------------------------------------------------------------------


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
    entries: list[LocalEntryView] = Field(description=f"At most {INDEX_PAGE} per page.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")

    def summary(self) -> str:
        more = "; more with next_cursor" if self.next_cursor else ""
        return inert(
            f"{self.root}:{self.path or '.'}: {self.total_entries} entries, "
            f"{self.files_hashed} hashed now{more}"
        )


def _index_page(
    svc: SyncService, ix: IndexedFolder, token: str, after: str | None
) -> LocalIndexOut:
    entries = ix.result.entries
    start = 0
    if after is not None:
        start = next((i for i, e in enumerate(entries) if e.path > after), len(entries))
    page = entries[start : start + INDEX_PAGE]
    more = start + INDEX_PAGE < len(entries)
    f = ix.folder
    nxt = None  # an empty folder (or only hidden names) is one empty page, not an error
    if more and page:
        nxt = _enc("i1", [token, str(f.root.path), f.rel, ix.include_hidden, page[-1].path])
    return LocalIndexOut(
        root=f.root.name,
        path=f.rel,
        digest_type=ix.digest_type,
        total_entries=len(entries),
        files_hashed=ix.result.hashed_count,
        entries=[LocalEntryView.of(e) for e in page],
        next_cursor=nxt,
    )


def _local_index(
    state: ServerState, svc: SyncService, who_ctx: Any, path: str, cursor: str | None,
    root: str | None, include_hidden: bool,
) -> LocalIndexOut:  # fmt: skip
    budget = state.settings.long_read_seconds
    if cursor is None:
        ix = svc.local_index(
            who_ctx, path=path, root=root, include_hidden=include_hidden, budget=budget
        )
        return _index_page(svc, ix, svc.remember_index(ix), None)
    token, root_path, rel, hidden, after = _dec("i1", cursor, "local_index")
    folder = svc.folder(who_ctx, path, root)
    if (str(folder.root.path), folder.rel, include_hidden) != (root_path, rel, hidden):
        raise UsageError(
            "the cursor belongs to another folder or include_hidden; call local_index again "
            "with the same arguments, or without a cursor to restart paging",
            code="invalid_cursor",
        )
    kept = svc.recall_index(token)
    if kept is not None:
        ix = kept
    else:  # dropped from memory: index again (warm) and go on after `after`
        ix = svc.local_index(
            who_ctx, path=path, root=root, include_hidden=include_hidden, budget=budget
        )
        token = svc.remember_index(ix)
    return _index_page(svc, ix, token, after)


@define_tool(title="Index a local folder", annotations=READ_LOCAL)
async def local_index(
    ctx: Context[Any, Any],
    path: Annotated[
        str, Field(description='A folder: relative to the root, or absolute inside it ("" = root).')
    ] = "",
    cursor: Cursor = None,
    root: RootName = None,
    include_hidden: IncludeHidden = False,
) -> LocalIndexOut:
    """Every file and folder under a local folder, with size, mtime, SHA-256 and the drive's
    digest (cached: unchanged files are not read again).

    Symlinks, FIFOs and hard-linked files are listed as skipped and never opened. A cold
    index of a large tree may answer in_progress: call again with the same arguments.
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _local_index, who.state, svc, who.propose_context(), path, cursor, root, include_hidden
    )


# ---- sync_plan ------------------------------------------------------------------------


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
        "skipped_special | error (nothing is done for these). skipped_special: a special "
        "file (symlink, FIFO...) or a name placet cannot use (':', a leading '-', control "
        "characters, the reserved '.placet-tmp-' prefix, too long or too deep); detail "
        "says which. Rename it to sync it."
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
        kinds = ("upload", "upload_revision", "download", "mkdir", "conflict", "skip")
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


def _plan_page(svc: SyncService, plan_id: int, offset: int) -> SyncPlanOut:
    sp = svc.load_plan(plan_id)
    p = sp.plan
    conflicts = [r for r in p.reports if r.kind == "conflict"]
    mkdirs = [o for o in p.ops if o.kind == "mkdir"]
    files = [o for o in p.ops if o.kind != "mkdir"]
    others = [r for r in p.reports if r.kind not in ("conflict", "skip")]
    seq: list[PlanOp | PlanReport] = [*conflicts, *mkdirs, *files, *others]
    page = seq[offset : offset + PLAN_PAGE]
    more = offset + PLAN_PAGE < len(seq)
    policy = svc.settings.download_policy(Path(sp.pair.root_path))
    blocking = policy != "allow-overwrite"
    plain, kept = replacing_downloads(p, None)
    counts = dict(sp.summary)
    dv: list[str] = []
    if _folder_missing(sp.meta, sp.pair.remote_path):  # propose_sync creates it first
        counts["mkdir"] = counts.get("mkdir", 0) + 1
        if offset == 0:
            dv.append(FOLDER_ITSELF)
    cv: list[ConflictView] = []
    ov: list[PlanOpView] = []
    rv: list[ReportView] = []
    for x in page:
        if isinstance(x, PlanOp):
            if x.kind == "mkdir":
                dv.append(x.path)
            else:
                ov.append(PlanOpView.of(x, policy))
        elif x.kind == "conflict":
            cv.append(
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
            rv.append(
                ReportView(path=x.path, kind=x.kind, detail=x.detail, blocked_by=x.blocked_by)
            )
    return SyncPlanOut(
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
        conflicts=cv,
        dirs_to_create=dv,
        ops=ov,
        reports=rv,
        next_cursor=_enc("p1", [sp.id, offset + PLAN_PAGE]) if more else None,
    )


def _sync_plan(
    state: ServerState, svc: SyncService, who_ctx: Any, local_path: str, remote_path: str,
    allow_empty_side: bool, include_hidden: bool, root: str | None, cursor: str | None,
) -> SyncPlanOut:  # fmt: skip
    if cursor is not None:
        plan_id, offset = _dec("p1", cursor, "sync_plan")
        sp = svc.load_plan(int(plan_id))
        folder = svc.folder(who_ctx, local_path, root)
        if (str(folder.root.path), folder.rel) != (sp.pair.root_path, sp.pair.local_path):
            raise UsageError(
                "the cursor belongs to a plan of another folder; call sync_plan again with "
                "the same arguments, or without a cursor to restart paging",
                code="invalid_cursor",
            )
        return _plan_page(svc, sp.id, int(offset))
    sp = svc.plan_sync(
        who_ctx,
        local_path=local_path,
        remote_path=remote_path,
        root=root,
        include_hidden=include_hidden,
        allow_empty_side=allow_empty_side,
        budget=state.settings.long_read_seconds,
    )
    return _plan_page(svc, sp.id, 0)


@define_tool(title="Plan a sync of a local folder with a remote folder", annotations=READ_DRIVE)
async def sync_plan(
    ctx: Context[Any, Any],
    local_path: Annotated[
        str, Field(description='A local folder: relative to the root, or absolute ("" = root).')
    ],
    remote_path: Annotated[
        str, Field(description='A remote folder, relative to the drive ("" = top).')
    ],
    allow_empty_side: Annotated[
        bool,
        Field(
            description="Plan even if one side lists empty although the pair was synced "
            "before (else refused: a wrong path or unmounted disk is the likelier cause)."
        ),
    ] = False,
    include_hidden: IncludeHidden = False,
    root: RootName = None,
    cursor: Cursor = None,
) -> SyncPlanOut:
    """Compare a local folder with a remote folder and store the plan; changes nothing.

    Every path is classified: upload, upload_revision, download, mkdir, skip, or reported
    (conflict, deleted on one side, unverified...). Nothing is ever deleted. Conflicts
    need a decision in propose_sync. A cold plan of a large tree may answer in_progress:
    call again with the same arguments.
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _sync_plan, who.state, svc, who.propose_context(), local_path, remote_path,
        allow_empty_side, include_hidden, root, cursor,
    )  # fmt: skip


# ---- drive_changes --------------------------------------------------------------------


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
    changes: list[ChangeView] = Field(description=f"At most {CHANGES_PAGE} per page.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: done.")

    def summary(self) -> str:
        c = self.counts
        base = (
            f"{c['added']} added, {c['changed']} changed, {c['removed']} removed"
            if self.since
            else "anchor set; call again with since_anchor to see changes"
        )
        return inert(f"{self.path or '(drive root)'}: {base}")


def _drive_changes(
    state: ServerState, svc: SyncService, path: str, since_anchor: str | None,
    cursor: str | None,
) -> DriveChangesOut:  # fmt: skip
    folder = check_remote_path(path)
    offset = 0
    if cursor is not None:
        cs = ch.changes_page(svc.data, state.drive, folder, cursor)
        offset = ch.read_cursor(cursor)[2]
    else:
        cs = ch.drive_changes(
            svc.data, state.drive, folder, since_anchor, state.settings.plan_entry_cap
        )
    page = cs.changes[offset : offset + CHANGES_PAGE]
    more = offset + CHANGES_PAGE < len(cs.changes)
    counts = {k: sum(1 for c in cs.changes if c.change == k) for k in ch.CHANGE_KINDS}
    return DriveChangesOut(
        path=folder,
        anchor=cs.anchor,
        taken_at=cs.taken_at.isoformat(),
        since=cs.since.isoformat() if cs.since else None,
        entry_count=cs.entry_count,
        counts=counts,
        changes=[
            ChangeView(path=c.path, change=c.change, before=c.before, after=c.after) for c in page
        ],
        next_cursor=ch.make_cursor(cs.old_id, cs.new_id, offset + CHANGES_PAGE)
        if more and cs.old_id is not None
        else None,
    )


@define_tool(title="What changed under a remote folder", annotations=READ_DRIVE)
async def drive_changes(
    ctx: Context[Any, Any],
    path: Annotated[str, Field(description='A remote folder, relative to the drive ("" = top).')],
    since_anchor: Annotated[
        str | None,
        Field(description="The anchor a previous call returned; omit to only set an anchor."),
    ] = None,
    cursor: Cursor = None,
) -> DriveChangesOut:
    """Files and folders added, changed or removed under a remote folder since the anchor's
    listing, and a new anchor. Lists the folder once per call; there is no background
    polling. Changes nothing on the drive (placet stores the listing as the anchor).
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _drive_changes, who.state, svc, path, since_anchor, cursor
    )


# ---- propose_sync ---------------------------------------------------------------------


@define_tool(title="Propose applying a sync plan", annotations=PROPOSE)
async def propose_sync(
    ctx: Context[Any, Any],
    *,
    plan_id: Annotated[
        int, Field(ge=1, le=MAX_ID, description="The plan_id sync_plan returned (1 to 2^63-1).")
    ],
    decisions: Annotated[
        dict[str, Literal["keep_local", "keep_remote", "skip"]],
        Field(
            description="One decision per conflict of the plan, by its path: keep_local, "
            "keep_remote or skip (as the conflict's allowed_decisions say). Only conflicts."
        ),
    ] = {},  # noqa: B006 - read only, and the schema shows {} as the default
    reason: Annotated[
        str,
        Field(description="Why this sync is needed: one line, at most 200 characters."),
    ],
    ttl_minutes: Annotated[
        int | None,
        Field(ge=5, le=30, description="Minutes the proposal stays pending (5-30, default 30)."),
    ] = None,
) -> ProposeOut:
    """Propose applying a stored sync plan: all its ops plus one per decided conflict.
    Nothing is transferred now; the owner accepts or discards it.

    Refused (`plan_superseded`) once the plan is out of date: a newer plan of the same
    folders exists, or a proposal made from it already applied it; call sync_plan again.
    Refused as a whole if a conflict has no decision, a decision names a path that is not
    a conflict, or a decision is not allowed for that conflict; and (`refused`) if a
    download would replace a local file while the root's policy is downloads = new-only.
    Each op re-checks what the plan saw when it runs; a file changed since is reported
    stale and left alone.
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    await anyio.to_thread.run_sync(refuse_outdated_plan, svc, who.state.drive_spec, plan_id)
    await anyio.to_thread.run_sync(
        refuse_blocked_downloads, svc, who.propose_context(), plan_id, decisions
    )
    rec, created = await anyio.to_thread.run_sync(
        partial(
            _propose_sync, svc, who.propose_context(), plan_id=plan_id,
            decisions=decisions, reason=reason, ttl_minutes=ttl_minutes,
        )
    )  # fmt: skip
    return ProposeOut(proposal=ProposalView.of(rec, who.state.run_id), created=created)


TOOLS = (local_index, sync_plan, drive_changes, propose_sync)
__all__ = ["TOOLS", "refuse_outdated_plan", "service_of"]
