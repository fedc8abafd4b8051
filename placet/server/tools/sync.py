"""`local_index`, `sync_plan`, `sync_plan_ops`, `drive_changes`, `propose_sync`: sync
over MCP.

Thin over `placet.sync`: the service indexes, lists, plans and stores
(`placet.sync.service`), `placet.sync.changes` answers what changed on the drive, and
`placet.sync.propose` turns a stored plan into one inert proposal (and refuses one that
is out of date). This module decides how a call reaches the core: one `SyncService` per
server (its caches and long reads live there), the checks that a cursor belongs to the
arguments it comes back with, and the long-read budget (`settings.long_read_seconds`,
about 45 s): a cold index or plan that is not done by then answers the retryable
`in_progress` with a progress figure and goes on in this server process; the same call
again returns the result. What a reply holds (a summary by default, items listed only
when asked), its result models and cursors, is `placet.server.tools.sync_pages` and, for
a plan, `placet.server.tools.plan_pages`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import partial
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import Field

from placet.errors import UsageError
from placet.paths.remote import check_remote_path
from placet.server.framework import (
    MAX_ID,
    PROPOSE,
    READ_DRIVE,
    READ_LOCAL,
    WAITS_FOR_OWNER,
    define_tool,
)
from placet.server.models import ProposeOut
from placet.server.standing import judged_by_rules
from placet.server.state import ServerState, caller
from placet.server.sync_proposals import proposal_view
from placet.server.tools.params import Cursor, RootName
from placet.server.tools.plan_pages import (
    ItemKind,
    SyncPlanOpsOut,
    SyncPlanOut,
    clean_folder,
    plan_items_page,
    plan_summary,
)
from placet.server.tools.sync_pages import (
    ChangesKind,
    DriveChangesOut,
    IndexKind,
    LocalIndexOut,
    changes_page,
    decode_cursor,
    index_page,
)
from placet.sync import changes as ch
from placet.sync.download_policy import refuse_blocked_downloads
from placet.sync.propose import plan_in_scope, refuse_outdated_plan
from placet.sync.propose import propose_sync as _propose_sync
from placet.sync.service import SyncService

_services: dict[int, tuple[ServerState, SyncService]] = {}
_services_lock = threading.Lock()
_change_sets: OrderedDict[tuple[str, str, int, int], ch.ChangeSet] = OrderedDict()
"""The last 4 change sets paged, by (drive spec, folder, old and new snapshot ids): the
two snapshots never change, so their pages need not load and diff them again."""


def service_of(state: ServerState) -> SyncService:
    """The one `SyncService` of this server (its caches and long reads live there)."""
    with _services_lock:
        got = _services.get(id(state))
        if got is None or got[0] is not state:
            got = _services[id(state)] = (state, SyncService(state.store, state.settings))
        return got[1]


IncludeHidden = Annotated[
    bool, Field(description='Also include names starting with "." (left out by default).')
]
RemoteFolder = Annotated[
    str, Field(description='A remote folder, relative to the drive ("" = top).')
]
PlanId = Annotated[
    int, Field(ge=1, le=MAX_ID, description="The plan_id sync_plan returned (1 to 2^63-1).")
]


# ---- local_index ----------------------------------------------------------------------


def _local_index(
    state: ServerState, svc: SyncService, who_ctx: Any, path: str, entries: str | None,
    cursor: str | None, root: str | None, include_hidden: bool,
) -> LocalIndexOut:  # fmt: skip
    budget = state.settings.long_read_seconds
    reply = state.settings.reply_budget_bytes
    if cursor is None:
        ix = svc.local_index(
            who_ctx, path=path, root=root, include_hidden=include_hidden, budget=budget
        )
        return index_page(ix, svc.remember_index(ix), entries, None, reply)
    got = decode_cursor("i2", cursor, "local_index")
    folder = svc.folder(who_ctx, path, root)
    here = [str(folder.root.path), folder.rel, include_hidden]
    if (
        not isinstance(got, list)
        or len(got) != 6
        or got[1:4] != here
        or got[4] not in ("all", "file", "dir", "skipped", "error")
        or entries not in (None, got[4])
    ):
        raise UsageError(
            "the cursor belongs to another folder, include_hidden or entries kind; call "
            "local_index again with the same arguments, or without a cursor to restart paging",
            code="invalid_cursor",
        )
    token, entries, after = str(got[0]), str(got[4]), got[5]
    kept = svc.recall_index(token)
    if kept is not None:
        ix = kept
    else:  # dropped from memory: index again (warm) and go on after `after`
        ix = svc.local_index(
            who_ctx, path=path, root=root, include_hidden=include_hidden, budget=budget
        )
        token = svc.remember_index(ix)
    return index_page(ix, token, entries, after, reply)


@define_tool(title="Index a local folder", annotations=READ_LOCAL)
async def local_index(
    ctx: Context[Any, Any],
    path: Annotated[
        str, Field(description='A folder: relative to the root, or absolute inside it ("" = root).')
    ] = "",
    entries: Annotated[
        IndexKind | None,
        Field(
            description="List the entries of this kind (all: every one), paged; omit for "
            "the summary only."
        ),
    ] = None,
    cursor: Cursor = None,
    root: RootName = None,
    include_hidden: IncludeHidden = False,
) -> LocalIndexOut:
    """Index a local folder: every file with size, mtime, SHA-256 and the drive's digest
    (cached: unchanged files are not read again). Answers a summary: entries and bytes
    by kind and the first few of each kind. Only if you need every entry: call again with
    the same arguments and cursor=next_cursor (or entries=<kind>: all, file, dir,
    skipped, error), page after page until next_cursor is null. sync_plan does not need
    this index.

    Symlinks, FIFOs and hard-linked files are listed as skipped and never opened. A cold
    index of a large tree may answer in_progress: call again with the same arguments.
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _local_index, who.state, svc, who.propose_context(), path, entries, cursor, root,
        include_hidden,
    )  # fmt: skip


# ---- sync_plan ------------------------------------------------------------------------


def _sync_plan(
    state: ServerState, svc: SyncService, who_ctx: Any, local_path: str, remote_path: str,
    allow_empty_side: bool, include_hidden: bool, root: str | None,
) -> SyncPlanOut:  # fmt: skip
    sp = svc.plan_sync(
        who_ctx,
        local_path=local_path,
        remote_path=remote_path,
        root=root,
        include_hidden=include_hidden,
        allow_empty_side=allow_empty_side,
        budget=state.settings.long_read_seconds,
    )
    return plan_summary(svc, sp.id, state.settings.reply_budget_bytes)


@define_tool(title="Plan a sync of a local folder with a remote folder", annotations=READ_DRIVE)
async def sync_plan(
    ctx: Context[Any, Any],
    local_path: Annotated[
        str, Field(description='A local folder: relative to the root, or absolute ("" = root).')
    ],
    remote_path: RemoteFolder,
    allow_empty_side: Annotated[
        bool,
        Field(
            description="Plan even if one side lists empty although the pair was synced "
            "before (else refused: a wrong path or unmounted disk is the likelier cause)."
        ),
    ] = False,
    include_hidden: IncludeHidden = False,
    root: RootName = None,
) -> SyncPlanOut:
    """Compare a local folder with a remote folder and store the plan; changes nothing.

    Every path is classified: upload, upload_revision, download, mkdir, skip, or reported
    (conflict, deleted on one side, unverified...). Nothing is ever deleted. The answer is
    a summary, whatever the plan's size: counts and bytes by kind, every conflict, a few
    examples of each other kind, and next_step. To propose the sync, propose_sync needs
    only the plan_id and one decision per conflict: do not list the ops for that. Call
    sync_plan_ops(plan_id, kind, folder) only to look at ops. A cold plan of a large tree
    may answer in_progress: call again with the same arguments.
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _sync_plan, who.state, svc, who.propose_context(), local_path, remote_path,
        allow_empty_side, include_hidden, root,
    )  # fmt: skip


# ---- sync_plan_ops --------------------------------------------------------------------


def _sync_plan_ops(
    state: ServerState, svc: SyncService, who_ctx: Any, plan_id: int, kind: str | None,
    folder: str | None, cursor: str | None,
) -> SyncPlanOpsOut:  # fmt: skip
    sp, _ = plan_in_scope(svc, who_ctx, plan_id, "list the ops of")
    return plan_items_page(
        svc, sp, kind, clean_folder(folder), cursor, state.settings.reply_budget_bytes
    )


@define_tool(title="List a sync plan's ops by kind or folder", annotations=READ_LOCAL)
async def sync_plan_ops(
    ctx: Context[Any, Any],
    plan_id: PlanId,
    kind: Annotated[
        ItemKind | None,
        Field(description="Only items of this op or report kind; omit for every kind."),
    ] = None,
    folder: Annotated[
        str | None,
        Field(
            description="Only paths in this folder (relative to the synced folders), at any depth."
        ),
    ] = None,
    cursor: Cursor = None,
) -> SyncPlanOpsOut:
    """The ops and reports of a stored sync plan, paged, in a compact form: conflicts,
    folders to create, file ops, then the other reports (skip paths are only counted).
    Not needed to propose: propose_sync takes the plan_id and the conflicts' decisions.
    Pages fit one reply (up to 200 items): for more, call again with the same arguments
    and the next_cursor of the previous page.
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _sync_plan_ops, who.state, svc, who.propose_context(), plan_id, kind, folder, cursor
    )


# ---- drive_changes --------------------------------------------------------------------


def _drive_changes(
    state: ServerState, svc: SyncService, path: str, since_anchor: str | None,
    listed: str | None, cursor: str | None,
) -> DriveChangesOut:  # fmt: skip
    folder = check_remote_path(path)
    offset = 0
    if cursor is not None:
        old_id, new_id, offset, kind = ch.read_cursor(cursor)
        if listed not in (None, kind) or kind not in ("all", *ch.CHANGE_KINDS):
            raise UsageError(
                "the cursor lists another kind of change; call drive_changes again with "
                "the same changes argument, or without a cursor to restart paging",
                code="invalid_cursor",
            )
        key = (state.drive.spec, folder, old_id, new_id)
        with _services_lock:
            kept = _change_sets.get(key)
        cs = kept or ch.changes_page(svc.data, state.drive, folder, cursor)
        listed = kind
    else:
        cs = ch.drive_changes(
            svc.data, state.drive, folder, since_anchor, state.settings.plan_entry_cap
        )
    if cs.old_id is not None:  # its next pages come from memory, not two snapshots again
        with _services_lock:
            _change_sets[(state.drive.spec, folder, cs.old_id, cs.new_id)] = cs
            while len(_change_sets) > 4:
                _change_sets.popitem(last=False)
    chosen = [c for c in cs.changes if listed in (None, "all", c.change)]
    out = DriveChangesOut(
        path=folder,
        anchor=cs.anchor,
        taken_at=cs.taken_at.isoformat(),
        since=cs.since.isoformat() if cs.since else None,
        entry_count=cs.entry_count,
        counts={k: sum(1 for c in cs.changes if c.change == k) for k in ch.CHANGE_KINDS},
        examples={},
        listed=listed,
        changes=[],
        next_cursor=ch.make_cursor(cs.new_id, cs.new_id, len(chosen), listed or "all"),
    )
    n = changes_page(out, chosen, offset, state.settings.reply_budget_bytes)
    more = offset + n < len(chosen) and (n > 0 or listed is None)
    out.next_cursor = (  # the summary's lists every change, from the first
        ch.make_cursor(cs.old_id, cs.new_id, offset + n, listed or "all")
        if more and cs.old_id is not None
        else None
    )
    return out


@define_tool(title="What changed under a remote folder", annotations=READ_DRIVE)
async def drive_changes(
    ctx: Context[Any, Any],
    path: RemoteFolder,
    since_anchor: Annotated[
        str | None,
        Field(description="The anchor a previous call returned; omit to only set an anchor."),
    ] = None,
    changes: Annotated[
        ChangesKind | None,
        Field(
            description="List the changes of this kind (all: every one), paged; omit for "
            "the summary only."
        ),
    ] = None,
    cursor: Cursor = None,
) -> DriveChangesOut:
    """Files and folders added, changed or removed under a remote folder since the anchor's
    listing, and a new anchor. Lists the folder once per call; there is no background
    polling. Changes nothing on the drive (placet stores the listing as the anchor).
    Answers a summary: the counts and the first few changes of each kind. To list every
    change, call again with the same path and cursor=next_cursor, page after page until
    next_cursor is null (or with the same since_anchor and changes=<kind> for one kind).
    """
    who = await caller(ctx)
    svc = service_of(who.state)
    return await anyio.to_thread.run_sync(
        _drive_changes, who.state, svc, path, since_anchor, changes, cursor
    )


# ---- propose_sync ---------------------------------------------------------------------


@define_tool(title="Propose applying a sync plan", annotations=PROPOSE, doc_tail=WAITS_FOR_OWNER)
async def propose_sync(
    ctx: Context[Any, Any],
    *,
    plan_id: PlanId,
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
    stale and left alone. The reply shows the proposal in brief (`proposal.sync`), which
    is all you need; proposal_ops(id) lists its ops only if you want to check some.
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
    ruled = await judged_by_rules(who.state, rec)
    view = await anyio.to_thread.run_sync(
        proposal_view, who.state.store, ruled.record, who.state.run_id
    )
    return ProposeOut.judged(view, created=created, rule=ruled.approved_by, note=ruled.note)


TOOLS = (local_index, sync_plan, sync_plan_ops, drive_changes, propose_sync)
__all__ = [
    "TOOLS",
    "drive_changes",
    "local_index",
    "propose_sync",
    "service_of",
    "sync_plan",
    "sync_plan_ops",
]
