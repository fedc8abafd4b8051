"""The pure sync planner: two listings and a baseline in, a `SyncPlan` out.

It implements the table of docs/design.md section 7 and nothing else: no I/O, no clock,
no randomness, so the same inputs give the same plan and tests call it directly.
`placet.sync.listings` keys the listings, `placet.sync.classify` classifies each path,
and this module guards the run and assembles the plan. With a baseline, an empty side or
a failed listing stops planning (`EmptySideRefused`) unless `allow_empty_side`: that more
often means a wrong path or an unmounted disk than a mass deletion. Paths are classified
in sorted key order, parents first; the plan lists `mkdir` ops first, then file ops in
path order; every path appears exactly once. O(n log n) for the sort, O(n) otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from placet.sync.classify import Classifier, SkipSink
from placet.sync.entries import (
    BaselineEntry,
    CapabilityFlags,
    LocalEntry,
    RemoteEntry,
    gc_paused,
    nfc,
)
from placet.sync.listings import Listings, read_listings
from placet.sync.model import DEFAULT_ENTRY_CAP, OP_KINDS, REPORT_KINDS, EmptySideRefused, SyncPlan

__all__ = ["Listings", "plan", "plan_listings", "read_listings"]


@gc_paused()
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
    listings = read_listings(
        local, remote, capabilities, include_hidden=include_hidden, entry_cap=entry_cap
    )
    return plan_listings(listings, baseline, allow_empty_side=allow_empty_side)


@gc_paused()
def plan_listings(
    listings: Listings,
    baseline: Mapping[str, BaselineEntry],
    *,
    allow_empty_side: bool = False,
    on_skip: SkipSink | None = None,
    consume: bool = False,
) -> SyncPlan:
    """The second half of `plan`: classify `read_listings`' result against `baseline`
    (may be called more than once on the same listings).

    `on_skip`: the skips of paths on both sides (equal files, folders) go there instead
    of into the plan's reports, which then hold every other report; the summary counts
    them all the same. A caller that stores only what a skip adds to the baseline
    (`placet.sync.service`) keeps no report per equal file (112 bytes each, 112 MB at
    1,000,000 files). `consume`: the listings are used up (not planned again): each
    file on both sides is dropped from them once classified, so with `on_skip` the
    entries of equal files are freed as the plan goes (the op or report of a file that
    gets one keeps its entries).

    Raises:
        EmptySideRefused: `empty_side`, unless `allow_empty_side`.
    """
    pl = Classifier(listings.capabilities)
    pl.on_skip = on_skip
    pl.loc, pl.ldups, pl.rem, pl.rdups = (
        listings._loc,
        listings._ldups,
        listings._rem,
        listings._rdups,
    )
    lfp, rfp = listings.local_fingerprint, listings.remote_fingerprint
    if baseline and not allow_empty_side and (not pl.loc or not pl.rem):
        side = "local" if not pl.loc else "remote"
        raise EmptySideRefused(
            f"stopped planning: the {side} folder lists empty but {len(baseline)} paths "
            "were synced before; check the folder (wrong path? unmounted disk?), or plan "
            "again with allow_empty_side=true",
            details={"side": side, "baseline_entries": len(baseline)},
        )
    pl.base = base = {pl.key(nfc(k)): v for k, v in baseline.items()}
    loc, rem, blocked, dups = pl.loc, pl.rem, pl.blocked, pl.ldups.keys() | pl.rdups.keys()
    # The keys as one list, not a set union then a sorted list: a set of 1,000,000 keys
    # is ~32 MiB more at the plan's peak (the local keys come in path order, so the
    # sort is mostly a merge).
    keys = list(loc)
    keys += [k for k in rem if k not in loc]
    keys.sort()
    for i, key in enumerate(keys):
        if consume:
            keys[i] = ""  # the key string goes with its entries (below)
        lo, r = loc.get(key), rem.get(key)
        # Fast path for the bulk of a tree: a file on both sides, nothing unusual above it.
        if (
            lo is not None
            and r is not None
            and lo.kind == "file"
            and r.kind == "file"
            and lo.sha256 is not None
            and key not in dups
            and not (blocked and key.rpartition("/")[0] in blocked)
        ):
            b = base.get(key)
            pl.both_files(lo.path, lo, r, b if b is not None and b.sha256 is not None else None)
            if consume:  # no later key looks a file up (only folders, as parents)
                del loc[key], rem[key]
        else:
            pl.classify(key)
    pl.finish_dirs()

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
    return SyncPlan(tuple(pl.mkdirs + pl.ops), tuple(pl.reports), summary, lfp, rfp)
