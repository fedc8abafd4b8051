"""Proposals made straight through the store, for tests of the store and of what reads it
(no schema models, no drive, no root)."""

from __future__ import annotations

from typing import Any

from placet.store import ProposalRecord, Store

ABSENT_REMOTE: dict[str, Any] = {
    "exists": False,
    "is_dir": False,
    "size": None,
    "mtime": None,
    "digest_type": None,
    "digest": None,
}
"""A remote path that does not exist, as its evidence is stored and sent."""


def propose_folder(
    store: Store,
    name: str,
    *,
    parent: str = "",
    reason: str = "make a folder",
    drive_spec: str = "local:/tmp/x",
    run_id: str = "run-a",
    ttl: int | None = None,
    evidence: dict[str, Any] | None = None,
    **kw: Any,
) -> tuple[ProposalRecord, bool]:
    """A mkdir proposal of `parent/name` (evidence: the remote path is absent): (the
    record, whether it was created). `ttl` in seconds (or `ttl_seconds` in `kw`); `kw`
    goes to `Store.create_proposal` (`now`, `client_name`, `label`...)."""
    if ttl is not None:
        kw["ttl_seconds"] = ttl
    return store.create_proposal(
        kind="mkdir",
        request={"kind": "mkdir", "remote_parent": parent, "name": name},
        evidence={"remote": {"exists": False}} if evidence is None else evidence,
        reason=reason,
        drive_spec=drive_spec,
        run_id=run_id,
        **kw,
    )
