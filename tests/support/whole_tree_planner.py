"""A reference planner: both whole listings keyed in two dicts, every key classified in
sorted order. The per-folder merge (`placet.sync.march`) must give exactly its ops and
reports; tests compare the two on generated and hand-made trees.

It is the planner placet shipped while plans held both trees in memory, kept minus its
memory measures (string sharing, heap trimming): NFC (and case-folded) keys, implied
folders, duplicates, the entry cap, then the `Classifier` over the sorted keys."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from placet.sync.classify import Classifier, SkipSink
from placet.sync.entries import BaselineEntry, CapabilityFlags, LocalEntry, RemoteEntry, nfc
from placet.sync.model import DEFAULT_ENTRY_CAP, EmptySideRefused, SyncPlan
from placet.sync.planner import assemble, check_entry_cap

_E = TypeVar("_E", LocalEntry, RemoteEntry)


def _read(
    entries: list[_E], include_hidden: bool, ci: bool, local: bool
) -> tuple[dict[str, _E], dict[str, list[_E]]]:
    by_key: dict[str, Any] = {}
    dups: dict[str, list[Any]] = {}
    for e in entries:
        p = nfc(e.path)
        if not include_hidden and (p[:1] == "." or "/." in p):
            continue
        if local and p != e.path:
            e = replace(e, path=p)
        k = p.casefold() if ci else p
        if k in by_key:
            dups.setdefault(k, [by_key[k]]).append(e)
        else:
            by_key[k] = e
    for k in [k for k in by_key if "/" in k and k.rpartition("/")[0] not in by_key]:
        if k.rpartition("/")[0] in by_key:
            continue
        e = by_key[k]
        path, raw = (e.path, e.raw_path) if isinstance(e, LocalEntry) else (nfc(e.path), e.path)
        parts, raw_parts = path.split("/"), raw.split("/")
        for i in range(len(parts) - 1, 0, -1):
            pp = "/".join(parts[:i])
            pk = pp.casefold() if ci else pp
            if pk in by_key:
                break
            if local:
                by_key[pk] = LocalEntry(pp, "/".join(raw_parts[:i]), "dir", note="implied")
            else:
                by_key[pk] = RemoteEntry("/".join(raw_parts[:i]), "dir")
    return by_key, dups


def whole_tree_plan(
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
    """The plan `placet.sync.plan` gives, made over whole keyed listings (fingerprints
    left empty: this planner is compared on ops, reports and summary)."""
    if had_listing_error and not allow_empty_side:
        raise EmptySideRefused("a listing failed part-way", code="listing_incomplete")
    lo_all, re_all = list(local), list(remote)
    check_entry_cap(lo_all, include_hidden, entry_cap, "local")
    check_entry_cap(re_all, include_hidden, entry_cap, "remote")
    ci = bool(capabilities.case_insensitive)
    pl = Classifier(capabilities)
    pl.on_skip = on_skip
    pl.loc, pl.ldups = _read(lo_all, include_hidden, ci, True)
    pl.rem, pl.rdups = _read(re_all, include_hidden, ci, False)
    if baseline and not allow_empty_side and (not pl.loc or not pl.rem):
        side = "local" if not pl.loc else "remote"
        raise EmptySideRefused(
            f"stopped planning: the {side} folder lists empty",
            details={"side": side, "baseline_entries": len(baseline)},
        )
    pl.base = {pl.key(nfc(k)): v for k, v in baseline.items()}
    for key in sorted(pl.loc.keys() | pl.rem.keys()):
        pl.classify(key)
    for key in pl.pending_dirs:
        pl.finish_dir(key)
    return assemble(pl, "", "")  # mkdirs and ops in sorted key order already
