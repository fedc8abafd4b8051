"""Who is proposing and within what: the proposal context, its TTL, its local scope.

Every proposal is made within a `ProposeContext` (the owner's settings, store, drive and
roots, plus the caller's attribution and, for an MCP client that sent roots, the folders
it may name). This module decides the checks that depend on that scope rather than on
the target's state: the TTL against the owner's range (docs/design.md section 9, "TTL"), and
a local path resolved inside a root with no symlink on the way (`placet.paths.local`) and,
when the client sent roots, inside one of them too (they only ever narrow, never widen
what the owner nominated). It also holds the single call that stores a proposal, so
every kind is stored with the same attribution. Used by `placet.proposals.making` and
`placet.proposals.evidence`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from placet.errors import PathRefused, UsageError
from placet.paths.local import resolve_local
from placet.paths.roots import Root, is_within
from placet.text import quote

if TYPE_CHECKING:
    from collections.abc import Sequence

    from placet.config import Settings
    from placet.drive.base import Drive
    from placet.store import ProposalRecord, Store
    from placet.store.previews import StoredPreview

__all__ = [
    "OwnerScope",
    "ProposeContext",
    "resolve_in_client_roots",
    "store_proposal",
    "ttl_seconds",
]


@dataclass(frozen=True)
class OwnerScope:
    """What the owner set up for one `placet serve` process (or CLI command): settings,
    store, drive (and its spec), the nominated roots, and the run id its proposals carry
    (attribution only: it grants nothing)."""

    settings: Settings
    store: Store
    drive: Drive
    roots: tuple[Root, ...]
    run_id: str
    drive_spec: str

    def owner_fields(self) -> dict[str, Any]:
        """The `OwnerScope` fields by name (to build a `ProposeContext` from a subclass)."""
        return {f.name: getattr(self, f.name) for f in fields(OwnerScope)}


@dataclass(frozen=True)
class ProposeContext(OwnerScope):
    """Everything a proposal needs besides the agent's arguments: the owner's scope plus
    the caller's attribution.

    `client_name`, `client_version` and `label` are attribution only: they are stored
    and shown, and grant nothing. `allowed`, when not None, is the set of absolute
    folders a local path must also lie in (the MCP client's roots intersected with the
    owner's; an empty tuple allows nothing).
    """

    client_name: str | None = None
    client_version: str | None = None
    label: str | None = None
    allowed: tuple[Path, ...] | None = None


def ttl_seconds(settings: Settings, ttl_minutes: int | None) -> int:
    """The TTL in seconds for a request asking `ttl_minutes` (None: the owner's default).

    Raises:
        UsageError: outside the owner's range (`min_ttl_minutes`..`max_ttl_minutes`,
            5..30 by default).
    """
    if ttl_minutes is None:
        return settings.default_ttl_minutes * 60
    lo, hi = settings.min_ttl_minutes, settings.max_ttl_minutes
    if isinstance(ttl_minutes, bool) or not lo <= ttl_minutes <= hi:
        raise UsageError(
            f"ttl_minutes={ttl_minutes} is outside the allowed range {lo}..{hi}; "
            f"ask for {lo} to {hi} minutes, or leave it out for the default "
            f"({settings.default_ttl_minutes})",
            details={"field": "ttl_minutes", "min": lo, "max": hi},
        )
    return ttl_minutes * 60


def resolve_in_client_roots(
    ctx: ProposeContext, local_path: str, root_name: str | None, *, must_exist: bool
) -> tuple[Root, PurePosixPath]:
    root, rel = resolve_local(ctx.roots, local_path, root_name or None, must_exist=must_exist)
    if not rel.parts:
        raise PathRefused(
            f"refusing path {quote(local_path)}: it names the root {root.name} itself; "
            "name a file inside it",
            code="not_regular_file",
            details={"path": local_path, "root": root.name},
        )
    if ctx.allowed is not None:
        target = root.path.joinpath(*rel.parts)
        if not any(is_within(target, a) for a in ctx.allowed):
            shown = ", ".join(quote(str(a)) for a in ctx.allowed) or "none overlap placet's roots"
            raise PathRefused(
                f"refusing path {quote(local_path)}: it lies outside the roots your MCP client "
                f"declared ({shown}); name a path inside them",
                code="path_outside_root",
                details={"path": local_path, "client_roots": [str(a) for a in ctx.allowed]},
            )
    return root, rel


def store_proposal(
    ctx: ProposeContext,
    kind: str,
    request: dict[str, Any],
    evidence: dict[str, Any],
    reason: str,
    ttl: int,
    previews: Sequence[StoredPreview] = (),
) -> tuple[ProposalRecord, bool]:
    """Store one pending proposal of `kind` with the context's attribution (run id,
    client, label) and drive, and its content `previews`; `ttl` in seconds. Returns
    (record, created): created is False when an identical pending proposal already
    existed (`Store.create_proposal`)."""
    return ctx.store.create_proposal(
        kind=kind,
        request=request,
        evidence=evidence,
        reason=reason,
        drive_spec=ctx.drive_spec,
        run_id=ctx.run_id,
        client_name=ctx.client_name,
        client_version=ctx.client_version,
        label=ctx.label,
        ttl_seconds=ttl,
        previews=previews,
    )
