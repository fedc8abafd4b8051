"""The values the sync planner reads: the two listings' entries and the baseline.

What a listing holds is decided here, apart from what a plan holds (`placet.sync.model`),
because the listings are built by three hot loops of their own (the indexer, the remote
listing, the baseline store) that need only these types. They are frozen, slotted
dataclasses rather than pydantic models because 100,000 of them are built per side per
plan (docs/design.md section 8); the positional `new_*` constructors below build them faster
still, for those loops.

Paths are POSIX, relative to the synced folder on each side, NFC-normalised (docs/design.md
section 7). `LocalEntry.raw_path` keeps the name as it is on disk (maybe NFD, maybe not
valid UTF-8 as surrogate escapes) because that is the name I/O must use;
`RemoteEntry.path` is what the drive listed, and the name ops address on the remote.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, Self

LocalKind = Literal["file", "dir", "skipped", "error"]
RemoteKind = Literal["file", "dir"]


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


class CapabilityFlags(Protocol):
    """What the planner needs from a drive's capability flags (the drive is
    an interface with capability flags). `placet.drive.base.Capabilities` satisfies it; so
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


class _Entry:
    """A listing or baseline entry's dict form, the shape stored plans and baselines
    keep: each field by name (the dataclass's slots, in order), and back."""

    __slots__: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class LocalEntry(_Entry):
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
class RemoteEntry(_Entry):
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
        d = {f: getattr(self, f) for f in self.__slots__}  # as `_Entry.to_dict`
        d["digests"] = dict(self.digests)  # a `OneDigest` is no JSON value
        return d


@dataclass(frozen=True, slots=True)
class BaselineEntry(_Entry):
    """What a path held on both sides after the last sync that touched it.

    Written for `done` ops and for skips verified by digest (docs/design.md section 7).
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


_new = object.__new__
_L = {n: LocalEntry.__dict__[n].__set__ for n in LocalEntry.__slots__}
_R = {n: RemoteEntry.__dict__[n].__set__ for n in RemoteEntry.__slots__}
_l_path, _l_raw, _l_kind, _l_size, _l_mtime = (_L[n] for n in LocalEntry.__slots__[:5])
_l_sha, _l_dtype, _l_digest, _l_verified, _l_note = (_L[n] for n in LocalEntry.__slots__[5:])
_r_path, _r_kind, _r_size, _r_mtime, _r_digests = (_R[n] for n in RemoteEntry.__slots__)

# Positional constructors for the hot loops (the indexer, the remote listing; the
# planner's skips use `placet.sync.model.new_report`, built the same way) that set the
# slots through their descriptors. The dataclasses' own `__init__` goes through
# `object.__setattr__` once per field (what `frozen` needs), five times slower: 2.2 us
# against 0.44 us per `RemoteEntry` (measured), a quarter of a second per 100,000
# entries on each side of a plan. The result is the same value (same type, equality,
# repr); every field must be given, in order.


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
