"""What one `placet serve` process holds, and what a tool call may see.

`ServerState` is built once by `placet serve` (settings, store, drive, the owner's roots,
a random run id, the optional `--label`) and reaches every tool as the lifespan object.
The owner's `--root` list bounds the caller's scope; client roots only narrow it, by
pairwise intersection, and an empty or unanswered `roots/list` leaves the owner's list.
The answer is cached until `notifications/roots/list_changed`. The client's
self-reported name and version are capped and cleaned before anything stores or shows
them (`client_text`). A proposal is visible when its local path lies in the caller's
scope, or, without a local side (mkdir), when it was made against this server's drive
spec (docs/decisions/0013-scope-and-roots.md)."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import anyio
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning

from placet.paths.roots import Root, is_within
from placet.proposals.context import OwnerScope, ProposeContext
from placet.text import is_unsafe_char

if TYPE_CHECKING:
    from placet.store import ProposalRecord

log = logging.getLogger("placet.server")

CLIENT_ROOTS_TIMEOUT_S = 5.0
CLIENT_INFO_MAX = 200
"""Characters kept of a client's self-reported name and version (attribution only)."""


def client_text(value: str | None) -> str | None:
    """A client's self-reported name or version as placet stores it: unsafe characters
    (`placet.text.is_unsafe_char`: controls, bidi, format; not the backslash) replaced by
    U+FFFD, and cut to `CLIENT_INFO_MAX` characters ending in "…" when longer. The client
    sends these in `initialize` and they are otherwise unbounded (a 1 MB name was stored
    whole in every proposal row)."""
    if value is None:
        return None
    head = value[: CLIENT_INFO_MAX + 1]
    clean = "".join("\ufffd" if c != "\\" and is_unsafe_char(c) else c for c in head)
    return clean if len(clean) <= CLIENT_INFO_MAX else clean[: CLIENT_INFO_MAX - 1] + "…"


@dataclass
class ClientRoots:
    """The client's answer to `roots/list`, cached per session until it says it changed."""

    session: object | None = None
    paths: tuple[Path, ...] | None = None
    dirty: bool = True
    warned: bool = False

    def invalidate(self) -> None:
        self.dirty = True


@dataclass(frozen=True)
class ServerState(OwnerScope):
    """The lifespan object of `placet serve`: shared, long-lived, one per process."""

    label: str | None = None
    client_roots: ClientRoots = field(default_factory=ClientRoots)

    def propose_context(
        self,
        *,
        client_name: str | None = None,
        client_version: str | None = None,
        allowed: tuple[Path, ...] | None = None,
    ) -> ProposeContext:
        return ProposeContext(
            **self.owner_fields(),
            client_name=client_name,
            client_version=client_version,
            label=self.label,
            allowed=allowed,
        )


@dataclass(frozen=True)
class Caller:
    """One tool call's view: who is calling (self-reported) and which folders it may use."""

    state: ServerState
    client_name: str | None
    client_version: str | None
    client_roots: tuple[Path, ...] | None
    allowed: tuple[Path, ...] | None

    def propose_context(self) -> ProposeContext:
        return self.state.propose_context(
            client_name=self.client_name,
            client_version=self.client_version,
            allowed=self.allowed,
        )

    def local_target(self, record: ProposalRecord) -> Path | None:
        """The absolute local path a proposal touches, or None (mkdir)."""
        req = record.request
        root = req.get("root")
        if not isinstance(root, dict) or not isinstance(root.get("path"), str):
            return None
        rel = req.get("local_path", "")
        rel = rel if isinstance(rel, str) else ""
        return Path(root["path"]).joinpath(*[p for p in rel.split("/") if p not in ("", ".")])

    def can_see(self, record: ProposalRecord) -> bool:
        target = self.local_target(record)
        if target is None:
            return record.drive_spec == self.state.drive_spec
        bounds = (
            self.allowed if self.allowed is not None else tuple(r.path for r in self.state.roots)
        )
        return any(is_within(target, b) for b in bounds)


def intersect(roots: tuple[Root, ...], client: tuple[Path, ...]) -> tuple[Path, ...]:
    """The folders both the owner's roots and the client's roots cover (deduplicated)."""
    out: list[Path] = []
    for r in roots:
        for c in client:
            if is_within(c, r.path):
                hit = c
            elif is_within(r.path, c):
                hit = r.path
            else:
                continue
            if hit not in out:
                out.append(hit)
    return tuple(out)


def _root_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = unquote(parsed.path)
    if not path.startswith("/") or "\x00" in path:
        return None
    return Path(os.path.realpath(path))


def state_of(ctx: Context[Any, Any]) -> ServerState:
    state = ctx.request_context.lifespan_context
    if not isinstance(state, ServerState):  # pragma: no cover - a wiring bug
        raise TypeError("placet tools need the ServerState lifespan")
    return state


async def _fetch_client_roots(
    ctx: Context[Any, Any], cache: ClientRoots
) -> tuple[Path, ...] | None:
    session = ctx.session
    if cache.session is session and not cache.dirty:
        return cache.paths
    caps = ctx.client_capabilities
    paths: tuple[Path, ...] | None = None
    if caps is not None and caps.roots is not None:
        try:
            with anyio.fail_after(CLIENT_ROOTS_TIMEOUT_S), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                result = await session.list_roots()
        except Exception as e:  # no back-channel, client error, timeout: owner roots rule
            if not cache.warned:
                log.info("client roots unavailable (%s); using the --root list", type(e).__name__)
                cache.warned = True
        else:
            # An empty list offers no roots: the owner's list applies, as for a client
            # without the capability (docs/decisions/0013-scope-and-roots.md).
            if result.roots:
                found = (_root_path(str(r.uri)) for r in result.roots)
                paths = tuple(p for p in found if p is not None)
    cache.session, cache.paths, cache.dirty = session, paths, False
    return paths


async def caller(ctx: Context[Any, Any]) -> Caller:
    """Who is calling and which local folders this call may use."""
    state = state_of(ctx)
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    client_roots = await _fetch_client_roots(ctx, state.client_roots)
    allowed = intersect(state.roots, client_roots) if client_roots is not None else None
    return Caller(
        state=state,
        client_name=client_text(info.name) if info is not None else None,
        client_version=client_text(info.version) if info is not None else None,
        client_roots=client_roots,
        allowed=allowed,
    )
