"""`propose_sync`: turn a stored plan plus the agent's conflict decisions into one inert
sync proposal (docs/design.md sections 4, 5, 7).

The proposal holds the plan's full op set, stored by reference
(docs/decisions/0023-ops-by-reference.md): every op the plan made and one per decided
conflict, each with the evidence the plan saw. It is refused whole when a conflict is
undecided or a decision is not one the conflict allows. The plan is bound to where it
was made (drive spec, root identity, the caller's scope) and proposed only while current:
`refuse_outdated_plan` refuses one overtaken by a newer plan of the same pair or by an
applied, approved or executing proposal made from it, or past `RETENTION`
(docs/decisions/0024-sync-plans.md). Nothing here touches the drive or a local file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placet.errors import (
    Expired,
    LimitExceeded,
    PathRefused,
    PolicyRefused,
    StaleEvidence,
    UsageError,
)
from placet.proposals.context import ProposeContext, store_proposal, ttl_seconds
from placet.schema import SyncRequest
from placet.store.db import utcnow
from placet.sync.ops import check_decisions, mkdir_op_dict, request_op_dicts
from placet.sync.tables import RETENTION
from placet.text import inert, one_line_reason

if TYPE_CHECKING:
    from placet.store import ProposalRecord
    from placet.sync.service import Folder, SyncService
    from placet.sync.tables import StoredPlan


def _with_folder_mkdir(ops: list[dict[str, Any]], folder: str) -> list[dict[str, Any]]:
    """Prepend the creation of the synced remote folder itself (it was missing)."""
    first = mkdir_op_dict(0, folder, "the synced remote folder does not exist yet")
    return [first, *({**op, "index": op["index"] + 1} for op in ops)]


def sync_ops(stored: StoredPlan, decisions: Mapping[str, str]) -> list[dict[str, Any]]:
    """The executor's ops for `stored` with `decisions`, as stored (JSON objects of
    `placet.schema.Op`; see `placet.sync.ops.request_op_dicts`).

    Raises:
        UsageError: `undecided_conflict`, `decision_not_conflict`, `decision_not_allowed`.
    """
    ops = request_op_dicts(
        stored.plan,
        decisions,
        local_prefix=stored.pair.local_path,
        remote_prefix=stored.pair.remote_path,
    )
    for op in ops:
        _refuse_unbound(stored, op)
    # A missing remote folder is created even when nothing goes into it (an empty local
    # folder): sync_plan counts this mkdir, so the plan and the proposal agree.
    if stored.meta.get("remote_folder_missing") and stored.pair.remote_path:
        ops = _with_folder_mkdir(ops, stored.pair.remote_path)
    return ops


def _refuse_unbound(stored: StoredPlan, op: Mapping[str, Any]) -> None:
    """Refuse an op that would read or replace a remote file known by size and mtime
    alone (no digest, not read by the plan: a plan stored before placet bound sync
    transfers to content, `placet.sync.content`); never proposed as verified.

    Raises:
        LimitExceeded (code ``remote_unverifiable``).
    """
    ev = op.get("expected_remote") or {}
    if op["kind"] == "mkdir" or not ev.get("exists") or ev.get("is_dir") or ev.get("digest"):
        return
    path = op["remote_path"]
    raise LimitExceeded(
        f"refusing to propose sync plan {stored.id}: its op on remote {inert(path)!r} is "
        "known by size and mtime alone (the remote gives no digest, and the plan did not "
        "read the file to bind it to its content); call sync_plan again and propose the "
        "new plan",
        code="remote_unverifiable",
        details={"plan_id": stored.id, "remote_path": path},
    )


def plan_in_scope(
    service: SyncService, ctx: ProposeContext, plan_id: int, doing: str
) -> tuple[StoredPlan, Folder]:
    """Stored plan `plan_id` and its local folder, when the plan is bound to where the
    caller is (module docstring): this server's drive, one of its roots, a folder inside
    the caller's scope. `doing` names the refused action in messages ("propose").

    Raises:
        NotFound: no such plan (or pruned after 7 days).
        PolicyRefused (`drive_changed`): the plan was made against another drive.
        PathRefused: the plan's root is not one of this server's roots, or its folder is
            no longer usable or outside the caller's scope.
    """
    stored = service.load_plan(plan_id)
    pair = stored.pair
    if pair.drive_spec != ctx.drive_spec:
        raise PolicyRefused(
            f"refusing to {doing} sync plan {plan_id}: it was made against another drive "
            "than the one this placet uses; call sync_plan again",
            code="drive_changed",
            details={"plan_id": plan_id},
        )
    root = next((r for r in ctx.roots if str(r.path) == pair.root_path), None)
    if root is None:
        raise PathRefused(
            f"refusing to {doing} sync plan {plan_id}: its local root "
            f"{inert(pair.root_path)!r} is not one of this placet's roots; plan again here",
            code="root_unknown",
            details={"plan_id": plan_id},
        )
    return stored, service.folder(ctx, pair.local_path, root.name)


def propose_sync(
    service: SyncService,
    ctx: ProposeContext,
    *,
    plan_id: int,
    decisions: Mapping[str, str],
    reason: str,
    ttl_minutes: int | None = None,
) -> tuple[ProposalRecord, bool]:
    """Propose applying stored plan `plan_id` with `decisions` for its conflicts.

    Returns:
        (the pending proposal, True), or (an identical pending one, False).

    Raises:
        UsageError: reason or TTL refused; a decision refused (codes above); the plan
            has nothing to do (`nothing_to_do`).
        NotFound: no such plan (or pruned after 7 days).
        PolicyRefused (`drive_changed`): the plan was made against another drive.
        PathRefused: the plan's root is not one of this server's roots, or its folder is
            no longer usable or outside the caller's scope.
        LimitExceeded: the pending caps are reached.
    """
    why = one_line_reason(reason)
    ttl = ttl_seconds(ctx.settings, ttl_minutes)
    stored, folder = plan_in_scope(service, ctx, plan_id, "propose")
    pair = stored.pair
    ops = sync_ops(stored, decisions)
    skips = service.data.plan_skips(plan_id)
    if not ops and not skips:
        raise UsageError(
            f"sync plan {plan_id} has nothing to do: every path is already the same on both "
            "sides (or only reported); there is nothing to propose",
            code="nothing_to_do",
            details={"plan_id": plan_id, "summary": stored.summary},
        )
    decided = check_decisions(stored.plan, decisions)  # NFC keys, as the plan names paths
    request = SyncRequest(
        plan_id=plan_id,
        root=folder.root.to_ref(),
        local_path=folder.rel,
        remote_path=pair.remote_path,
        decisions=decided,
        ops=[],
    ).model_dump(mode="json")
    request["ops"] = ops  # already JSON; stored by reference (`Store.create_proposal`)
    evidence: dict[str, Any] = {
        "plan": {
            "id": plan_id,
            "created_at": stored.created_at.isoformat(),
            "local_fingerprint": stored.local_fingerprint,
            "remote_fingerprint": stored.remote_fingerprint,
            "baseline_generation": stored.baseline_generation,
            "summary": stored.summary,
            "digest_type": stored.meta.get("digest_type"),
        },
        "verified_skips": len(skips),
    }
    return store_proposal(ctx, "sync", request, evidence, why, ttl)


def refuse_outdated_plan(svc: SyncService, drive_spec: str, plan_id: int) -> None:
    """Refuse proposing plan `plan_id` once it is out of date
    (docs/decisions/0024-sync-plans.md); `propose_sync` answers for a plan that does not
    exist or was made against another drive.

    Raises:
        StaleEvidence (`plan_superseded`): a newer plan of the same pair (root, local
            folder, drive, remote folder) exists, or a proposal made from this plan
            succeeded or is approved or executing; details name them.
        Expired: the plan is older than `RETENTION` (7 days) but not pruned yet.
    """
    st = svc.data.plan_standing(plan_id)
    if st is None or st.drive_spec != drive_spec:
        return  # propose_sync answers not_found / drive_changed
    if utcnow() >= st.created_at + RETENTION:
        raise Expired(
            f"refusing to propose sync plan {plan_id}: it is older than the "
            f"{RETENTION.days} days plans are kept; call sync_plan again and propose the "
            "new plan",
            details={"plan_id": plan_id, "created_at": st.created_at.isoformat()},
        )
    why: list[str] = []
    if st.proposal_id is not None:
        done = {"succeeded": "already applied it", "approved": "is approved, to apply it",
                "executing": "is applying it now"}[st.proposal_status or ""]  # fmt: skip
        why.append(f"proposal #{st.proposal_id} made from it {done}")
    if st.newer_plan_id is not None:
        why.append(f"plan {st.newer_plan_id} of the same folders is newer")
    if why:
        applying = st.proposal_status in ("approved", "executing")
        wait = "wait for it to finish, then " if applying else ""
        raise StaleEvidence(
            f"refusing to propose sync plan {plan_id}: it is out of date ({'; '.join(why)}); "
            f"{wait}call sync_plan again and propose the new plan",
            code="plan_superseded",
            details={"plan_id": plan_id, "newer_plan_id": st.newer_plan_id,
                     "proposal_id": st.proposal_id, "proposal_status": st.proposal_status},
        )  # fmt: skip
