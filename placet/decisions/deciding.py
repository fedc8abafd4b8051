"""Accept, discard and extend one or several proposals, exactly as they were shown.

A decision on a set is all or nothing: every proposal is checked (`checks.check`), then
the store decides them in one transaction that repeats the state, hash and TTL checks
(`Store.accept_set`); if any proposal changed, expired or was decided since it was
shown, nothing of the set is decided and the caller gets the refusal listing each
(`placet.errors.SetRefused`; a set of one gets that proposal's own error). An accept
records the proof (`Proof`), the request hash and selection shown and, for a set, the
set itself in each approval event, and hands each proposal on: to this process
(`run`), or to the host it was made on (`Accepted.waiting`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from placet.config import Settings
from placet.decisions.checks import Checked, check
from placet.decisions.model import Accepted, Proof, Shown
from placet.drive.base import Drive
from placet.errors import PlacetError, UsageError, one_or_set
from placet.executor import ProgressCallback
from placet.executor import execute as execute_plan
from placet.executor.service import release, reserve
from placet.store import ProposalRecord, Store
from placet.store.db import utcnow
from placet.store.host import waiting_note

__all__ = ["Executor", "accept", "discard", "extend", "leave", "run", "set_entries"]

Executor = Callable[..., ProposalRecord]
"""`execute(store, settings, proposal_id, *, progress=None, cancel=None, drive=None)
-> ProposalRecord`."""


def _distinct(what: str, ids: Sequence[int]) -> None:
    if not ids:
        raise UsageError(f"cannot {what} an empty set of proposals: name at least one")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise UsageError(
            f"cannot {what} proposal(s) {twice} twice in one decision: name each once",
            details={"repeated": twice},
        )


def set_entries(shown: Sequence[Shown]) -> list[dict[str, Any]]:
    """What a decision on several proposals binds, in the order shown: each proposal's
    id, request hash, unticked ops, host and drive (`Shown.entry`; the approval event's
    ``set``, which a passkey signs as a whole)."""
    return [s.entry() for s in shown]


def accept(
    store: Store,
    settings: Settings,
    shown: Sequence[Shown],
    proof: Proof,
    *,
    now: datetime | None = None,
    run_here: bool = True,
    on_page: Callable[[int, int], None] | None = None,
) -> list[Accepted]:
    """Approve every proposal of `shown`, exactly as shown, or none of them.

    Args:
        store, settings: the open store and the owner's settings.
        shown: the proposals as the owner saw them, in the order shown.
        proof: how the approval was made (terminal code, review UI, passkey, rule).
        now: the decision's time (the clock of the caller).
        run_here: this process runs the approved proposals of its own host itself
            (`run`, or `leave` to give one up): they are reserved before the store
            approves them, so this host's executor loops leave them alone. False (a
            rule): those loops run them.
        on_page: progress of reading a big sync's ops, `(ops read, op count)`.

    Returns:
        One `Accepted` per proposal, in the order of `shown`.

    Raises:
        UsageError: `shown` is empty or names a proposal twice.
        the proposal's own refusal for a set of one (`checks` lists the codes), else
        SetRefused (``set_refused``) listing each refused proposal with its own.
    """
    ids = [s.proposal_id for s in shown]
    _distinct("accept", ids)
    now = now or utcnow()
    signed = proof.signed
    checked: list[Checked] = []
    refused: list[tuple[int, PlacetError]] = []
    for s in shown:
        try:
            checked.append(check(store, settings, s, now=now, signed=signed, on_page=on_page))
        except PlacetError as e:
            refused.append((s.proposal_id, e))
    if refused:
        raise one_or_set("accept", len(shown), refused)
    together = set_entries(shown) if len(shown) > 1 else None
    details: dict[int, dict[str, Any]] = {}
    for s in shown:
        detail = {"request_hash": s.request_hash, **proof.detail()}
        detail["skip_ops"] = sorted(s.skip_ops)
        if together is not None:
            detail["set"] = together
        details[s.proposal_id] = detail
    mine = [c.record.id for c in checked if run_here and not c.elsewhere]
    for pid in mine:
        reserve(pid)
    try:
        records = store.accept_set(
            details,
            actor=proof.actor,
            now=now,
            shown_status={s.proposal_id: s.status for s in shown},
        )
    except BaseException:
        for pid in mine:
            release(pid)
        raise
    out = []
    for c, record in zip(checked, records, strict=True):
        waiting = waiting_note(record.status, record.host, record.host_id, store.host_id)
        keep = c.plan if len(shown) == 1 else None  # a set's plans are read again to run
        out.append(Accepted(record, waiting, record.id in mine, keep))
    return out


def run(
    store: Store,
    settings: Settings,
    accepted: Accepted,
    *,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    execute: Executor | None = None,
    drive: Drive | None = None,
) -> ProposalRecord:
    """Execute `accepted` here (`placet.executor.execute`, or `execute` if given) and
    end its reservation, whatever happens. Returns its final record. `drive`: the drive
    to run on (the caller's to close: a `WarmDrive`'s), else one opened for the run.

    Raises:
        UsageError: another host runs it (`accepted.waiting`).
        whatever the executor raises (e.g. WrongState: another process claimed it).
    """
    if not accepted.runs_here:
        raise UsageError(
            f"proposal {accepted.proposal_id} is not run here: {accepted.waiting}",
            details={"proposal_id": accepted.proposal_id},
        )
    pid = accepted.proposal_id
    try:
        if execute is not None:
            return execute(store, settings, pid, progress=progress, cancel=cancel, drive=drive)
        return execute_plan(
            store, settings, pid, progress=progress, cancel=cancel, drive=drive, shown=accepted.plan
        )
    finally:
        if accepted.reserved:
            release(pid)


def leave(accepted: Accepted) -> None:
    """Give up running `accepted` here: this host's executor loops run it."""
    if accepted.reserved:
        release(accepted.proposal_id)


def discard(
    store: Store,
    shown: Sequence[Shown],
    *,
    reason: str | None = None,
    now: datetime | None = None,
) -> list[ProposalRecord]:
    """Discard every proposal of `shown` with one `reason`, or none of them: refused as
    `accept` is when one is no longer pending (``wrong_state``) or its request hash is
    not the one shown (``not_approved_as_shown``). A pending proposal past its TTL that
    the sweeper has not expired yet may still be discarded."""
    ids = [s.proposal_id for s in shown]
    _distinct("discard", ids)
    return store.discard_set(
        ids,
        reason=reason,
        now=now or utcnow(),
        shown_hash={s.proposal_id: s.request_hash for s in shown},
    )


def extend(
    store: Store, ids: Sequence[int], *, minutes: int, now: datetime | None = None
) -> list[ProposalRecord]:
    """Push the expiry of every proposal of `ids` `minutes` later (never past
    `max_extend_hours` from its creation), or of none: refused as `Store.extend` refuses
    one (``wrong_state``, ``expired``, ``limit_exceeded`` at the cap)."""
    _distinct("extend", list(ids))
    return store.extend_set(list(ids), minutes=minutes, now=now or utcnow())
