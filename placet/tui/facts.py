"""What a proposal would do, derived from its stored request and evidence, for display.

The review UI shows the exact effect (docs/design.md section 4) and placet's risk flags
(section 9), computed here as plain values so the queue row, the detail pane and the
confirmation show the same facts and tests check them without a terminal. The flags are
`placet.proposals.vetting.proposal_flags` over the ops the executor would run, as
`placet accept` prints them. Stored JSON is read defensively: a record of another
placet version or an unknown kind renders as its raw JSON with a ``request_invalid``
flag. Nothing here escapes text: `render.py` passes every string through `inert`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from placet.display import duration
from placet.errors import PlacetError
from placet.executor import Plan, plan_for
from placet.proposals.risk import RiskFlag, needs_typed_confirmation
from placet.proposals.vetting import proposal_flags
from placet.schema import LocalFileEvidence, Op, RemoteEvidence, is_by_reference
from placet.store import ProposalRecord

ACTIVE_STATUSES = ("pending", "approved", "executing")
TERMINAL_STATUSES = ("succeeded", "failed", "discarded", "expired", "withdrawn", "interrupted")
SOON = timedelta(minutes=2)
"""A pending proposal closer than this to its expiry is marked as about to expire."""


@dataclass(frozen=True)
class EffectOp:
    """One change a proposal makes, as the owner needs to see it.

    Paths: `local_path` is the absolute local path (root path + relative path);
    `remote_path` is relative to the drive root. `size` in bytes. `local_before` /
    `remote_before` are the evidence dicts seen at proposal time (None: not recorded).
    """

    index: int
    kind: str
    local_path: str | None = None
    remote_path: str | None = None
    size: int | None = None
    sha256: str | None = None
    digest_type: str | None = None
    digest: str | None = None
    replace: bool = False
    local_before: dict[str, Any] | None = None
    remote_before: dict[str, Any] | None = None
    note: str = ""


@dataclass(frozen=True)
class Effect:
    """Everything a proposal would change, plus the flags placet computed for it."""

    kind: str
    ops: list[EffectOp]
    root_name: str | None
    flags: list[RiskFlag] = field(default_factory=list)
    raw: dict[str, Any] | None = None
    """The raw request, set only when the kind is unknown (shown as JSON)."""
    complete: bool = True
    """False for a sync whose ops are stored by reference and were not read: `ops` is
    empty; `op_count` and `op_kinds` come from its request."""
    flags_checked: bool = True
    """False until a summary-only sync's flags were computed (over all of its ops)."""
    op_count: int | None = None
    op_kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Op kind -> (count, bytes), from a by-reference sync's request."""

    @property
    def total_bytes(self) -> int:
        if not self.complete:
            return sum(b for _, b in self.op_kinds.values())
        return sum(op.size or 0 for op in self.ops)

    @property
    def total_ops(self) -> int:
        return len(self.ops) if self.complete or self.op_count is None else self.op_count

    @property
    def needs_typed_confirmation(self) -> bool:
        return needs_typed_confirmation(self.flags)


def _s(d: dict[str, Any] | None, key: str) -> str | None:
    if not d:
        return None
    v = d.get(key)
    return None if v is None else str(v)


def _int(d: dict[str, Any] | None, key: str) -> int | None:
    v = d.get(key) if d else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _dict(d: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    v = d.get(key) if d else None
    return v if isinstance(v, dict) else None


def _join(parent: str | None, name: str | None) -> str:
    parent, name = parent or "", name or ""
    return f"{parent}/{name}" if parent else name


def _local_abs(root: dict[str, Any] | None, rel: str | None) -> str:
    base = _s(root, "path") or ""
    rel = rel or ""
    if not rel or rel == ".":
        return base
    return f"{base.rstrip('/')}/{rel}" if base else rel


def flags_of(record: ProposalRecord, ops: Sequence[dict[str, Any]] | None = None) -> list[RiskFlag]:
    """placet's risk flags for `record`: `placet.proposals.vetting.proposal_flags` over the ops the
    executor would run (`plan_for`; `ops`: a by-reference sync's stored ops, read with
    `Store.ops` or `Store.checked_ops`), the same function `placet accept` prints.

    A stored request that does not parse (another placet wrote it, it was altered, or its
    kind or an op's kind is unknown) gets one ``request_invalid`` flag: placet cannot vet
    it, so it is never a one-key accept (and accepting it is refused).
    """
    try:
        parsed = plan_for(record.kind, record.request, record.evidence, ops).ops
    except PlacetError:
        return [
            RiskFlag(
                "request_invalid",
                f"the stored {record.kind!r} request does not parse: placet cannot vet it, "
                "and accepting it is refused; discard it",
            )
        ]
    return proposal_flags(record, parsed)


def effect_of(record: ProposalRecord, ops: Sequence[dict[str, Any]] | None = None) -> Effect:
    """The ops and risk flags of a proposal, from its stored request and evidence.

    A sync whose ops are stored by reference needs them in `ops` (`Store.ops`); without
    them its effect is its request's summary only (`Effect.complete` False: no ops, no
    flags yet), which is what the queue and the detail pane show at once, reading the
    ops page by page (`placet.tui.ops_table`) and the flags in a worker."""
    req, ev, kind = record.request, record.evidence, record.kind
    root = _dict(req, "root")
    root_name = _s(root, "name")
    if kind in ("upload", "download"):
        op = _transfer_effect(kind, req, ev, root)
        return Effect(kind, [op], root_name, flags_of(record))
    if kind == "mkdir":
        remote_ev = _dict(ev, "remote")
        remote = _join(_s(req, "remote_parent"), _s(req, "name"))
        op = EffectOp(index=0, kind="mkdir", remote_path=remote, remote_before=remote_ev)
        return Effect(kind, [op], root_name, flags_of(record))
    if kind == "sync":
        if is_by_reference(kind, req) and ops is None:
            return _sync_summary(req, root_name)
        return _sync_effect(record, root, root_name, ops)
    raw = {"request": req, "evidence": ev}
    return Effect(kind, [], root_name, flags_of(record), raw=raw)


def effect_of_plan(record: ProposalRecord, plan: Plan) -> Effect:
    """The effect of `record` from its plan as `placet.decisions.check` read it: a
    by-reference sync's ops parsed once, for its confirmation and for its run (handed
    on in `Shown.plan`); the other proposals as `effect_of` shows them."""
    if not is_by_reference(record.kind, record.request):
        return effect_of(record)
    root = _dict(record.request, "root")
    ops = [_op_effect(op, root) for op in plan.ops]
    return Effect("sync", ops, _s(root, "name"), proposal_flags(record, plan.ops))


def _evidence(ev: LocalFileEvidence | RemoteEvidence | None) -> dict[str, Any] | None:
    return None if ev is None else ev.model_dump(mode="json")


def _op_effect(op: Op, root: dict[str, Any] | None) -> EffectOp:
    """A parsed sync op as the owner sees it (as `effect_op` shows its stored JSON)."""
    local, remote = op.expected_local, op.expected_remote
    src = remote if op.kind == "download" else local
    return EffectOp(
        index=op.index,
        kind=op.kind,
        local_path=_local_abs(root, op.local_path) if op.local_path is not None else None,
        remote_path=op.remote_path,
        size=op.size,
        sha256=local.sha256 if local is not None and op.kind != "download" else None,
        digest_type=None if src is None else src.digest_type,
        digest=None if src is None else src.digest,
        replace=op.replace or op.kind == "upload_revision",
        local_before=_evidence(local),
        remote_before=_evidence(remote),
        note=op.reason,
    )


def _transfer_effect(
    kind: str, req: dict[str, Any], ev: dict[str, Any], root: dict[str, Any] | None
) -> EffectOp:
    """The one op of an upload or a download, as stored (the values unchecked): sized by
    its source's evidence (the local file, the remote file)."""
    local_ev, remote_ev = _dict(ev, "local"), _dict(ev, "remote")
    if kind == "upload":
        remote = _join(_s(req, "remote_parent"), _s(req, "name"))
        replace = bool(req.get("replace_existing"))
        replaces = replace or bool(remote_ev and remote_ev.get("exists"))
        op_kind, source = ("upload_revision" if replaces else "upload"), local_ev
    else:
        remote = _s(req, "remote_path") or ""
        replace = bool(req.get("overwrite"))
        op_kind, source = "download", remote_ev
    return EffectOp(
        index=0,
        kind=op_kind,
        local_path=_local_abs(root, _s(req, "local_path") or ""),
        remote_path=remote,
        size=_int(source, "size"),
        sha256=_s(source, "sha256"),  # remote evidence has none
        digest_type=_s(source, "digest_type"),
        digest=_s(source, "digest"),
        replace=replace,
        local_before=local_ev,
        remote_before=remote_ev,
    )


def _sync_summary(req: dict[str, Any], root_name: str | None) -> Effect:
    kinds: dict[str, tuple[int, int]] = {}
    raw_kinds = _dict(req, "op_kinds") or {}
    for k, tally in raw_kinds.items():
        t = tally if isinstance(tally, dict) else {}
        kinds[str(k)] = (_int(t, "count") or 0, _int(t, "bytes") or 0)
    return Effect(
        "sync",
        [],
        root_name,
        complete=False,
        flags_checked=False,
        op_count=_int(req, "op_count") or 0,
        op_kinds=kinds,
    )


def effect_op(raw: dict[str, Any], root: dict[str, Any] | None, position: int) -> EffectOp:
    """One stored sync op (a JSON object, read defensively) as the owner sees it;
    `position` stands in for a missing index."""
    op_kind = _s(raw, "kind") or "?"
    exp_local, exp_remote = _dict(raw, "expected_local"), _dict(raw, "expected_remote")
    local_rel = _s(raw, "local_path")
    replace = bool(raw.get("replace"))
    src = exp_remote if op_kind == "download" else exp_local
    index = _int(raw, "index")
    return EffectOp(
        index=index if index is not None else position,
        kind=op_kind,
        local_path=_local_abs(root, local_rel) if local_rel is not None else None,
        remote_path=_s(raw, "remote_path"),
        size=_int(raw, "size"),
        sha256=_s(exp_local, "sha256") if op_kind != "download" else None,
        digest_type=_s(src, "digest_type"),
        digest=_s(src, "digest"),
        replace=replace or op_kind == "upload_revision",
        local_before=exp_local,
        remote_before=exp_remote,
        note=_s(raw, "reason") or "",
    )


def _sync_effect(
    record: ProposalRecord,
    root: dict[str, Any] | None,
    root_name: str | None,
    stored: Sequence[dict[str, Any]] | None,
) -> Effect:
    raw_ops = record.request.get("ops") if stored is None else stored
    ops = [
        effect_op(raw, root, i)
        for i, raw in enumerate(raw_ops if isinstance(raw_ops, list | tuple) else [])
        if isinstance(raw, dict)
    ]
    return Effect("sync", ops, root_name, flags_of(record, stored))


def target_of(record: ProposalRecord) -> str:
    """One-line target for the queue: remote path (upload, mkdir), root:path (download)."""
    req, kind = record.request, record.kind
    if kind in ("upload", "mkdir"):
        return _join(_s(req, "remote_parent"), _s(req, "name"))
    root_name = _s(_dict(req, "root"), "name") or "?"
    if kind == "download":
        return f"{root_name}:{_s(req, 'local_path') or ''}"
    if kind == "sync":
        ops = req.get("ops")
        n = len(ops) if isinstance(ops, list) else _int(req, "op_count") or 0
        local, remote = _s(req, "local_path") or "", _s(req, "remote_path") or ""
        return f"{root_name}:{local} <-> {remote} ({n} ops)"
    return "?"


def size_of(record: ProposalRecord) -> int | None:
    """Bytes the proposal would move (None for a mkdir or when not recorded)."""
    req, ev, kind = record.request, record.evidence, record.kind
    if kind == "upload":
        return _int(_dict(ev, "local"), "size")
    if kind == "download":
        return _int(_dict(ev, "remote"), "size")
    if kind == "sync":
        ops = req.get("ops")
        if is_by_reference(kind, req):
            return _sync_summary(req, None).total_bytes
        if not isinstance(ops, list):
            return None
        return sum(_int(o, "size") or 0 for o in ops if isinstance(o, dict))
    return None


def agent_of(record: ProposalRecord) -> str:
    """Who proposed it, for people: the label, else the client name (attribution only)."""
    return record.label or record.client_name or "unknown agent"


def countdown(expires_at: datetime, now: datetime) -> str:
    """Time left as '45s', '28m32s' or '23h51m'; 'expired' once `now` reached `expires_at`."""
    left = int((expires_at - now).total_seconds())
    if left <= 0:
        return "expired"
    return duration(left)


def expiring_soon(record: ProposalRecord, now: datetime) -> bool:
    """True for a pending proposal that expires within `SOON` (and has not yet)."""
    return record.status == "pending" and now < record.expires_at <= now + SOON
