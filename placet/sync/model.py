"""The values the sync planner reads and returns: listings, baseline, plan.

The plan is a value (STYLE.md): listings are gathered before `plan()`, execution comes
after it, and in between a `SyncPlan` can be shown, stored, confirmed and tested. These
are frozen, slotted dataclasses rather than pydantic models because a plan of 100,000
entries is built in a hot loop (DESIGN.md section 8); validation happens where values
cross a trust boundary, in `to_request_ops` (pydantic `placet.requests.Op`).

Paths are POSIX, relative to the synced folder on each side, NFC-normalised (DESIGN.md
section 7). `LocalEntry.raw_path` keeps the name as it is on disk (maybe NFD, maybe not
valid UTF-8 as surrogate escapes) because that is the name I/O must use;
`RemoteEntry.path` is what the drive listed, and the name ops address on the remote.
"""

from __future__ import annotations

import gc
import unicodedata
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from placet.errors import PlacetError

LocalKind = Literal["file", "dir", "skipped", "error"]
RemoteKind = Literal["file", "dir"]
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
]
ConflictKind = Literal[
    "content_differs", "edited_here_deleted_there", "deleted_here_edited_there", "type_conflict"
]
Decision = Literal["keep_local", "keep_remote", "skip"]

OP_KINDS: tuple[PlanOpKind, ...] = ("mkdir", "upload", "upload_revision", "download")
REPORT_KINDS: tuple[ReportKind, ...] = (
    "skip",
    "unverified",
    "deleted_remote",
    "deleted_local",
    "conflict",
    "collision",
    "skipped_special",
    "error",
)

ALLOWED_DECISIONS: dict[ConflictKind, tuple[Decision, ...]] = {
    "content_differs": ("keep_local", "keep_remote", "skip"),
    "edited_here_deleted_there": ("keep_local", "skip"),
    "deleted_here_edited_there": ("keep_remote", "skip"),
    "type_conflict": ("skip",),
}
"""Decisions per conflict kind (DESIGN.md section 7); any other decision is refused."""

DEFAULT_ENTRY_CAP = 100_000
"""Sync plans hold at most this many files per side, and as many folders (DESIGN.md
section 9, "Caps"; counting files only is docs/decisions.md's choice)."""

PLAN_FORMAT = "placet-plan v1"
"""Version tag of `SyncPlan.to_dict()`; a reader refuses any other (STYLE.md: version
every stored format so a change invalidates instead of misreading)."""


def nfc(path: str) -> str:
    """NFC form of a path (ASCII, the common case, returned as is)."""
    if path.isascii():
        return path
    return unicodedata.normalize("NFC", path)


def parse_rfc3339_ns(s: str | None) -> int | None:
    """RFC 3339 (as rclone prints it, up to 9 fractional digits) to ns since the epoch."""
    if not s:
        return None
    main, frac, tz = s, "", ""
    if "." in s:
        main, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, tz = rest[:i], rest[i:]
    try:
        dt = datetime.fromisoformat(main + (tz or ""))
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None
    return int(dt.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a plan or an index builds its entries.

    Both build 100,000+ small acyclic objects; each burst of allocations triggers
    collections that walk every live object again, about a quarter of the run time
    (measured, docs/performance.md). Nothing built here forms a cycle, so nothing is
    lost by waiting. The collector is re-enabled only if it was enabled on entry, so
    nesting and concurrent callers leave it as they found it, at worst enabled.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class EmptySideRefused(PlacetError):
    """Planning stopped: one side listed empty while a baseline exists, or a listing failed.

    Codes: `empty_side` (a side is empty; perhaps the wrong folder, or an unmounted
    disk), `listing_incomplete` (a listing failed; retryable). The override is
    `allow_empty_side=true` (DESIGN.md section 7).
    """

    code = "empty_side"


class Capabilities(Protocol):
    """What the planner needs from a drive's capability flags (STYLE.md: the drive is an
    interface with capability flags). `placet.drive.base.Capabilities` satisfies it; so
    does `PlanCapabilities` below.

    `hash_types`: rclone hash names the remote offers (lower case); `case_insensitive`:
    names differing only in case address one object; `modtime_precision_ns`: the
    remote's mtime resolution, nanoseconds (None: exact).
    """

    @property
    def hash_types(self) -> Collection[str]: ...

    @property
    def case_insensitive(self) -> bool: ...

    @property
    def modtime_precision_ns(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class PlanCapabilities:
    """A plain `Capabilities` for callers (and tests) without a drive object."""

    hash_types: tuple[str, ...] = ()
    case_insensitive: bool = False
    modtime_precision_ns: int | None = 1_000_000_000


@dataclass(frozen=True, slots=True)
class LocalEntry:
    """One local path as the indexer saw it.

    `kind`: `file` (regular), `dir`, `skipped` (symlink, FIFO, socket, device: never
    opened, `note` says which), `error` (unreadable; `note` says why; a folder in error
    blocks planning beneath it). `size` bytes, `mtime_ns` nanoseconds since the epoch.
    `sha256` of the exact bytes; `digest_type`/`digest` the remote's native type
    computed locally (lower-case hex). `verified`: the digest was read from settled
    bytes (not racily clean, not changed while read) and may be cached.
    """

    path: str
    raw_path: str
    kind: LocalKind
    size: int = 0
    mtime_ns: int = 0
    sha256: str | None = None
    digest_type: str | None = None
    digest: str | None = None
    verified: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LocalEntry:
        return cls(**d)


class OneDigest(Mapping[str, str]):
    """A read-only mapping of exactly one digest type to its hex value.

    What a listing carries per file is usually one digest (the remote's preferred type);
    a dict for it costs 184 bytes, this 56, which is 13 MB over 100,000 files.
    """

    __slots__ = ("digest_type", "value")

    def __init__(self, digest_type: str, value: str) -> None:
        self.digest_type, self.value = digest_type, value

    def __getitem__(self, key: str) -> str:
        if key == self.digest_type:
            return self.value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self.value if key == self.digest_type else default

    def __iter__(self) -> Iterator[str]:
        yield self.digest_type

    def __len__(self) -> int:
        return 1

    def values(self) -> Any:
        return (self.value,)

    def __repr__(self) -> str:
        return f"{{{self.digest_type!r}: {self.value!r}}}"


@dataclass(frozen=True, slots=True)
class RemoteEntry:
    """One remote path as the drive listed it (rclone `lsjson`/`operations/list`).

    `size` bytes (-1: unknown, as rclone reports for some objects); `mtime` RFC 3339 as
    rclone reports it; `digests` maps lower-case rclone hash names to hex in any case.
    An empty `digests` means the remote gave none for this file.
    """

    path: str
    kind: RemoteKind
    size: int = 0
    mtime: str | None = None
    digests: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "size": self.size,
            "mtime": self.mtime,
            "digests": dict(self.digests),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RemoteEntry:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    """What a path held on both sides after the last sync that touched it.

    Written for `done` ops and for skips verified by digest (DESIGN.md section 7).
    `sha256`: the content's SHA-256, or None for a folder. `remote_digest_type` /
    `remote_digest`: the remote's digest then; where the remote had none, `size` and
    `mtime` (the remote's RFC 3339 mtime) stand in, compared within the remote's
    modtime precision.
    """

    path: str
    sha256: str | None
    remote_digest_type: str | None = None
    remote_digest: str | None = None
    size: int | None = None
    mtime: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BaselineEntry:
        return cls(**d)


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
    """

    ops: tuple[PlanOp, ...]
    reports: tuple[PlanReport, ...]
    summary: Mapping[str, int]
    local_fingerprint: str
    remote_fingerprint: str

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
        )


_new = object.__new__
_L = {n: LocalEntry.__dict__[n].__set__ for n in LocalEntry.__slots__}
_R = {n: RemoteEntry.__dict__[n].__set__ for n in RemoteEntry.__slots__}
_P = {n: PlanReport.__dict__[n].__set__ for n in PlanReport.__slots__}
_l_path, _l_raw, _l_kind, _l_size, _l_mtime = (_L[n] for n in LocalEntry.__slots__[:5])
_l_sha, _l_dtype, _l_digest, _l_verified, _l_note = (_L[n] for n in LocalEntry.__slots__[5:])
_r_path, _r_kind, _r_size, _r_mtime, _r_digests = (_R[n] for n in RemoteEntry.__slots__)
_p_path, _p_kind, _p_detail, _p_ck, _p_allowed = (_P[n] for n in PlanReport.__slots__[:5])
_p_local, _p_remote, _p_dtype, _p_blocked, _p_missing = (_P[n] for n in PlanReport.__slots__[5:])

# Positional constructors for the hot loops (the indexer, the remote listing, the
# planner's skips) that set the slots through their descriptors. The dataclasses' own
# `__init__` goes through `object.__setattr__` once per field (what `frozen` needs),
# five times slower: 2.2 us against 0.44 us per `RemoteEntry` (measured), a quarter of
# a second per 100,000 entries on each side of a plan. The result is the same value
# (same type, equality, repr); every field must be given, in order.


def new_local_entry(
    path: str,
    raw_path: str,
    kind: LocalKind,
    size: int,
    mtime_ns: int,
    sha256: str | None,
    digest_type: str | None,
    digest: str | None,
    verified: bool,
    note: str,
) -> LocalEntry:
    """`LocalEntry(...)` with every field, fast (see above)."""
    e: LocalEntry = _new(LocalEntry)
    _l_path(e, path)
    _l_raw(e, raw_path)
    _l_kind(e, kind)
    _l_size(e, size)
    _l_mtime(e, mtime_ns)
    _l_sha(e, sha256)
    _l_dtype(e, digest_type)
    _l_digest(e, digest)
    _l_verified(e, verified)
    _l_note(e, note)
    return e


def new_remote_entry(
    path: str, kind: RemoteKind, size: int, mtime: str | None, digests: Mapping[str, str]
) -> RemoteEntry:
    """`RemoteEntry(...)` with every field, fast (see above)."""
    e: RemoteEntry = _new(RemoteEntry)
    _r_path(e, path)
    _r_kind(e, kind)
    _r_size(e, size)
    _r_mtime(e, mtime)
    _r_digests(e, digests)
    return e


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
