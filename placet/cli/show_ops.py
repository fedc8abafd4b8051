"""`placet show` of a proposal with many ops: a summary, or everything streamed.

A sync may hold 100,000 ops (stored by reference,
docs/decisions/0023-ops-by-reference.md). `show ID` prints what the owner needs to judge
it: the op count and bytes moved, counts and bytes by op kind, the conflicts and their
decisions counted, placet's risk flags counted by kind (the first `SHOWN` listed), the
first `SHOWN` ops, and how many more there are. `show ID --all` lists every op and every
flag; `--json` writes the whole proposal with every op. Both stream: ops are read from the
store a page at a time (`Store.iter_ops`) and written as they come, never built into one
string. The text goes through the same renderers as `placet accept`
(`placet.cli.accept_effect`), so every string is inert.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from placet.cli.accept_effect import flag_counts, ops_lines
from placet.display import already_inert, size_text
from placet.executor.ops import stored_ops
from placet.proposals.risk import RiskFlag
from placet.proposals.vetting import op_flags, root_path_of
from placet.schema import Op
from placet.store import ProposalRecord, Store
from placet.text import inert

SHOWN = 20
"""Ops (and risk flags) `placet show` lists without `--all`."""


@dataclass
class OpsScan:
    """One pass over a proposal's ops: counts, bytes by kind, the distinct risk flags
    (in op order), and the first `keep` ops."""

    count: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    """kind -> [ops, bytes]."""
    flags: dict[RiskFlag, None] = field(default_factory=dict)
    first: list[Op] = field(default_factory=list)

    @property
    def moving(self) -> int:
        return sum(b for k, (_, b) in self.by_kind.items() if k != "mkdir")


def scan(store: Store, record: ProposalRecord, keep: int = SHOWN) -> OpsScan:
    """Count, size and flag every op of `record` (see `OpsScan`), streaming.

    Raises:
        PlacetError (``request_invalid``).
    """
    out = OpsScan()
    root_path = root_path_of(record)
    for op in stored_ops(store, record):
        out.count += 1
        tally = out.by_kind.setdefault(op.kind, [0, 0])
        tally[0] += 1
        tally[1] += op.size or 0
        for flag in op_flags(record, op, root_path):
            out.flags.setdefault(flag)
        if len(out.first) < keep:
            out.first.append(op)
    return out


def summary_lines(record: ProposalRecord, s: OpsScan, *, every: bool) -> Iterator[str]:
    """The flags, the counts by kind and the conflicts of a scanned proposal; every
    flag with `every`, else the first `SHOWN`."""
    flags = list(s.flags)
    if not flags:
        yield "  placet found no risk flags."
    else:
        yield f"  placet risk flags ({len(flags)}: {flag_counts(flags)}):"
        shown = flags if every else flags[:SHOWN]
        yield from (f"    ! {f.code}: {already_inert(f.message)}" for f in shown)
        if len(shown) < len(flags):
            yield f"    ... and {len(flags) - len(shown)} more flags; --all lists them"
    yield f"  ops           {s.count}, moving {size_text(s.moving)}"
    if record.kind == "sync":
        kinds = ", ".join(
            f"{inert(k)} {n}" + ("" if k == "mkdir" else f" ({size_text(b)})")
            for k, (n, b) in sorted(s.by_kind.items())
        )
        yield f"  by kind       {kinds or 'none'}"
        decisions = record.request.get("decisions")
        if isinstance(decisions, dict) and decisions:
            counts: dict[str, int] = {}
            for d in decisions.values():
                counts[str(d)] = counts.get(str(d), 0) + 1
            each = ", ".join(f"{n} {inert(d)}" for d, n in sorted(counts.items()))
            yield f"  conflicts     {len(decisions)} decided: {each}"


def op_lines(store: Store, record: ProposalRecord, s: OpsScan, *, every: bool) -> Iterator[str]:
    """The ops as `placet accept` lists them: every one with `every` (read again from
    the store, page by page), else the first `SHOWN` and how many more."""
    if not every:
        yield from ops_lines(record, s.first, limit=None)
        if s.count > len(s.first):
            yield f"  ... and {s.count - len(s.first)} more ops; --all to list them"
        return
    for op in stored_ops(store, record):
        yield from ops_lines(record, [op], limit=None)


def json_chunks(store: Store, doc: dict[str, Any], record: ProposalRecord) -> Iterator[str]:
    """`doc` (`{"proposal": ..., ...}`) as one line of JSON (sorted keys, ASCII), with a
    by-reference sync's ops streamed into ``proposal.request.ops`` from the store."""
    if record.kind != "sync" or "ops" in record.request:
        yield json.dumps(doc, sort_keys=True, ensure_ascii=True)
        return
    marker = f"placet-ops-{secrets.token_hex(16)}"
    proposal = {**doc["proposal"], "request": {**record.request, "ops": marker}}
    head, tail = json.dumps({**doc, "proposal": proposal}, sort_keys=True, ensure_ascii=True).split(
        json.dumps(marker), 1
    )
    yield head + "["
    for i, op in enumerate(store.iter_ops(record.id)):
        yield (", " if i else "") + json.dumps(op, sort_keys=True, ensure_ascii=True)
    yield "]" + tail
