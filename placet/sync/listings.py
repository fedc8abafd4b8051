"""Reading the two listings for the planner: keys, implied folders, duplicates, caps, fingerprints.

Paths are keyed after NFC, and after case folding on a case-insensitive remote, as those
address one object there; names meeting under one key are duplicates, reported as a
`collision`. Hidden paths are dropped unless asked for; folders a listing implies but
did not list are added. Each side holds at most `entry_cap` files and as many folders
(docs/design.md section 9), counted before keying. Each listing is fingerprinted (SHA-256
of its sorted entries): equal fingerprints, options and baseline give an equal plan, so a
stored one may be reused. Both are hashed before keying, an ordered listing without a
sorted copy (docs/decisions/0026-plan-memory.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, TypeVar

from placet.errors import LimitExceeded
from placet.sync.entries import CapabilityFlags, LocalEntry, OneDigest, RemoteEntry, gc_paused, nfc
from placet.sync.model import DEFAULT_ENTRY_CAP
from placet.sync.sharing import share_pair

_E = TypeVar("_E", LocalEntry, RemoteEntry)
"""A listing's entry type: `_read` serves both sides."""
_RAW_PATH: Callable[[LocalEntry], str] = attrgetter("raw_path")
_PATH: Callable[[RemoteEntry], str] = attrgetter("path")
PRESIZE_SHARE = 0.5
"""The remote dict starts as the local keys (`_read`) when the remote lists at least this
share of the local entries (fewer: most of those keys would be dropped again)."""


def _shown(e: LocalEntry | RemoteEntry, include_hidden: bool) -> bool:
    """Whether `e` is planned: no component of its NFC path starts with "." unless
    `include_hidden`."""
    if include_hidden:
        return True
    p = e.path if e.path.isascii() else nfc(e.path)
    return not (p[:1] == "." or "/." in p)


def _check(
    entries: Sequence[_E], include_hidden: bool, cap: int, side: str, order: Callable[[_E], str]
) -> tuple[bool, bool]:
    """Count the planned entries against `cap`; (whether they come in `order`'s order,
    non-decreasing, so the fingerprint can hash them as they are; whether every entry
    is planned, none hidden).

    Raises:
        LimitExceeded: more than `cap` files (or folders) on `side`.
    """
    files = dirs = 0
    ordered, last, every = True, "", True
    for e in entries:
        if not include_hidden:
            p = e.path if e.path.isascii() else nfc(e.path)
            if p[:1] == "." or "/." in p:  # a component starts with "."
                every = False
                continue
        if e.kind == "dir":
            dirs += 1
            if dirs > cap:
                raise _cap_error(side, cap, "folders")
        else:
            files += 1
            if files > cap:
                raise _cap_error(side, cap, "files")
        if ordered:
            k = order(e)
            ordered, last = k >= last, k
    return ordered, every


def _in_order(
    entries: Sequence[_E], include_hidden: bool, order: Callable[[_E], str], side: str, cap: int
) -> Iterable[_E]:
    """The planned entries sorted by `order` (a stable sort: equal names keep their
    listed order), after the entry cap is checked (`_check`). Entries already in order
    are read as they are, not copied: a sorted copy of 1,000,000 entries and its sort
    keys are ~20 MiB.

    Raises:
        LimitExceeded: more than `cap` files (or folders) on `side`.
    """
    ordered, every = _check(entries, include_hidden, cap, side, order)
    shown = entries if every else (e for e in entries if _shown(e, include_hidden))
    return shown if ordered else sorted(shown, key=order)


def _read(
    entries: Sequence[_E],
    include_hidden: bool,
    ci: bool,
    local: bool,
    keyed_local: dict[str, LocalEntry] | None = None,
    share: bool = False,
) -> tuple[dict[str, _E], dict[str, list[_E]]]:
    """One side's planned entries keyed (NFC, case-folded if `ci`), with implied folders
    added; names that meet under one key go to the duplicates.

    A local entry whose path is not NFC is replaced by one whose `path` is (its
    `raw_path` keeps the on-disk name); a remote entry keeps its listed `path`, the name
    ops address on the remote.

    `keyed_local` (the local listing keyed, for the remote side): when the remote lists
    at least `PRESIZE_SHARE` of the local entries, its dict starts as the local keys
    (`_presized`), so it is never resized beside the local dict: a resize holds the old
    and the new table at once (~15 MiB more at 1,000,000 entries, the plan's peak).
    With `share`, each remote file on both sides takes the local entry's equal strings
    (`placet.sync.sharing.share_pair`).
    """
    by_key: dict[str, _E] = {}
    share_with = keyed_local if share else None
    presized = keyed_local is not None and len(entries) >= len(keyed_local) * PRESIZE_SHARE
    if presized and keyed_local is not None:
        by_key = _presized(keyed_local)
    dups: dict[str, list[_E]] = {}
    find = by_key.get
    for e in entries:
        p = e.path if e.path.isascii() else nfc(e.path)
        if not include_hidden and (p[:1] == "." or "/." in p):  # a component starts with "."
            continue
        if local and p != e.path:
            e = replace(e, path=p)
        k = p.casefold() if ci else p
        first = find(k)
        if first is not None:
            dups.setdefault(k, [first]).append(e)
        else:
            by_key[k] = e
        if share_with is not None and e.kind == "file":
            lo = share_with.get(k)
            if lo is not None and lo.kind == "file" and isinstance(e, RemoteEntry):
                share_pair(lo, e)
    if presized:
        for k in [k for k, v in by_key.items() if v is None]:  # local keys not listed here
            del by_key[k]
    orphans = [k for k in by_key if "/" in k and k.rpartition("/")[0] not in by_key]
    if presized and len(orphans) > 1:
        # In listing order, as an unsized dict holds them: the first orphan beneath a
        # folder names the folder it implies.
        firsts = {id(by_key[k]): k for k in orphans}
        orphans = [firsts[id(e)] for e in entries if id(e) in firsts]
    for k in orphans:
        if k.rpartition("/")[0] not in by_key:  # a sibling may have implied it since
            e = by_key[k]
            if isinstance(e, LocalEntry):
                _imply_parents(by_key, e.path, e.raw_path, ci, local=True)
            else:
                _imply_parents(by_key, nfc(e.path), e.path, ci, local=False)
    return by_key, dups


def _presized(keys: dict[str, LocalEntry]) -> dict[str, Any]:
    """A dict of `keys`' keys, each None: sized for them at once (`dict.fromkeys` of a
    dict allocates its table in one step)."""
    return dict.fromkeys(keys)


def fingerprints(
    local: Sequence[LocalEntry], remote: Sequence[RemoteEntry], include_hidden: bool, cap: int
) -> tuple[str, str]:
    """The two listings' fingerprints, (local, remote): SHA-256 of each side's planned
    entries sorted by name, the on-disk name locally and the listed one on the remote
    (`_fingerprint`). The local side is hashed before the remote one is read, so at most
    one sorted copy exists at a time.

    Raises:
        LimitExceeded: a side has more than `cap` files (or folders).
    """
    local_fp = _fingerprint(
        f"{e.raw_path}\0{e.kind}\0{e.size}\0{e.mtime_ns}\0{e.sha256}\0{e.digest}"
        for e in _in_order(local, include_hidden, _RAW_PATH, "local", cap)
    )
    one = OneDigest
    remote_fp = _fingerprint(
        f"{e.path}\0{e.kind}\0{e.size}\0{e.mtime}\0"
        # One digest (the usual listing): its value, without two method calls.
        f"{d.value if type(d) is one else chr(0).join(d.values())}"
        for e in _in_order(remote, include_hidden, _PATH, "remote", cap)
        for d in (e.digests,)
    )
    return local_fp, remote_fp


def _imply_parents(by_key: dict[str, Any], path: str, raw: str, ci: bool, *, local: bool) -> None:
    """Add the folders a listing implies but did not list (bucket remotes, partial
    local listings), so parent checks see them."""
    parts, raw_parts = path.split("/"), raw.split("/")
    for i in range(len(parts) - 1, 0, -1):
        pp = "/".join(parts[:i])
        pk = pp.casefold() if ci else pp
        if pk in by_key:
            return
        if local:
            by_key[pk] = LocalEntry(pp, "/".join(raw_parts[:i]), "dir", note="implied")
        else:
            by_key[pk] = RemoteEntry("/".join(raw_parts[:i]), "dir")


def _fingerprint(lines: Iterable[str]) -> str:
    """SHA-256 of the lines joined by newlines, hashed in batches: a listing of 100,000
    entries never exists as one string (the lines come sorted by path, so equal
    listings hash alike; duplicate names in another order only cost a re-plan)."""
    h = hashlib.sha256()
    batch: list[str] = []
    first = True
    for line in lines:
        batch.append(line)
        if len(batch) == 4096:
            h.update(
                ("" if first else "\n").encode()
                + "\n".join(batch).encode("utf-8", "surrogateescape")
            )
            batch, first = [], False
    if batch:
        h.update(
            ("" if first else "\n").encode() + "\n".join(batch).encode("utf-8", "surrogateescape")
        )
    return h.hexdigest()


def _cap_error(side: str, cap: int, what: str) -> LimitExceeded:
    return LimitExceeded(
        f"cannot plan: the {side} listing has more than {cap} {what} (the plan entry "
        "cap); plan a smaller folder",
        details={"side": side, "cap": cap, "counted": what},
    )


@dataclass(frozen=True)
class Listings:
    """Both listings read, keyed and fingerprinted (`read_listings`), ready for
    `plan_listings`. The fingerprints identify the listings: equal fingerprints, equal
    options and an equal baseline give an equal plan, so a caller holding a plan made
    from the same fingerprints may reuse it instead of classifying again."""

    capabilities: CapabilityFlags
    local_fingerprint: str
    remote_fingerprint: str
    _loc: dict[str, LocalEntry]
    _ldups: dict[str, list[LocalEntry]]
    _rem: dict[str, RemoteEntry]
    _rdups: dict[str, list[RemoteEntry]]

    def both_files(self) -> Iterator[tuple[LocalEntry, RemoteEntry]]:
        """The (local, remote) entries of every key that is a file on both sides."""
        get = self._rem.get
        for k, lo in self._loc.items():
            r = get(k)
            if r is not None and lo.kind == "file" and r.kind == "file":
                yield lo, r


@gc_paused()
def read_listings(
    local: Iterable[LocalEntry],
    remote: Iterable[RemoteEntry],
    capabilities: CapabilityFlags,
    *,
    include_hidden: bool = False,
    entry_cap: int = DEFAULT_ENTRY_CAP,
    share: bool = False,
    between_sides: Callable[[], object] | None = None,
) -> Listings:
    """The first half of `plan`: NFC (and case-fold) keys, implied folders, duplicate
    names, the entry cap and the fingerprints. `share`: remote entries take their local
    entry's equal path and digest strings (`placet.sync.sharing`; the same values).
    `between_sides`: called once the local listing is keyed, before the remote one (the
    service returns the heap's free pages there: `placet.sync.heap`).

    Raises:
        LimitExceeded: a side has more than `entry_cap` files (or folders).
    """
    ci = bool(capabilities.case_insensitive)
    # Both fingerprints first, then the dicts: a sorted copy of a listing (when it does
    # not come in order) never coexists with the keyed listings, the plan's peak.
    lo_all = local if isinstance(local, (list, tuple)) else list(local)
    re_all = remote if isinstance(remote, (list, tuple)) else list(remote)
    lfp, rfp = fingerprints(lo_all, re_all, include_hidden, entry_cap)
    loc, ldups = _read(lo_all, include_hidden, ci, True)
    if between_sides is not None:
        between_sides()
    rem, rdups = _read(re_all, include_hidden, ci, False, loc, share)
    return Listings(capabilities, lfp, rfp, loc, ldups, rem, rdups)
