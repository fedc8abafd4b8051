"""The proposal lifecycle as data: statuses, the transitions docs/design.md section 4 draws, and
who may make each. Pure: no I/O, so the rules can be read and tested on their own.

```
pending ──accept──▶ approved ──claim──▶ executing ──finish──▶ succeeded | failed
pending ──discard─▶ discarded             executing ──interrupt (lease lapsed)──▶ interrupted
pending ──expire──▶ expired               interrupted | failed ──accept again──▶ approved
pending ──withdraw (same run)──▶ withdrawn
pending ──extend──▶ pending (TTL only; audited like a transition)
(none)  ──create──▶ pending
```

The store turns each `Transition` into one compare-and-set UPDATE whose `WHERE status IN`
is `sources`, plus its audit event, in one transaction. Actors: `owner`, `agent:<run_id>`,
`sweeper`, `executor`, `rule:<rule id>` (an owner's standing rule: it may only accept).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

PENDING: Final = "pending"
APPROVED: Final = "approved"
EXECUTING: Final = "executing"
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
DISCARDED: Final = "discarded"
EXPIRED: Final = "expired"
WITHDRAWN: Final = "withdrawn"
INTERRUPTED: Final = "interrupted"

STATUSES: Final = (
    PENDING,
    APPROVED,
    EXECUTING,
    SUCCEEDED,
    FAILED,
    DISCARDED,
    EXPIRED,
    WITHDRAWN,
    INTERRUPTED,
)
TERMINAL: Final = frozenset({SUCCEEDED, DISCARDED, EXPIRED, WITHDRAWN})
"""Statuses nothing leaves. `failed` and `interrupted` may be accepted again."""
ACCEPTABLE: Final = frozenset({PENDING, FAILED, INTERRUPTED})
"""Statuses the owner may accept from (again): the `accept` transition's sources."""

OWNER: Final = "owner"
SWEEPER: Final = "sweeper"
EXECUTOR: Final = "executor"
AGENT_PREFIX: Final = "agent:"
RULE_PREFIX: Final = "rule:"

OP_OUTCOMES: Final = ("done", "already_done", "stale", "failed", "skipped")
SUCCESS_OUTCOMES: Final = frozenset({"done", "already_done"})


def agent_actor(run_id: str) -> str:
    """The actor string of a `placet serve` session: `agent:<run_id>`."""
    return AGENT_PREFIX + run_id


def rule_actor(rule_id: str) -> str:
    """The actor string of an approval by standing rule `rule_id`: `rule:<rule id>`."""
    return RULE_PREFIX + rule_id


def rule_of(actor: str | None) -> str | None:
    """The rule id of an actor (a proposal's `resolved_by`) that is a rule, else None."""
    if actor is not None and actor.startswith(RULE_PREFIX) and len(actor) > len(RULE_PREFIX):
        return actor[len(RULE_PREFIX) :]
    return None


def actor_kind(actor: str) -> str:
    """`owner`, `sweeper`, `executor`, `agent` or `rule`; ValueError for anything else."""
    if actor in (OWNER, SWEEPER, EXECUTOR):
        return actor
    if actor.startswith(AGENT_PREFIX) and len(actor) > len(AGENT_PREFIX):
        return "agent"
    if actor.startswith(RULE_PREFIX) and len(actor) > len(RULE_PREFIX):
        return "rule"
    raise ValueError(
        f"unknown actor {actor!r}: expected owner, sweeper, executor, agent:<run> or rule:<id>"
    )


@dataclass(frozen=True)
class Transition:
    """One named arrow (or fan of arrows with a shared source set) of the diagram."""

    name: str
    sources: frozenset[str | None]
    targets: frozenset[str]
    actors: frozenset[str]  # actor kinds allowed to make it


def _t(name: str, sources: set[str | None], targets: set[str], actors: set[str]) -> Transition:
    return Transition(name, frozenset(sources), frozenset(targets), frozenset(actors))


TRANSITIONS: Final[dict[str, Transition]] = {
    t.name: t
    for t in (
        _t("create", {None}, {PENDING}, {"agent", OWNER}),
        _t("accept", set(ACCEPTABLE), {APPROVED}, {OWNER, "rule"}),
        _t("discard", {PENDING}, {DISCARDED}, {OWNER}),
        _t("expire", {PENDING}, {EXPIRED}, {SWEEPER}),
        _t("withdraw", {PENDING}, {WITHDRAWN}, {"agent"}),
        _t("extend", {PENDING}, {PENDING}, {OWNER}),
        _t("claim", {APPROVED}, {EXECUTING}, {EXECUTOR}),
        _t("finish", {EXECUTING}, {SUCCEEDED, FAILED}, {EXECUTOR}),
        _t("interrupt", {EXECUTING}, {INTERRUPTED}, {OWNER, SWEEPER, EXECUTOR}),
    )
}

ALLOWED_EDGES: Final[frozenset[tuple[str | None, str]]] = frozenset(
    (src, dst) for t in TRANSITIONS.values() for src in t.sources for dst in t.targets
)
"""Every (from, to) pair the diagram has; `from` is None for creation."""


def check_actor(transition: str, actor: str) -> None:
    """ValueError unless `actor` may make `transition` (a programming error, not a refusal)."""
    t = TRANSITIONS[transition]
    if actor_kind(actor) not in t.actors:
        raise ValueError(f"actor {actor!r} may not {transition}; allowed: {sorted(t.actors)}")


def target_of(transition: str) -> str:
    """The one status `transition` leads to; ValueError for `finish`, which has two
    (succeeded or failed: the caller names it)."""
    targets = TRANSITIONS[transition].targets
    if len(targets) != 1:
        raise ValueError(f"{transition} has {len(targets)} targets; name the one it takes")
    (target,) = targets
    return target


def sources_of(transition: str) -> tuple[str, ...]:
    """The statuses a transition may start from (for the CAS `WHERE status IN`)."""
    return tuple(sorted(s for s in TRANSITIONS[transition].sources if s is not None))


def owner_skips(approval_detail: Mapping[str, Any] | None) -> frozenset[int]:
    """The op indexes the owner unticked, from the approval event's detail (`skip_ops`).

    The store writes `skip_ops` as a sorted list of op indexes when a sync is accepted
    (`Store.accept`); anything else there (absent, not a list, non-integers) means none.
    """
    raw = (approval_detail or {}).get("skip_ops")
    if not isinstance(raw, list):
        return frozenset()
    return frozenset(i for i in raw if isinstance(i, int) and not isinstance(i, bool))


def finish_status(
    results: Iterable[tuple[int, str]], skipped_by_owner: frozenset[int] = frozenset()
) -> str:
    """`succeeded` when every selected op is done or already_done, else `failed`.

    `results` are the journaled (op index, outcome) pairs of one attempt. An op the
    owner unticked (its index in `skipped_by_owner`) counts only if it ended `skipped`;
    a `skipped` outcome for an op the owner selected fails the proposal (docs/design.md
    section 9, "Op results").
    """
    return (
        SUCCEEDED
        if all(
            o in SUCCESS_OUTCOMES or (o == "skipped" and i in skipped_by_owner) for i, o in results
        )
        else FAILED
    )
