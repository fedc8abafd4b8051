"""The facts a rule may match: what placet itself established about a proposal.

Only facts placet computed or checked go in (docs/decisions/0038-standing-rules.md): each
op's kind as a rule names it, its drive path and local path after the path rules, its
size and digest from the evidence, placet's risk flags for it (`placet.proposals.vetting`),
the folders it creates on the way, the drive it was made against, and the client name
the MCP client reported (a claim: a rule may narrow by it, never widen). The agent's
reason is not a fact and never reaches a rule.

A path the path rules would refuse (`..`, empty or absolute segments) makes the facts
unusable (`problem`): no rule approves what placet could not check.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from placet.proposals.vetting import op_flags, root_path_of
from placet.rules.model import RuleKind
from placet.rules.prefix import clean_segments
from placet.schema import Op
from placet.store import ProposalRecord
from placet.text import quote

__all__ = ["OpFacts", "ProposalFacts", "facts_of", "rule_kind"]


@dataclass(frozen=True)
class OpFacts:
    """One op as rules see it. `local_path` is absolute (the root's path joined with
    the op's), None for an op with no local side (a folder on the drive)."""

    index: int
    kind: RuleKind
    remote_path: str
    local_path: str | None
    size: int | None
    sha256: str | None
    flags: tuple[str, ...]
    remote_parts: tuple[str, ...] | None = None
    """`remote_path`'s segments (`placet.rules.prefix.clean_segments`), None if refused."""
    local_parts: tuple[str, ...] | None = None
    """`local_path`'s segments, None without a local side."""


@dataclass(frozen=True)
class ProposalFacts:
    """A proposal as rules see it (module docstring)."""

    proposal_id: int
    kind: str
    drive: str
    client: str | None
    ops: tuple[OpFacts, ...]
    missing_parents: tuple[str, ...] = ()
    problem: str | None = None
    """Why no rule may judge this proposal (a path the path rules refuse), or None."""

    @property
    def total_bytes(self) -> int:
        return sum(op.size or 0 for op in self.ops if op.kind != "mkdir")


def rule_kind(op: Op) -> RuleKind:
    """The kind of `op` as a rule names it: a new file (`upload`, `download`) or a
    replacement (`upload_replace`, `download_replace`: the op replaces, or its evidence
    saw the target exist), or `mkdir`."""
    if op.kind == "mkdir":
        return "mkdir"
    if op.kind == "download":
        return "download_replace" if op.replace or op.expected_local is not None else "download"
    seen = op.expected_remote is not None and op.expected_remote.exists
    return "upload_replace" if op.kind == "upload_revision" or op.replace or seen else "upload"


def _sha256(op: Op) -> str | None:
    if op.kind == "download":
        remote = op.expected_remote
        if remote is not None and remote.digest_type == "sha256":
            return remote.digest
        return None
    return op.expected_local.sha256 if op.expected_local is not None else None


def facts_of(record: ProposalRecord, ops: Sequence[Op]) -> ProposalFacts:
    """The facts of `record`, whose parsed ops are `ops` (`placet.executor.load_plan`)."""
    root = root_path_of(record)
    problems: list[str] = []
    out: list[OpFacts] = []
    for op in ops:
        remote = op.remote_path or ""
        local: str | None = None
        remote_parts = clean_segments(remote)
        if remote_parts is None:
            problems.append(f"op #{op.index}'s drive path {quote(remote)} is not a checked path")
        if op.kind != "mkdir" and op.local_path is not None:
            if not root or clean_segments(op.local_path) is None:
                problems.append(
                    f"op #{op.index}'s local path {quote(op.local_path)} is not a checked path"
                )
            else:
                local = posixpath.join(root, op.local_path)
        out.append(
            OpFacts(
                index=op.index,
                kind=rule_kind(op),
                remote_path=remote,
                local_path=local,
                size=op.size,
                sha256=_sha256(op),
                flags=tuple(f.code for f in op_flags(record, op, root)),
                remote_parts=remote_parts,
                local_parts=None if local is None else tuple(p for p in local.split("/") if p),
            )
        )
    return ProposalFacts(
        proposal_id=record.id,
        kind=record.kind,
        drive=record.drive_spec,
        client=record.client_name,
        ops=tuple(out),
        missing_parents=_missing_parents(record.evidence),
        problem="; ".join(problems) or None,
    )


def _missing_parents(evidence: dict[str, Any]) -> tuple[str, ...]:
    raw = evidence.get("missing_parents") if isinstance(evidence, dict) else None
    return tuple(p for p in raw if isinstance(p, str)) if isinstance(raw, list) else ()
