"""What `placet accept` shows the owner before asking for the code: placet's facts about
every op, *every* risk flag (counted by kind, the worst first: however many ops a sync
holds, none is cut), the request hash, and the agent's reason boxed last as its claim.

Flags come from `placet.vetting.proposal_flags` (the review UI calls the same function),
matched on the root's (downloads) or the drive's own path joined with each target.
Every string from an agent, a file name or the remote goes through `placet.text.inert`.
Split from `placet.cli.accept` (size).
"""

from __future__ import annotations

from placet.requests import Op
from placet.risk import RiskFlag
from placet.store import ProposalRecord
from placet.text import inert, inert_with_ascii
from placet.vetting import proposal_flags, root_path_of

__all__ = ["SHOWN_OPS", "effect_lines", "flag_counts"]

SHOWN_OPS = 200
"""Ops listed one by one; past this a line says how many more (risk flags: all)."""


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit} ({n} bytes)"


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
        f"       size {_size(op.size)}",
    ]
    ev_local, ev_remote = op.expected_local, op.expected_remote
    if op.kind != "download" and ev_local is not None:
        out.append(f"       sha256 {ev_local.sha256}")
        if ev_local.digest_type and ev_local.digest_type != "sha256":
            out.append(f"       {ev_local.digest_type} {ev_local.digest}")
    if op.kind == "download" and ev_remote is not None:
        digest = f"{ev_remote.digest_type} {ev_remote.digest}" if ev_remote.digest else "none"
        out.append(f"       remote digest {digest}")
    if ev_remote is not None and op.kind != "download":
        seen = "absent" if not ev_remote.exists else (
            f"exists, {_size(ev_remote.size)}, "
            + (f"{ev_remote.digest_type} {ev_remote.digest}" if ev_remote.digest else "no digest")
        )  # fmt: skip
        out.append(f"       target on the drive when proposed: {seen}")
    if op.kind == "download":
        seen = "absent" if ev_local is None else f"exists, {_size(ev_local.size)}"
        out.append(f"       local target when proposed: {seen}")
    if op.reason:
        out.append(f"       planner: {inert(op.reason)}")
    return out


def effect_lines(record: ProposalRecord, ops: list[Op], skip: list[int] | None = None) -> list[str]:
    """What accepting `record` would do, as terminal-safe lines (placet's facts first,
    then its risk flags, then the agent's reason boxed as its claim). Ops in `skip`
    (`--skip`) are listed, marked as skipped."""
    root_path = root_path_of(record)
    skipped = set(skip or [])
    total = sum(op.size or 0 for op in ops if op.kind != "mkdir" and op.index not in skipped)
    left_out = f" ({len(skipped)} skipped with --skip)" if skipped else ""
    out = [
        f"proposal {record.id}  {inert(record.kind)}  {record.status.upper()}",
        f"  drive         {inert(record.drive_spec)}",
        f"  proposed by   {inert(record.client_name or '?')} {inert(record.client_version or '')}"
        f" run {inert(record.run_id)} on host {inert(record.host)}",
        f"  ops           {len(ops)}{left_out}, moving {_size(total)}",
    ]
    for op in ops[:SHOWN_OPS]:
        lines = _op_lines(record, op, root_path)
        if op.index in skipped:
            lines[0] += "  [SKIPPED: --skip, nothing is done for it]"
        out += lines
    if len(ops) > SHOWN_OPS:
        out.append(
            f"  ... and {len(ops) - SHOWN_OPS} more ops (see `placet show {record.id}`; "
            "every op's risk flags are listed below)"
        )
    # Every flag, however many: a padded sync must not push one out of sight.
    flags = proposal_flags(record, ops)
    if flags:
        out.append(f"  placet risk flags ({len(flags)}: {flag_counts(flags)}):")
        ranked = sorted(flags, key=lambda f: _SEVERITY.index(f.code) if f.code in _SEVERITY else 0)
        out += [f"    ! {f.code}: {f.message}" for f in ranked]
    else:
        out.append("  placet found no risk flags.")
    out.append(f"  request hash  {record.request_hash}")
    reason = inert(record.reason)
    out.append("  the agent's reason (its claim, not checked by placet):")
    out += [
        f"    +{'-' * (len(reason) + 2)}+",
        f"    | {reason} |",
        f"    +{'-' * (len(reason) + 2)}+",
    ]
    return out
