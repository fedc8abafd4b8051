"""`propose_upload`, `propose_mkdir`, `propose_download`: inert proposals, nothing else.

Each tool validates its arguments and captures the evidence through `placet.proposals.making`
(the same code the CLI uses) and stores one pending proposal. None of them writes to the
drive or to a local root; the owner accepts or discards in `placet review`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from pydantic import Field

from placet.proposals import making
from placet.server.framework import PROPOSE, WAITS_FOR_OWNER, define_tool
from placet.server.models import ProposalView, ProposeOut
from placet.server.standing import judged_by_rules
from placet.server.state import caller
from placet.store import ProposalRecord

Reason = Annotated[
    str,
    Field(
        description="Why this change is needed: one line of plain text, at most 200 "
        "characters. The owner reads it as your claim, below placet's own facts."
    ),
]
TtlMinutes = Annotated[
    int | None,
    Field(
        ge=5,
        le=30,
        description="Minutes the proposal stays pending before it expires (5-30, default "
        "30; the owner may extend it).",
    ),
]
RootName = Annotated[
    str | None,
    Field(description="Name of the local root (see roots_list); default: the first root."),
]


async def _propose(
    ctx: Context[Any, Any], make: Callable[..., tuple[ProposalRecord, bool]], **args: Any
) -> ProposeOut:
    """Call `make` (a `placet.proposals.making` function) with the caller's proposal
    context and the tool's `args` in a worker thread, then let the owner's standing
    rules judge the proposal; the tool's reply."""
    who = await caller(ctx)
    rec, created = await anyio.to_thread.run_sync(partial(make, who.propose_context(), **args))
    ruled = await judged_by_rules(who.state, rec)
    view = ProposalView.of(ruled.record, who.state.run_id)
    return ProposeOut.judged(view, created=created, rule=ruled.approved_by, note=ruled.note)


@define_tool(title="Propose an upload", annotations=PROPOSE, doc_tail=WAITS_FOR_OWNER)
async def propose_upload(
    ctx: Context[Any, Any],
    *,
    local_path: Annotated[
        str,
        Field(description="The local file: relative to the root, or absolute inside it."),
    ],
    remote_parent: Annotated[
        str,
        Field(description='Remote folder to upload into, relative to the drive ("" = top).'),
    ],
    name: Annotated[
        str | None,
        Field(description="Remote file name; default: the local file's name."),
    ] = None,
    replace_existing: Annotated[
        bool,
        Field(description="Allow replacing an existing remote file of that name."),
    ] = False,
    reason: Reason,
    ttl_minutes: TtlMinutes = None,
    root: RootName = None,
) -> ProposeOut:
    """Propose uploading one local file to the drive. Nothing is uploaded now.

    placet records the file's size, mtime and digests and the remote target's state, and
    queues the proposal for the owner.
    """
    return await _propose(
        ctx,
        making.propose_upload,
        local_path=local_path,
        remote_parent=remote_parent,
        name=name,
        replace_existing=replace_existing,
        reason=reason,
        ttl_minutes=ttl_minutes,
        root=root,
    )


@define_tool(title="Propose a remote folder", annotations=PROPOSE, doc_tail=WAITS_FOR_OWNER)
async def propose_mkdir(
    ctx: Context[Any, Any],
    *,
    remote_parent: Annotated[
        str,
        Field(description='Remote folder to create it in, relative to the drive ("" = top).'),
    ],
    name: Annotated[str, Field(description="Name of the new folder (one segment).")],
    reason: Reason,
    ttl_minutes: TtlMinutes = None,
) -> ProposeOut:
    """Propose creating one folder on the drive. Nothing is created now."""
    return await _propose(
        ctx,
        making.propose_mkdir,
        remote_parent=remote_parent,
        name=name,
        reason=reason,
        ttl_minutes=ttl_minutes,
    )


@define_tool(title="Propose a download", annotations=PROPOSE, doc_tail=WAITS_FOR_OWNER)
async def propose_download(
    ctx: Context[Any, Any],
    *,
    remote_path: Annotated[str, Field(description="The remote file, relative to the drive.")],
    local_path: Annotated[
        str,
        Field(
            description="Where to put it: relative to the root, or absolute inside it. "
            "Its folder must exist."
        ),
    ],
    overwrite: Annotated[
        bool,
        Field(
            description="Allow replacing an existing local file (only if the owner's "
            "policy for the root allows it; see roots_list)."
        ),
    ] = False,
    reason: Reason,
    ttl_minutes: TtlMinutes = None,
    root: RootName = None,
) -> ProposeOut:
    """Propose downloading one remote file into a local root. Nothing is downloaded now."""
    return await _propose(
        ctx,
        making.propose_download,
        remote_path=remote_path,
        local_path=local_path,
        overwrite=overwrite,
        reason=reason,
        ttl_minutes=ttl_minutes,
        root=root,
    )


TOOLS = (propose_upload, propose_mkdir, propose_download)
