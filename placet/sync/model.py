"""The values the sync planner returns: the plan, its ops and reports, and how it is stored.

The plan is a value: listings are gathered before `plan()`, execution comes
after it, and in between a `SyncPlan` can be shown, stored, confirmed and tested. This
module decides what a plan may say (op and report kinds, conflict kinds and the
decisions each allows, the entry cap) and its stored format (`PLAN_FORMAT`, versioned
so a change invalidates instead of misreading). These are frozen, slotted dataclasses
rather than pydantic models because a plan of 100,000 entries is built in a hot loop
(docs/design.md section 8); validation happens where values cross a trust boundary, in
`to_request_ops` (pydantic `placet.schema.Op`).

The entries a plan is made from (`LocalEntry`, `RemoteEntry`, `BaselineEntry`, the
capability flags) live in `placet.sync.entries`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from placet.errors import PlacetError
from placet.sync.entries import (
    LocalEntry,
    RemoteEntry,
)

PlanOpKind = Literal["mkdir", "upload", "upload_revision", "download"]
ReportKind = Literal[
    "skip",
    "unverified",
    "deleted_remote",
    "deleted_local",
    "conflict",
    "collision",
    "skipped_special",
    "error",
    "unbound",
]
ConflictKind = Literal[
    "content_differs", "edited_here_deleted_there", "deleted_here_edited_there", "type_conflict"
]
Decision = Literal["keep_local", "keep_remote", "skip"]

OP_KINDS: tuple[PlanOpKind, ...] = get_args(PlanOpKind)
REPORT_KINDS: tuple[ReportKind, ...] = get_args(ReportKind)

ALLOWED_DECISIONS: dict[ConflictKind, tuple[Decision, ...]] = {
    "content_differs": ("keep_local", "keep_remote", "skip"),
    "edited_here_deleted_there": ("keep_local", "skip"),
    "deleted_here_edited_there": ("keep_remote", "skip"),
    "type_conflict": ("skip",),
}
"""Decisions per conflict kind (docs/design.md section 7); any other decision is refused."""

DEFAULT_ENTRY_CAP = 100_000
"""Sync plans hold at most this many files per side, and as many folders (docs/design.md
section 9, "Caps"; counting files only: docs/decisions/0024-sync-plans.md)."""

PLAN_FORMAT = "placet-plan v1"
"""Version tag of `SyncPlan.to_dict()`; a reader refuses any other (every stored
format is versioned so that a change invalidates instead of misreading)."""


class EmptySideRefused(PlacetError, code="empty_side"):
    """Planning stopped: one side listed empty while a baseline exists, or a listing failed.

    Codes: `empty_side` (a side is empty; perhaps the wrong folder, or an unmounted
    disk), `listing_incomplete` (a listing failed; retryable). The override is
    `allow_empty_side=true` (docs/design.md section 7).
    """


@dataclass(frozen=True, slots=True)
class PlanOp:
    """One thing to do, with the evidence the plan saw and the planner's reason.

    `path` is the NFC relative path; the names for I/O are `local_path` (the on-disk
    name) and `remote_path` (the listed remote name, or `path` for a new one).
    `local` / `remote` are the entries the op was planned from (None: absent).
    """

    path: str
    kind: PlanOpKind
    size: int | None
    reason: str
    local: LocalEntry | None = None
    remote: RemoteEntry | None = None

    @property
    def local_path(self) -> str:
        return self.local.raw_path if self.local is not None else self.path

    @property
    def remote_path(self) -> str:
        return self.remote.path if self.remote is not None else self.path


@dataclass(frozen=True, slots=True)
class PlanReport:
    """A path the plan classifies without an op (or with one only after a decision).

    `conflict_kind` and `allowed_decisions` are set for `conflict` only. `digest_type`:
    the type the pair was compared by (None: size only). `blocked_by`: the ancestor
    whose state stopped planning here (type conflict, collision, special or unreadable
    entry). `missing_parents`: remote folders a `keep_local` decision must create first.
    """

    path: str
    kind: ReportKind
    detail: str = ""
    conflict_kind: ConflictKind | None = None
    allowed_decisions: tuple[Decision, ...] = ()
    local: LocalEntry | None = None
    remote: RemoteEntry | None = None
    digest_type: str | None = None
    blocked_by: str | None = None
    missing_parents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """The planner's result: ops (mkdirs first, parents before children, then file ops
    in path order), reports (path order), counts per op and report kind plus
    `upload_bytes`/`download_bytes`/`conflicts`, and SHA-256 fingerprints of the two
    listings the plan was made from (a later listing with another fingerprint means
    the plan is out of date).

    `content`: NFC path -> SHA-256 of the remote file's bytes as placet read them at
    plan time, for the ops (and conflicts) whose remote file has no digest of the
    remote's own (`placet.sync.content`); their evidence is bound to it
    (`RemoteEvidence.read_by_placet`). Empty on remotes that give digests.
    """

    ops: tuple[PlanOp, ...]
    reports: tuple[PlanReport, ...]
    summary: Mapping[str, int]
    local_fingerprint: str
    remote_fingerprint: str
    content: Mapping[str, str] = field(default_factory=dict)

    @property
    def conflicts(self) -> tuple[PlanReport, ...]:
        return tuple(r for r in self.reports if r.kind == "conflict")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, tagged with `PLAN_FORMAT`."""
        return {
            "format": PLAN_FORMAT,
            "ops": [_op_to_dict(o) for o in self.ops],
            "reports": [_report_to_dict(r) for r in self.reports],
            "summary": dict(self.summary),
            "local_fingerprint": self.local_fingerprint,
            "remote_fingerprint": self.remote_fingerprint,
            "content": dict(self.content),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SyncPlan:
        """Inverse of `to_dict`.

        Raises:
            ValueError: the dict is not a `PLAN_FORMAT` plan (stored by another version).
        """
        if d.get("format") != PLAN_FORMAT:
            raise ValueError(f"not a {PLAN_FORMAT!r} plan: format {d.get('format')!r}")
        return cls(
            ops=tuple(_op_from_dict(o) for o in d["ops"]),
            reports=tuple(_report_from_dict(r) for r in d["reports"]),
            summary=dict(d["summary"]),
            local_fingerprint=d["local_fingerprint"],
            remote_fingerprint=d["remote_fingerprint"],
            content=dict(d.get("content") or {}),
        )


# A positional constructor for the planner's skips, the bulk of a plan's reports: it
# sets the slots through their descriptors, as `placet.sync.entries.new_local_entry`
# does and for the same reason (five times faster than the frozen `__init__`).
_new = object.__new__
_P = {n: PlanReport.__dict__[n].__set__ for n in PlanReport.__slots__}
_p_path, _p_kind, _p_detail, _p_ck, _p_allowed = (_P[n] for n in PlanReport.__slots__[:5])
_p_local, _p_remote, _p_dtype, _p_blocked, _p_missing = (_P[n] for n in PlanReport.__slots__[5:])


def new_report(
    path: str,
    kind: ReportKind,
    detail: str,
    conflict_kind: ConflictKind | None,
    allowed_decisions: tuple[Decision, ...],
    local: LocalEntry | None,
    remote: RemoteEntry | None,
    digest_type: str | None,
    blocked_by: str | None,
    missing_parents: tuple[str, ...],
) -> PlanReport:
    """`PlanReport(...)` with every field, fast (see above)."""
    e: PlanReport = _new(PlanReport)
    _p_path(e, path)
    _p_kind(e, kind)
    _p_detail(e, detail)
    _p_ck(e, conflict_kind)
    _p_allowed(e, allowed_decisions)
    _p_local(e, local)
    _p_remote(e, remote)
    _p_dtype(e, digest_type)
    _p_blocked(e, blocked_by)
    _p_missing(e, missing_parents)
    return e


def _sides_to_dict(local: LocalEntry | None, remote: RemoteEntry | None) -> dict[str, Any]:
    return {
        "local": local.to_dict() if local is not None else None,
        "remote": remote.to_dict() if remote is not None else None,
    }


def _sides_from_dict(d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "local": LocalEntry.from_dict(d["local"]) if d.get("local") else None,
        "remote": RemoteEntry.from_dict(d["remote"]) if d.get("remote") else None,
    }


def _op_to_dict(o: PlanOp) -> dict[str, Any]:
    return {"path": o.path, "kind": o.kind, "size": o.size, "reason": o.reason} | (
        _sides_to_dict(o.local, o.remote)
    )


def _op_from_dict(d: Mapping[str, Any]) -> PlanOp:
    return PlanOp(
        path=d["path"], kind=d["kind"], size=d["size"], reason=d["reason"], **_sides_from_dict(d)
    )


def _report_to_dict(r: PlanReport) -> dict[str, Any]:
    return {
        "path": r.path,
        "kind": r.kind,
        "detail": r.detail,
        "conflict_kind": r.conflict_kind,
        "allowed_decisions": list(r.allowed_decisions),
        "digest_type": r.digest_type,
        "blocked_by": r.blocked_by,
        "missing_parents": list(r.missing_parents),
    } | _sides_to_dict(r.local, r.remote)


def _report_from_dict(d: Mapping[str, Any]) -> PlanReport:
    return PlanReport(
        path=d["path"],
        kind=d["kind"],
        detail=d["detail"],
        conflict_kind=d["conflict_kind"],
        allowed_decisions=tuple(d["allowed_decisions"]),
        digest_type=d["digest_type"],
        blocked_by=d["blocked_by"],
        missing_parents=tuple(d["missing_parents"]),
        **_sides_from_dict(d),
    )


__all__ = [
    "ALLOWED_DECISIONS",
    "DEFAULT_ENTRY_CAP",
    "OP_KINDS",
    "PLAN_FORMAT",
    "REPORT_KINDS",
    "ConflictKind",
    "Decision",
    "EmptySideRefused",
    "PlanOp",
    "PlanOpKind",
    "PlanReport",
    "ReportKind",
    "SyncPlan",
    "new_report",
]
