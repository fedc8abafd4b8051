"""`propose_upload`, `propose_mkdir`, `propose_download`: inert proposals, nothing else.

Each tool validates its arguments and captures the evidence through `placet.proposals.making`
(the same code the CLI uses) and stores one pending proposal. None of them writes to the
drive or to a local root; the owner accepts or discards in `placet review`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from pydantic import Field

from placet.proposals import making
from placet.server.framework import PROPOSE, WAITS_FOR_OWNER, ToolDef, ToolFn, define_tool
from placet.server.models import ProposalView, ProposeOut
from placet.server.standing import judged_by_rules
from placet.server.state import caller
from placet.server.tools.params import RootName
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


def _propose_tool(
    title: str, make: Callable[..., tuple[ProposalRecord, bool]]
) -> Callable[[ToolFn], ToolDef]:
    """A propose tool (`PROPOSE`, waits for the owner), whose declaration (parameters,
    docstring) is its schema: the caller's proposal context and the tool's arguments, by
    name, go to `make` (a `placet.proposals.making` function) in a worker thread, then the
    owner's standing rules judge the proposal; the tool's reply. The declared function
    itself has no body and never runs."""
    define = define_tool(title=title, annotations=PROPOSE, doc_tail=WAITS_FOR_OWNER)

    def wrap(fn: ToolFn) -> ToolDef:
        @functools.wraps(fn)
        async def tool(ctx: Context[Any, Any], **args: Any) -> ProposeOut:
            who = await caller(ctx)
            made = partial(make, who.propose_context(), **args)
            rec, created = await anyio.to_thread.run_sync(made)
            ruled = await judged_by_rules(who.state, rec)
            view = ProposalView.of(ruled.record, who.state.run_id)
            return ProposeOut.judged(view, created=created, rule=ruled.approved_by, note=ruled.note)

        return define(tool)

    return wrap


@_propose_tool("Propose an upload", making.propose_upload)
async def propose_upload(  # type: ignore[empty-body]  # `_propose_tool` serves it
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


@_propose_tool("Propose a remote folder", making.propose_mkdir)
async def propose_mkdir(  # type: ignore[empty-body]  # `_propose_tool` serves it
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


@_propose_tool("Propose a download", making.propose_download)
async def propose_download(  # type: ignore[empty-body]  # `_propose_tool` serves it
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


TOOLS = (propose_upload, propose_mkdir, propose_download)
