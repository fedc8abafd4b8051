"""The checks an accept makes before it writes anything. `state_refusal` (no reads: shown
before any confirmation opens) and `check` (the binding and the selection) give every
shell the same refusal, code and message for the same cause (docs/errors.md):

| cause | code |
|---|---|
| decided since it was shown, or not in a state that can be accepted | ``wrong_state`` |
| past its TTL | ``expired`` |
| its request hash is not the one shown | ``not_approved_as_shown`` |
| signed mode, and no passkey assertion | ``signature_required`` |
| the stored request or ops altered, another drive | ``request_altered``, ``drive_changed`` |
| an op writes into placet's own folders | ``placet_own_path`` |
| the selection: a wrong kind or index, nothing left | ``skip_invalid``, ``nothing_selected`` |
| the selection: a ticked op needs an unticked folder | ``folder_unticked`` |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from placet.config import Settings, approvals_mode
from placet.decisions.model import Shown
from placet.errors import Expired, PlacetError, PolicyRefused, WrongState
from placet.executor import Plan, check_binding, load_plan
from placet.proposals.selection import check_selection
from placet.proposals.vetting import refuse_own_paths
from placet.store import ProposalRecord, Store
from placet.store.decisions import changed_since_shown, signature_required
from placet.store.host import runs_elsewhere
from placet.store.lifecycle import ACCEPTABLE, EXECUTING, PENDING
from placet.text import inert, quote

__all__ = ["Checked", "check", "state_refusal"]


@dataclass(frozen=True)
class Checked:
    """A proposal that passed `check`: the record read, its plan, and whether another
    host runs it."""

    record: ProposalRecord
    plan: Plan = field(repr=False)
    elsewhere: bool


def state_refusal(
    settings: Settings,
    record: ProposalRecord,
    *,
    now: datetime,
    status: str | None = None,
    signed: bool = False,
) -> PlacetError | None:
    """Why `record` cannot be accepted in the state it is in, or None. `status`: the
    status the owner was shown (None: the record's own). `signed`: the approval carries
    a passkey assertion (else ``approvals = "signed"`` refuses it)."""
    pid = record.id
    shown = record.status if status is None else status
    if record.status != shown:
        return WrongState(
            f"cannot accept proposal {pid} as shown: it was {shown} when shown and is "
            f"{record.status} now (decided since); review it again",
            details={"proposal_id": pid, "status": record.status, "shown_status": shown},
        )
    if record.status == EXECUTING:
        return WrongState(
            f"cannot accept proposal {pid}: it is executing under "
            f"{inert(record.lease_holder or '?')}; wait for it, or, if that process is gone, "
            "run `placet sweep` and accept again",
            details={"proposal_id": pid, "status": record.status},
        )
    if record.status not in ACCEPTABLE:
        return WrongState(
            f"cannot accept proposal {pid}: it is {record.status}; only a pending, failed "
            "or interrupted proposal can be accepted",
            details={"proposal_id": pid, "status": record.status},
        )
    if record.status == PENDING and record.is_expired(now):
        return Expired(
            f"cannot accept proposal {pid}: it expired at {record.expires_at.isoformat()}; "
            "ask the agent to propose again",
            details={"proposal_id": pid, "expires_at": record.expires_at.isoformat()},
        )
    if not signed and approvals_mode(settings) == "signed":
        return signature_required(pid, settings.config_file)
    return None


def check(
    store: Store,
    settings: Settings,
    shown: Shown,
    *,
    now: datetime,
    signed: bool = False,
    on_page: Callable[[int, int], None] | None = None,
) -> Checked:
    """Every check of accepting `shown` that needs no write: its state (`state_refusal`),
    the request hash shown, the binding (`placet.executor.check_binding`: the stored
    request still hashes as stored, this drive; only the hash for a proposal another
    host runs), its plan (`shown.plan` when read for this hash, else `load_plan`,
    `on_page` its progress), no op into placet's own folders, and the selection
    (`placet.proposals.selection.check_selection`).

    A plan handed in `shown.plan` is one this check read when the proposal was shown,
    before the decision: the own-folder check of its ops (a stat of every op's target)
    is not made again between the decision and the run; the executor makes it for each
    op right before the op acts (`placet.executor.beside`), so the first op starts at
    once whatever the sync's size.

    Raises:
        the refusal (see the module's table); NotFound.
    """
    record = store.get(shown.proposal_id)
    refusal = state_refusal(settings, record, now=now, status=shown.status, signed=signed)
    if refusal is not None:
        raise refusal
    if record.request_hash != shown.request_hash:
        raise changed_since_shown(record.id, record.request_hash, shown.request_hash)
    moved = [
        f"{what} {quote(str(now))} (shown {quote(str(then))})"
        for what, now, then in (
            ("host", record.host_id, shown.host_id),
            ("drive", record.drive_spec, shown.drive_spec),
        )
        if then != "" and now != then
    ]
    if moved:
        raise PolicyRefused(
            f"refusing to accept proposal {record.id}: it moved since it was shown, to "
            f"{' and '.join(moved)}; nothing was approved: review it again",
            code="not_approved_as_shown",
            details={"proposal_id": record.id},
        )
    elsewhere = runs_elsewhere(record.host_id, store.host_id)
    check_binding(settings, record, elsewhere=elsewhere)
    plan = shown.plan
    if plan is None or plan.request_hash != record.request_hash:
        plan = load_plan(store, record, on_page=on_page)
        if not elsewhere:
            refuse_own_paths(settings, record, plan.ops)
    check_selection(record.id, record.kind, plan.ops, shown.skip_ops)
    return Checked(record, plan, elsewhere)
