"""What `placet accept` shows the owner before asking for the code: placet's facts about
every op, *every* risk flag (counted by kind, the worst first: however many ops a sync
holds, none is cut), the request hash, and the agent's reason boxed last as its claim.

Flags come from `placet.proposals.vetting.proposal_flags` (the review UI calls the same function),
matched on the root's (downloads) or the drive's own path joined with each target.
Every string from an agent, a file name or the remote goes through `placet.text.inert`.
Split from `placet.cli.accept` (size). `placet show` renders with the same pieces
(`ops_lines` without a cap, `flag_lines`, `reason_lines`, `ops_summary`): one renderer
for both, show only orders them differently (reason and flags first, then every op).
"""

from __future__ import annotations

from placet.display import already_inert, size_text
from placet.proposals.facts import proposed_state
from placet.proposals.risk import RiskFlag
from placet.proposals.vetting import proposal_flags, root_path_of
from placet.schema import Op
from placet.store import ProposalRecord
from placet.text import inert, inert_with_ascii

__all__ = [
    "SHOWN_OPS",
    "effect_lines",
    "flag_counts",
    "flag_lines",
    "ops_lines",
    "ops_summary",
    "reason_lines",
]

SHOWN_OPS = 200
"""Ops listed one by one; past this a line says how many more (risk flags: all)."""


def flag_counts(flags: list[RiskFlag]) -> str:
    """``"3 runs_code, 1 secret_name"``: how many flags of each code, most severe first."""
    counts: dict[str, int] = {}
    for f in flags:
        counts[f.code] = counts.get(f.code, 0) + 1
    order = {code: i for i, code in enumerate(_SEVERITY)}
    ranked = sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    return ", ".join(f"{n} {code}" for code, n in ranked)


_SEVERITY = ("runs_code", "secret_name", "replaces_existing", "name_changed",
             "bidi_or_invisible", "confusable_name", "non_ascii_name")  # fmt: skip


def _op_lines(record: ProposalRecord, op: Op, root_path: str) -> list[str]:
    local = f"{root_path.rstrip('/')}/{op.local_path}" if op.local_path is not None else None
    remote = f"drive:/{op.remote_path or ''}"
    head = f"  #{op.index} {op.kind}"
    if op.kind == "mkdir":
        return [f"{head}  create folder {inert_with_ascii(remote)}"]
    src, dst = (remote, local) if op.kind == "download" else (local, remote)
    out = [
        f"{head}  {inert_with_ascii(src or '?')}",
        f"       -> {inert_with_ascii(dst or '?')}" + ("  (REPLACES it)" if op.replace else ""),
        f"       size {size_text(op.size)}",
    ]
    ev_local, ev_remote = op.expected_local, op.expected_remote
    if op.kind != "download" and ev_local is not None:
        out.append(f"       sha256 {ev_local.sha256}")
        if ev_local.digest_type and ev_local.digest_type != "sha256":
            out.append(f"       {ev_local.digest_type} {ev_local.digest}")
    if op.kind == "download" and ev_remote is not None:
        digest = f"{ev_remote.digest_type} {ev_remote.digest}" if ev_remote.digest else "none"
        out.append(f"       remote digest {digest}")
    out += [f"       {label}: {inert(fact)}" for label, fact in proposed_state(op)]
    return out


def ops_summary(ops: list[Op], skip: list[int] | None = None) -> str:
    """``"  ops           34 (2 skipped with --skip), moving 1.2 KiB (1234 bytes)"``."""
    skipped = set(skip or [])
    total = sum(op.size or 0 for op in ops if op.kind != "mkdir" and op.index not in skipped)
    left_out = f" ({len(skipped)} skipped with --skip)" if skipped else ""
    return f"  ops           {len(ops)}{left_out}, moving {size_text(total)}"


def ops_lines(
    record: ProposalRecord,
    ops: list[Op],
    skip: list[int] | None = None,
    *,
    limit: int | None = SHOWN_OPS,
) -> list[str]:
    """Each op as terminal-safe lines (``#5 upload  src`` / ``-> dst`` / size, digests,
    what the target was when proposed, the planner's reason). Ops in `skip` are marked
    skipped. Past `limit` ops (None: no limit; `placet show` lists all) one line says
    how many more."""
    root_path = root_path_of(record)
    skipped = set(skip or [])
    shown = ops if limit is None else ops[:limit]
    out: list[str] = []
    for op in shown:
        lines = _op_lines(record, op, root_path)
        if op.index in skipped:
            lines[0] += "  [SKIPPED: --skip, nothing is done for it]"
        out += lines
    if len(ops) > len(shown):
        out.append(
            f"  ... and {len(ops) - len(shown)} more ops (see `placet show {record.id} "
            "--all`; every op's risk flags are listed below)"
        )
    return out


def flag_lines(
    record: ProposalRecord, ops: list[Op], flags: list[RiskFlag] | None = None
) -> list[str]:
    """Every risk flag of `record`'s ops, however many (a padded sync must not push one
    out of sight), counted by code and listed most severe first. `flags`: the ops' flags
    when the caller has them already (`proposal_flags(record, ops)`)."""
    flags = proposal_flags(record, ops) if flags is None else flags
    if not flags:
        return ["  placet found no risk flags."]
    ranked = sorted(flags, key=lambda f: _SEVERITY.index(f.code) if f.code in _SEVERITY else 0)
    out = [f"  placet risk flags ({len(flags)}: {flag_counts(flags)}):"]
    return out + [f"    ! {f.code}: {already_inert(f.message)}" for f in ranked]


def reason_lines(record: ProposalRecord) -> list[str]:
    """The agent's reason, escaped and boxed, labelled as its claim."""
    reason = inert(record.reason)
    bar = f"    +{'-' * (len(reason) + 2)}+"
    return [
        "  the agent's reason (its claim, not checked by placet):",
        bar,
        f"    | {reason} |",
        bar,
    ]


def effect_lines(
    record: ProposalRecord,
    ops: list[Op],
    skip: list[int] | None = None,
    *,
    flags: list[RiskFlag] | None = None,
) -> list[str]:
    """What accepting `record` would do, as terminal-safe lines (placet's facts first,
    then its risk flags, then the agent's reason boxed as its claim). Ops in `skip`
    (`--skip`) are listed, marked as skipped. `flags`: as `flag_lines`."""
    out = [
        f"proposal {record.id}  {inert(record.kind)}  {record.status.upper()}",
        f"  drive         {inert(record.drive_spec)}",
        f"  proposed by   {inert(record.client_name or '?')} {inert(record.client_version or '')}"
        f" run {inert(record.run_id)} on host {inert(record.host)}",
        ops_summary(ops, skip),
    ]
    out += ops_lines(record, ops, skip)
    out += flag_lines(record, ops, flags)
    out.append(f"  request hash  {record.request_hash}")
    return out + reason_lines(record)
