"""The pure sync planner: two listings and a baseline in, a `SyncPlan` out.

It implements the table of docs/design.md section 7 and nothing else: no I/O, no clock,
no randomness, so the same inputs give the same plan and tests call it directly. The
listings are merged folder by folder (`placet.sync.march`), each path classified by
`placet.sync.classify`; `assemble` turns the classifier's results into the plan, which
the service (`placet.sync.service`, reading both trees as it goes) shares. With a
baseline, an empty side or a failed listing stops planning (`EmptySideRefused`) unless
`allow_empty_side`: that more often means a wrong path or an unmounted disk than a mass
deletion. The plan lists `mkdir` ops first, parents first, then file ops in path order,
reports in path order; every path appears exactly once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from placet.sync.classify import Classifier, SkipSink
from placet.sync.entries import BaselineEntry, CapabilityFlags, LocalEntry, RemoteEntry, nfc
from placet.sync.march import HeldBaseline, March, cap_error, hidden
from placet.sync.model import DEFAULT_ENTRY_CAP, OP_KINDS, REPORT_KINDS, EmptySideRefused, SyncPlan

__all__ = ["assemble", "check_entry_cap", "plan"]

_E = TypeVar("_E", LocalEntry, RemoteEntry)


class _Listed(Generic[_E]):
    """One side's whole listing, handed over by the caller, grouped by folder key for
    the merge, with the folders it implies but did not list (bucket remotes, partial
    listings) added: each named after the first entry beneath it."""

    def __init__(self, entries: Sequence[_E], ci: bool, include_hidden: bool, made: set[int]):
        self.groups: dict[str, list[_E]] = {}
        firsts: dict[str, _E] = {}
        for e in entries:
            p = nfc(e.path)
            if not include_hidden and hidden(p):
                continue
            k = p.casefold() if ci else p
            self.groups.setdefault(k.rpartition("/")[0], []).append(e)
            firsts.setdefault(k, e)
        for k, e in list(firsts.items()):
            if "/" in k and k.rpartition("/")[0] not in firsts:
                self._imply(firsts, e, ci, made)

    def _imply(self, firsts: dict[str, _E], e: _E, ci: bool, made: set[int]) -> None:
        if isinstance(e, LocalEntry):
            path, raw = nfc(e.path), e.raw_path
        else:
            path, raw = nfc(e.path), e.path
        parts, raw_parts = path.split("/"), raw.split("/")
        for i in range(len(parts) - 1, 0, -1):
            pp = "/".join(parts[:i])
            pk = pp.casefold() if ci else pp
            if pk in firsts:
                return
            folder: LocalEntry | RemoteEntry
            if isinstance(e, LocalEntry):
                folder = LocalEntry(pp, "/".join(raw_parts[:i]), "dir", note="implied")
            else:
                folder = RemoteEntry("/".join(raw_parts[:i]), "dir")
            made.add(id(folder))
            firsts[pk] = folder
            self.groups.setdefault(pk.rpartition("/")[0], []).append(folder)

    def open(self, folder: LocalEntry) -> LocalEntry:
        return folder

    def listing(self, key: str, folders: Sequence[_E]) -> list[_E]:
        return self.groups.pop(key, [])

    def done(self, folders: Sequence[_E]) -> None:
        pass


def check_entry_cap(entries: Sequence[_E], include_hidden: bool, cap: int, side: str) -> None:
    """Count a side's planned entries against `cap` before planning starts.

    Raises:
        LimitExceeded: more than `cap` files (or folders) on `side`.
    """
    files = dirs = 0
    for e in entries:
        if not include_hidden and hidden(nfc(e.path)):
            continue
        if e.kind == "dir":
            dirs += 1
            if dirs > cap:
                raise cap_error(side, cap, "folders")
        else:
            files += 1
            if files > cap:
                raise cap_error(side, cap, "files")


def plan(
    local: Iterable[LocalEntry],
    remote: Iterable[RemoteEntry],
    baseline: Mapping[str, BaselineEntry],
    capabilities: CapabilityFlags,
    *,
    include_hidden: bool = False,
    allow_empty_side: bool = False,
    had_listing_error: bool = False,
    entry_cap: int = DEFAULT_ENTRY_CAP,
    on_skip: SkipSink | None = None,
) -> SyncPlan:
    """Classify every path of two listings against the baseline (docs/design.md section 7).

    Args:
        local: the local folder's entries (`index_local`), paths relative to it.
        remote: the remote folder's entries, paths relative to it.
        baseline: last synced state per NFC path (see `BaselineEntry`).
        capabilities: the remote's `hash_types`, `case_insensitive`, `modtime_precision_ns`.
        include_hidden: also plan paths with a component starting with ".".
        allow_empty_side: plan even if a side is empty while a baseline exists, or a
            listing failed.
        had_listing_error: the caller's listing of either side failed part-way.
        entry_cap: most files per side, and most folders per side (docs/design.md section
            9: 100,000; files are what the cap counts, folders have their own).
        on_skip: takes each skip of a path on both sides (equal files, folders) instead
            of the plan's reports; the summary counts them all the same.

    Returns:
        A `SyncPlan`; every path of either listing (and every folder they imply)
        appears exactly once, as an op or a report. Ops never delete.

    Raises:
        EmptySideRefused: `empty_side` or `listing_incomplete`, unless `allow_empty_side`.
        LimitExceeded: a side has more than `entry_cap` files (or folders).
    """
    if had_listing_error and not allow_empty_side:
        raise EmptySideRefused(
            "stopped planning: a listing failed part-way, so absent paths cannot be told "
            "from unlisted ones; retry, or plan again with allow_empty_side=true",
            code="listing_incomplete",
            retryable=True,
        )
    lo_all, re_all = list(local), list(remote)
    check_entry_cap(lo_all, include_hidden, entry_cap, "local")
    check_entry_cap(re_all, include_hidden, entry_cap, "remote")
    pl = Classifier(capabilities)
    pl.on_skip = on_skip
    made: set[int] = set()
    lside = _Listed(lo_all, pl.ci, include_hidden, made)
    rside = _Listed(re_all, pl.ci, include_hidden, made)
    del lo_all, re_all
    base = HeldBaseline(baseline, pl.ci)
    march = March(
        pl, lside, rside, base, include_hidden=include_hidden, entry_cap=entry_cap,
        implied=lambda e: id(e) in made,
        beneath=lambda k: k in lside.groups or k in rside.groups,
    )  # fmt: skip
    march.run(baseline_entries=len(baseline), allow_empty_side=allow_empty_side)
    return assemble(pl, march.local_fp.hexdigest(), march.remote_fp.hexdigest())


def assemble(pl: Classifier, local_fingerprint: str, remote_fingerprint: str) -> SyncPlan:
    """The plan of a finished merge: `mkdir` ops first in key order (parents first),
    then the file ops as classified (key order), the reports in path order, and the
    counts per kind plus the bytes each way."""
    pl.mkdirs.sort(key=lambda o: pl.key(o.path))
    pl.reports.sort(key=lambda r: r.path)
    summary: dict[str, int] = dict.fromkeys((*OP_KINDS, *REPORT_KINDS), 0)
    summary["mkdir"] = len(pl.mkdirs)
    up = down = 0
    for o in pl.ops:
        summary[o.kind] += 1
        if o.kind == "download":
            down += max(o.size or 0, 0)
        else:
            up += o.size or 0
    for rep in pl.reports:
        summary[rep.kind] += 1
    summary["skip"] += pl.skips_sunk
    summary["upload_bytes"], summary["download_bytes"] = up, down
    return SyncPlan(
        tuple(pl.mkdirs + pl.ops), tuple(pl.reports), summary, local_fingerprint, remote_fingerprint
    )
