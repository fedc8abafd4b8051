"""Binding an approved proposal to what the owner was shown (docs/design.md section 9).

Before any op runs, the executor checks that the stored request still hashes to the
proposal's request hash and to the hash the approval audit event recorded, that the
owner's unticked ops (`skip_ops`) fit the proposal, that the drive is the one the
proposal was made against, and that no upload or mkdir would write into placet's own
folders (`placet.proposals.vetting.refuse_own_paths`, the check `placet accept` and the review UI
run before accepting; repeated here so a proposal approved by any path, e.g. directly in
the store, cannot write there; a download is checked again per op, by descriptor, in
`placet.executor.download`). `placet accept` runs the checks that need no approval yet
(`check_binding`) before it asks for the code; `refusal_before_accept` and
`check_before_accept` are those checks as the review UI shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from placet.config import Settings, approvals_mode
from placet.config.pins import read_pins, spend_signature
from placet.drive import configured_spec
from placet.drive.base import Drive
from placet.errors import PlacetError, PolicyRefused
from placet.executor.beside import for_execution
from placet.executor.ops import Plan, load_plan, plan_for
from placet.proposals.selection import needs
from placet.proposals.vetting import refuse_own_paths
from placet.rules.signing import approval_problem
from placet.schema import is_by_reference, request_hash
from placet.store import AuditRecord, ProposalRecord, Store
from placet.store.host import host_label, runs_elsewhere
from placet.store.lifecycle import APPROVED, EXECUTING, owner_skips
from placet.store.signatures import (
    LEGACY_SIGNED,
    accept_fields,
    check_signed_approval,
    check_signed_set,
    set_entry,
    signature_id,
)
from placet.text import quote


def check_binding(
    settings: Settings,
    record: ProposalRecord,
    drive: Drive | None = None,
    *,
    elsewhere: bool = False,
) -> None:
    """The checks of `bind` that need no approval yet: the stored request still hashes to
    the proposal's hash, and the configured drive (and `drive`, if given) is the one it
    was made against. `placet accept` runs them before asking for the code.
    `elsewhere`: the proposal runs on another host (`placet.store.host.runs_elsewhere`),
    whose drive this host's settings do not name; only the hash is checked here, and that
    host's executor binds the rest before it runs anything.

    Raises:
        PolicyRefused: ``request_altered`` or ``drive_changed`` (see `bind`).
    """
    _check_hash(record)
    if not elsewhere:
        _check_drive(settings, record, drive)


def _check_hash(record: ProposalRecord) -> None:
    pid = record.id
    now_hash = request_hash(record.kind, record.request, record.evidence)
    if now_hash != record.request_hash:
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: its stored request hashes to "
            f"{now_hash[:16]}..., not to the {record.request_hash[:16]}... it was proposed "
            "and shown with; it was altered in the database: discard it",
            code="request_altered",
            details={"proposal_id": pid, "stored": record.request_hash, "now": now_hash},
        )


def _check_drive(settings: Settings, record: ProposalRecord, drive: Drive | None) -> None:
    pid = record.id
    configured = configured_spec(settings)
    used = drive.spec if drive is not None else configured
    if record.drive_spec != configured or used != record.drive_spec:
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: it was made against the drive "
            f"{record.drive_spec!r}, but the configured drive is {configured!r}; switch the "
            "drive back, or discard it and ask the agent to propose again",
            code="drive_changed",
            details={"proposal_id": pid, "proposal_drive": record.drive_spec,
                     "configured_drive": configured},
        )  # fmt: skip


def reuses_shown(record: ProposalRecord, shown: Plan | None) -> bool:
    """Whether `bind` runs `shown` (read for the approved request hash) instead of
    reading the ops again."""
    return shown is not None and shown.request_hash == record.request_hash


def bind(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    drive: Drive | None,
    shown: Plan | None = None,
    *,
    beside: bool = False,
) -> Plan:
    """The binding checks of docs/design.md section 9; returns the parsed plan, with the ops
    the owner unticked (the approval event's `skip_ops`) as its `skip`. `shown`: the plan
    `load_plan` read when the proposal was shown (`placet accept`), used instead of
    reading every op again when its `request_hash` is the proposal's (checked here against
    the stored request and the approval): the ops it holds were verified against the
    `ops_digest` of exactly that request, and the stored rows are hashed again
    (`Store.check_ops`, nothing parsed); any other plan is ignored and the ops are read.
    `beside`: the caller runs the checks that go over every op of a sync beside its
    transfers (`placet.executor.beside`): the own-folder check of each op, and the hash
    of the rows of a `shown` plan; they are left out here.

    Raises:
        PolicyRefused: ``request_altered`` (the stored request + evidence no longer hash
            to the proposal's hash, or a sync's stored ops no longer hash to the
            `ops_digest` its request binds: `Store.checked_ops`),
            ``not_approved_as_shown`` (the approval event bound
            another hash, or there is none, or its `skip_ops` do not fit the ops: unknown
            indexes, every op, or a kind other than sync), ``drive_changed`` (the
            configured drive, or the drive handed in, is not the one the proposal was
            made against), ``signature_required`` / ``signature_invalid`` (signed
            mode: the approval carries no passkey signature, or one that does not verify
            for exactly this request, selection, host and drive, or one that already
            approved a run: spent with its claim in the database, or beside config.toml,
            `placet.config.pins.spend_signature`), ``passkey_not_pinned``
            (signed mode: the signing
            passkey is not pinned in the owner's config folder with the key the database
            holds: `placet.config.pins`), ``folder_unticked`` (the approval unticks a
            `create folder` op that ticked ops go into), ``placet_own_path`` (an upload,
            upload_revision or mkdir, ticked or not, targets a local-folder drive path
            inside placet's data, config or database folder; details ``proposal_id``,
            ``op_index``).
        PlacetError (``request_invalid``): the stored request does not parse.
        ConfigError: `config.toml` cannot be read to tell the approval mode
            (`placet.config.approvals_mode`), or a spent signature cannot be recorded.
    """
    pid = record.id
    _check_hash(record)
    events = store.audit_events(proposal_id=pid)
    approvals = [e for e in events if e.to_status == APPROVED]
    bound = approvals[-1].detail.get("request_hash") if approvals else None
    if bound != record.request_hash:
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: the owner's approval "
            + ("is missing from the audit log" if not approvals else f"bound hash {bound}")
            + f", not the proposal's {record.request_hash}; review and accept it again",
            code="not_approved_as_shown",
            details={"proposal_id": pid, "approved": bound, "proposal": record.request_hash},
        )
    skip = owner_skips(approvals[-1].detail)
    signed = approvals_mode(settings) == "signed"  # config.toml as it is now
    by_rule = approvals[-1].detail.get("via") == "rule"
    if signed and not by_rule:
        _check_signature(store, settings, record, events, skip)
    _check_drive(settings, record, drive)
    if shown is not None and reuses_shown(record, shown):
        if not beside:  # the rows still the ones shown: hashed only
            store.check_ops(pid, record.request)
        plan = shown
    else:
        plan = load_plan(store, record)
    unknown = sorted(skip - {op.index for op in plan.ops})
    if skip and (record.kind != "sync" or unknown or len(skip) >= len(plan.ops)):
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: the owner's approval unticks ops "
            f"{sorted(skip)}, which does not fit its {len(plan.ops)} {record.kind} op(s); "
            "review and accept it again",
            code="not_approved_as_shown",
            details={"proposal_id": pid, "skip_ops": sorted(skip), "unknown": unknown},
        )
    if missing := needs(plan.ops, skip):  # rclone would create the unticked folder anyway
        op, folder = missing[0]
        raise PolicyRefused(
            f"refusing to execute proposal {pid}: the owner's approval unticks op "
            f"#{folder.index} (create folder {quote(folder.remote_path or '')}) while op "
            f"#{op.index} goes into it; review and accept it again",
            code="folder_unticked",
            details={"proposal_id": pid, "folder_op": folder.index, "needed_by": op.index},
        )
    if signed and by_rule:
        _check_signed_rule(store, settings, record, plan, approvals[-1])
    if not (beside and plan.kind == "sync"):
        _check_own_paths(settings, record, plan)
    return replace(plan, skip=skip)


def _check_signed_rule(
    store: Store, settings: Settings, record: ProposalRecord, plan: Plan, approval: AuditRecord
) -> None:
    """Signed mode, an approval by a standing rule: the rules it names must be signed by
    the owner's pinned passkey and still cover the proposal at the approval's time
    (`placet.rules.signing.approval_problem`).

    Raises:
        PolicyRefused (``signature_invalid``; ``signature_required`` without a signature).
    """
    why = approval_problem(store, settings, record, plan.ops, approval.detail, approval.at)
    if why is not None:
        rule = approval.detail.get("rule")
        signed = isinstance(rule, dict) and isinstance(rule.get("signature"), dict)
        raise PolicyRefused(
            f'refusing to execute proposal {record.id}: approvals = "signed" and its rule '
            f"approval does not hold: {why}; sign the rules (`placet rules sign`) or accept "
            "it in `placet web` with your passkey",
            code="signature_invalid" if signed else "signature_required",
            details={"proposal_id": record.id},
        )


def _check_signature(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    events: list[AuditRecord],
    skip: frozenset[int],
) -> None:
    """Signed mode: the last approval in `events` (the proposal's audit events, this
    run's claim last) must carry a passkey assertion that verifies against a registered,
    unrevoked passkey over exactly this proposal, request hash, selection, host and drive
    (`placet.store.signatures.accept_fields`: a proposal moved to another host or drive
    in the database is not the one signed; a signature made by an older placet, which
    bound neither, is refused), and whose nonce no earlier approval of this proposal
    carried: an assertion copied from an approval that was already run does not approve
    a retry. The passkey must also be pinned, with the public key the database holds, in
    the owner's config folder (`placet.config.pins`): a key added to the database alone
    approves nothing. The signature must have been spent by this run's claim, in the
    database every host reads (`Store.claim`, `Store.spent`): one another claim spent
    first (a proposal reset in the database, on any host) is refused; it is then spent
    beside config.toml too (`spend_signature`), which no edit of the database undoes.

    Raises:
        PolicyRefused: see `bind`. ConfigError: the spent signatures cannot be recorded."""
    pid = record.id
    approvals = [e for e in events if e.to_status == APPROVED]
    assertion = approvals[-1].detail.get("passkey")
    earlier = [e.detail.get("passkey") for e in approvals[:-1]]
    key = (
        store.passkey_by_credential(str(assertion.get("credential_id")))
        if isinstance(assertion, dict)
        else None
    )
    if not isinstance(assertion, dict):
        why = "carries no passkey signature"
    elif key is None or key.revoked_at is not None:
        why = "was signed by a passkey that is not registered (or was revoked)"
    elif any(isinstance(e, dict) and e.get("nonce") == assertion.get("nonce") for e in earlier):
        why = "repeats the passkey signature of an earlier approval (its nonce was used)"
    elif unpinned := read_pins(settings.config_file).problem(
        key.credential_id, key.public_key, active=True
    ):
        raise PolicyRefused(
            f'refusing to execute proposal {pid}: approvals = "signed" and its approval was '
            f"signed by passkey {key.id} {quote(key.name)}, which {unpinned}; nothing was run",
            code="passkey_not_pinned",
            details={"proposal_id": pid, "passkey_id": key.id},
        )
    else:
        detail = approvals[-1].detail
        why = _signature_problem(
            store, settings, record, events, skip, assertion, key.public_key, detail
        )
    if why:
        raise PolicyRefused(
            f'refusing to execute proposal {pid}: approvals = "signed" and its approval '
            f"{why}; accept it again in `placet web` with your passkey",
            code="signature_required" if not isinstance(assertion, dict) else "signature_invalid",
            details={"proposal_id": pid},
        )


def _signature_problem(
    store: Store, settings: Settings, record: ProposalRecord, events: list[AuditRecord],
    skip: frozenset[int], assertion: dict[str, Any], public_key: bytes,
    detail: dict[str, Any],
) -> str:  # fmt: skip
    """Why the verified-looking `assertion` does not approve this run ("" when it
    does), spending it beside config.toml when it does (`_check_signature`). An
    approval made with others by one assertion is checked over their set, which must
    hold this proposal with its request hash, selection, host and drive
    (`check_signed_set`); such an assertion approves each of its proposals once."""
    nonce = str(assertion["nonce"])
    in_set = "set" in detail
    if in_set:
        problem = check_signed_set(assertion, public_key, detail["set"])
        entry = set_entry(detail["set"], record.id)
        if problem is None and (
            entry is None
            or entry.get("request_hash") != record.request_hash
            or set(entry.get("skip_ops") or []) != skip
            or entry.get("host_id") != record.host_id
            or entry.get("drive_spec") != record.drive_spec
        ):
            problem = "the set it signed does not hold this proposal as it is (moved or changed)"
    else:
        fields = accept_fields(
            proposal_id=record.id, request_hash=record.request_hash, skip_ops=skip,
            host_id=record.host_id, drive_spec=record.drive_spec,
        )  # fmt: skip
        problem = check_signed_approval(assertion, public_key, fields)
        if problem == LEGACY_SIGNED:
            return f"carries a signature that does not approve a run now: {problem}"
    if problem is not None:
        return (
            f"has a passkey signature that fails for this proposal on host "
            f"{host_label(record.host, record.host_id)} with drive {quote(record.drive_spec)} "
            f"(signed for another request, selection, host or drive): {problem}"
        )
    spent = store.spent(signature_id(nonce, record.id if in_set else None))
    claims = [e for e in events if e.to_status == EXECUTING]
    if spent is None or not claims or spent.claim_hash != claims[-1].hash:
        if spent is None:
            return (
                "carries a passkey signature whose spending this run's claim did not record "
                "in the database (the record was removed): one signature approves once"
            )
        return (
            f"carries a passkey signature that already approved a run (spent by a claim of "
            f"proposal {spent.proposal_id} on host id {(spent.host_id or 'unrecorded')[:8]}, "
            "recorded in the database): one signature approves once"
        )
    if not spend_signature(settings.config_file, nonce + (f" #{record.id}" if in_set else "")):
        return (
            "carries a passkey signature that already approved a run (recorded as spent "
            "beside config.toml): one signature approves once"
        )
    return ""


def _check_own_paths(settings: Settings, record: ProposalRecord, plan: Plan) -> None:
    """`refuse_own_paths` on the plan's uploads and mkdirs, worded for execution."""
    try:
        refuse_own_paths(settings, record, [op for op in plan.ops if op.kind != "download"])
    except PolicyRefused as e:
        raise for_execution(e) from None


def refusal_before_accept(
    settings: Settings,
    record: ProposalRecord,
    ops: list[dict[str, Any]] | None = None,
    *,
    elsewhere: bool = False,
) -> PlacetError | None:
    """Why `record` must not be accepted whatever the owner types, or None: the checks
    `placet accept` makes before its code, with the same functions and messages.
    `ops`: a by-reference sync's ops as `Store.checked_ops` read them (which already
    refused them if they no longer match the request's digest).

    Returns:
        PolicyRefused ``request_altered`` or ``drive_changed`` (the stored request no
        longer hashes as stored, or the proposal was made against another drive than the
        configured one: `check_binding`), PlacetError ``request_invalid``
        (the stored request does not parse, `plan_for`) or PolicyRefused
        ``placet_own_path`` (an op would write inside placet's own folders,
        `placet.proposals.vetting.refuse_own_paths`). `elsewhere`: made on another host;
        the drive and placet's own folders are that host's, which its executor checks
        (`check_binding`).
    """
    try:
        check_binding(settings, record, elsewhere=elsewhere)
        plan = plan_for(record.kind, record.request, record.evidence, ops)
        if not elsewhere:
            refuse_own_paths(settings, record, plan.ops)
    except PlacetError as e:
        return e
    return None


def check_before_accept(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    *,
    on_page: Callable[[int, int], None] | None = None,
) -> tuple[PlacetError | None, list[dict[str, Any]] | None]:
    """`refusal_before_accept`, a by-reference sync's ops read and verified first
    (`Store.checked_ops`: ``request_altered`` when they no longer match its digest;
    `on_page` its progress, and what it raises ends the read); a proposal made on
    another host is checked as `elsewhere`.

    Returns:
        (the refusal or None, the sync's ops or None for the other kinds and inline ops).
    """
    ops = None
    if is_by_reference(record.kind, record.request):
        try:
            ops = store.checked_ops(record.id, record.request, on_page=on_page)
        except PlacetError as e:
            return e, None
    elsewhere = runs_elsewhere(record.host_id, store.host_id)
    return refusal_before_accept(settings, record, ops, elsewhere=elsewhere), ops
