"""Which rule, if any, decides a proposal: default deny, and a forbid always wins.

`evaluate` is a pure function of the rules, a proposal's facts, the owner's drive and the
time. A forbid covering any op wins; else the first allow (in file order) covering the
whole proposal approves it; else the owner decides. For each allow that did not match the
verdict keeps the first condition that failed, checked in this order: expiry, drive,
client, kinds, flags, remote prefix (and folders made on the way), local folder, sizes.
The store's limits (hourly cap, pause) are `placet.rules.ledger`'s. A forbid covers a
proposal when one op of a kind it names (`upload` covers `upload_replace`, `download`
covers `download_replace`, `sync` any op of a sync) lies under its folders, compared
folded. docs/decisions/0038-standing-rules.md says why each condition is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from placet.display import size_text
from placet.rules.facts import OpFacts, ProposalFacts
from placet.rules.model import NEVER_BY_RULE, Rule
from placet.rules.prefix import within_exactly, within_folded

__all__ = ["Miss", "Verdict", "allow_miss", "evaluate", "forbid_covers"]

_IMPLIED_BY_SYNC = frozenset({"mkdir", "upload"})
_FORBID_COVERS = {"upload_replace": "upload", "download_replace": "download"}


def quote(s: str) -> str:
    """`s` between single quotes, raw: a verdict's text is made inert where it is shown
    (it is built for 100 rules on every proposal, and mostly never shown)."""
    return f"'{s}'"


@dataclass(frozen=True)
class Miss:
    """An allow that did not cover the proposal, and the first condition that failed."""

    rule_id: str
    condition: str


@dataclass(frozen=True)
class Verdict:
    """`effect`: ``allow`` (rule `rule_id` approves), ``forbid`` (rule `rule_id` keeps
    every rule from approving) or ``none`` (no rule applies: the owner decides).
    `reason` says it in one line; `misses` holds each allow that did not match."""

    effect: Literal["allow", "forbid", "none"]
    rule_id: str | None
    reason: str
    misses: tuple[Miss, ...] = ()


def _common(rule: Rule, facts: ProposalFacts, now: datetime, owner_drive: str) -> str | None:
    """The first of the conditions both effects share that fails, or None."""
    until = rule.expires_at()
    if until is not None and now >= until:
        return f"expired at {until.isoformat()}"
    want = rule.drive if rule.drive is not None else owner_drive
    if facts.drive != want:
        whose = "" if rule.drive is not None else " (the drive config.toml names)"
        return f"the drive is {quote(facts.drive)}, not {quote(want)}{whose}"
    if rule.clients is not None and facts.client not in rule.clients:
        shown = quote(facts.client) if facts.client is not None else "none"
        return f"the client name {shown} is not one of {', '.join(map(quote, rule.clients))}"
    return None


def _kind_miss(rule: Rule, facts: ProposalFacts) -> str | None:
    named: set[str] = set(rule.kinds)
    if facts.kind == "sync":
        if "sync" not in named:
            return "it is a sync and the rule does not name sync"
        named |= _IMPLIED_BY_SYNC
    for op in facts.ops:
        if op.kind not in named:
            return f"op #{op.index} is {op.kind}, a kind the rule does not name"
    return None


def _flag_miss(rule: Rule, op: OpFacts) -> str | None:
    for flag in op.flags:
        if flag in NEVER_BY_RULE:
            return f"op #{op.index} is flagged {flag}: no rule approves that"
        if flag == "replaces_existing":
            if op.kind.endswith("_replace"):
                continue
            return f"op #{op.index} replaces an existing file and is not a *_replace kind"
        if flag not in rule.allow_flags:
            return f"op #{op.index} is flagged {flag}, which allow_flags does not name"
    return None


def _path_miss(rule: Rule, facts: ProposalFacts) -> str | None:
    prefix = rule.remote_segments
    for op in facts.ops:
        if not within_exactly(op.remote_parts, prefix):
            return (
                f"op #{op.index}'s drive path {quote(op.remote_path)} is not below "
                f"remote_prefix {quote(rule.remote_prefix)}"
            )
    for parent in facts.missing_parents:
        if not within_exactly(parent, prefix, strictly=False):
            return (
                f"it creates the folder {quote(parent)} on the way, above remote_prefix "
                f"{quote(rule.remote_prefix)}"
            )
    folder = rule.local_segments
    if folder is None:
        return None
    for op in facts.ops:
        if op.local_path is not None and not within_exactly(op.local_parts, folder):
            shown = quote(op.local_path)
            return (
                f"op #{op.index}'s local path {shown} is not below {quote(rule.local_folder or '')}"
            )
    return None


def _size_miss(rule: Rule, facts: ProposalFacts) -> str | None:
    if rule.max_bytes is not None:
        for op in facts.ops:
            if op.kind == "mkdir":
                continue
            if op.size is None:
                return f"op #{op.index}'s size is not known"
            if op.size > rule.max_bytes:
                return (
                    f"op #{op.index} is {size_text(op.size)}, over max_bytes "
                    f"{size_text(rule.max_bytes)}"
                )
    cap = rule.max_bytes_per_proposal
    if cap is not None:
        if any(op.size is None for op in facts.ops if op.kind != "mkdir"):
            return "an op's size is not known"
        if facts.total_bytes > cap:
            return (
                f"it moves {size_text(facts.total_bytes)}, over max_bytes_per_proposal "
                f"{size_text(cap)}"
            )
    return None


def allow_miss(rule: Rule, facts: ProposalFacts, now: datetime, owner_drive: str) -> str | None:
    """The first condition of allow `rule` that `facts` fail (module docstring), or None
    when the rule covers the proposal (the store's caps aside)."""
    if facts.problem is not None:
        return facts.problem
    if not facts.ops:
        return "it has no op"
    miss = _common(rule, facts, now, owner_drive) or _kind_miss(rule, facts)
    if miss is not None:
        return miss
    for op in facts.ops:
        miss = _flag_miss(rule, op)
        if miss is not None:
            return miss
    return _path_miss(rule, facts) or _size_miss(rule, facts)


def forbid_covers(
    rule: Rule, facts: ProposalFacts, now: datetime, owner_drive: str
) -> OpFacts | None:
    """The first op of the proposal that forbid `rule` covers (module docstring), or
    None. A sync named by the rule is covered through any op under its folders."""
    if _common(rule, facts, now, owner_drive) is not None:
        return None
    named = set(rule.kinds)
    folder = rule.local_segments
    for op in facts.ops:
        kind_named = (
            op.kind in named
            or _FORBID_COVERS.get(op.kind) in named
            or (facts.kind == "sync" and "sync" in named)
        )
        if not kind_named or not within_folded(op.remote_path, rule.remote_segments):
            continue
        if folder is not None and (
            op.local_path is None or not within_folded(op.local_path.lstrip("/"), folder)
        ):
            continue
        return op
    return None


def evaluate(
    rules: Sequence[Rule], facts: ProposalFacts, now: datetime, owner_drive: str
) -> Verdict:
    """The verdict of `rules` on `facts` (module docstring)."""
    for rule in rules:
        if rule.effect != "forbid":
            continue
        op = forbid_covers(rule, facts, now, owner_drive)
        if op is not None:
            return Verdict(
                "forbid",
                rule.id,
                f"rule {quote(rule.id)} forbids op #{op.index} ({op.kind} {quote(op.remote_path)})",
            )
    misses: list[Miss] = []
    for rule in rules:
        if rule.effect != "allow":
            continue
        miss = allow_miss(rule, facts, now, owner_drive)
        if miss is None:
            return Verdict("allow", rule.id, f"rule {quote(rule.id)} covers it")
        misses.append(Miss(rule.id, miss))
    reason = "no rule covers it" if misses else "no allow rule"
    return Verdict("none", None, reason, tuple(misses))
