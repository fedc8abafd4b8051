"""A proposal's ops as the agent reads them: one place that reads them, and the bounded
summary a sync proposal is answered with.

A sync's full op list would be megabytes, so every tool answers a sync proposal with
`SyncSummary` (ops and bytes by kind, risk flags and decisions counted, the first few
ops, the latest attempt's outcomes counted) and `proposal_ops` pages the ops
(docs/decisions/0015-reply-budget.md). Every read of ops goes through `ops_page` /
`op_count`, which take either storage form. A summary's static part depends only on the
immutable request, so it is kept per (proposal, request hash) (`_CACHE`), as are the
outcomes of a final attempt (`_OUTCOMES`)."""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from typing import Any

from placet.executor.ops import plan_for
from placet.proposals.vetting import op_flags, root_path_of
from placet.schema import Op
from placet.server.models import (
    FIRST_DECISIONS,
    FIRST_OPS,
    TERMINAL,
    KindTally,
    OpBrief,
    ProposalView,
    SyncSummary,
)
from placet.store import ProposalRecord, Store

_CHUNK = 5000  # ops read at once while summarising
_CACHE_SIZE = 64
_CACHE: OrderedDict[tuple[int, str], SyncSummary] = OrderedDict()
_OUTCOMES: OrderedDict[tuple[int, int, str], dict[str, int]] = OrderedDict()
_CACHE_LOCK = threading.Lock()


# ---- reading ops (the one place) ------------------------------------------------------


def op_count(store: Store, rec: ProposalRecord) -> int:
    """How many ops `rec` runs: a sync's stored ops; one for the other kinds."""
    if rec.kind != "sync":
        return 1
    return store.op_count(rec.id)


def ops_page(store: Store, rec: ProposalRecord, start: int, limit: int) -> list[Op]:
    """The ops of `rec` with index in `[start, start + limit)`, by index (the journal key
    of `OpResult`; the executor runs folders first, `placet.executor.ops.sync_order`).

    Raises:
        PlacetError (`request_invalid`): the stored request does not parse.
    """
    if rec.kind != "sync":
        ops = plan_for(rec.kind, rec.request, rec.evidence).ops
        return [op for op in ops if start <= op.index < start + limit]
    # Stored ops are numbered 0..n-1 in order (`Store.checked_ops`), so position = index.
    page = store.ops(rec.id, start=start, limit=limit)
    return [op for op in map(Op.model_validate, page) if start <= op.index < start + limit]


def _all_ops(store: Store, rec: ProposalRecord) -> Iterator[Op]:
    n = op_count(store, rec)
    for start in range(0, n, _CHUNK):
        yield from ops_page(store, rec, start, _CHUNK)


# ---- the summary ----------------------------------------------------------------------


def _static_summary(store: Store, rec: ProposalRecord) -> SyncSummary:
    by_kind: dict[str, list[int]] = {}
    flags: Counter[str] = Counter()
    first: list[OpBrief] = []
    root_path = root_path_of(rec)
    for op in _all_ops(store, rec):
        tally = by_kind.setdefault(op.kind, [0, 0])
        tally[0] += 1
        tally[1] += 0 if op.kind == "mkdir" else (op.size or 0)
        flags.update({f.code for f in op_flags(rec, op, root_path)})
        if len(first) < FIRST_OPS:
            first.append(OpBrief.of(op))
    raw = rec.request.get("decisions")
    decisions: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return SyncSummary(
        op_count=op_count(store, rec),
        by_kind={k: KindTally(count=c, bytes=b) for k, (c, b) in sorted(by_kind.items())},
        bytes_total=sum(b for _, b in by_kind.values()),
        decisions=dict(sorted(Counter(str(v) for v in decisions.values()).items())),
        first_decisions={k: str(decisions[k]) for k in sorted(decisions)[:FIRST_DECISIONS]},
        risk_flags=dict(sorted(flags.items())),
        first_ops=first,
        outcomes=None,
    )


def sync_summary(store: Store, rec: ProposalRecord) -> SyncSummary:
    """The summary of sync proposal `rec` (module docstring), outcomes read now."""
    key = (rec.id, rec.request_hash)
    with _CACHE_LOCK:
        static = _CACHE.get(key)
        if static is not None:
            _CACHE.move_to_end(key)
    if static is None:
        static = _static_summary(store, rec)
        with _CACHE_LOCK:
            _CACHE[key] = static
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    if rec.attempt == 0:
        return static
    final = (rec.id, rec.attempt, rec.status)  # a final status's outcomes never change
    with _CACHE_LOCK:
        counted = _OUTCOMES.get(final)
    if counted is None:
        counted = dict(sorted(Counter(r.outcome for r in store.op_results(rec.id)).items()))
        if rec.status in TERMINAL:
            with _CACHE_LOCK:
                _OUTCOMES[final] = counted
                while len(_OUTCOMES) > _CACHE_SIZE:
                    _OUTCOMES.popitem(last=False)
    return static.model_copy(update={"outcomes": counted})


def proposal_view(
    store: Store, rec: ProposalRecord, run_id: str, *, resolution_reason: str | None = None
) -> ProposalView:
    """`ProposalView.of(rec)` with the summary of a sync proposal (`sync_summary`)."""
    summary = sync_summary(store, rec) if rec.kind == "sync" else None
    return ProposalView.of(rec, run_id, resolution_reason=resolution_reason, sync=summary)
