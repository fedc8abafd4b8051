"""The pure sync planner: two listings and a baseline in, a `SyncPlan` out.

It implements the table of DESIGN.md section 7 and nothing else: no I/O, no clock, no
randomness, so the same inputs always give the same plan, and tests call it directly.
What it decides, and why:

- Paths are matched after NFC normalisation, and after case folding too when the remote
  is case-insensitive, because those are the names that address one object there.
  Two local names that meet under that key are a `collision`: uploading both would
  write one remote object twice, so neither gets an op.
- No op ever deletes. A path gone from one side that the baseline knows is reported
  (`deleted_remote` / `deleted_local`) and left alone; if the other side changed since,
  it is a conflict for the owner.
- A side changed since the baseline while the other did not is a fast-forward
  (`upload_revision` or `download`); both changed is a conflict, never auto-resolved.
- Equality needs a digest: the strongest type both sides have (sha256 > sha1 > md5).
  Without one, equal sizes give `unverified`, never `skip`.
- A file on one side and a folder on the other (`type_conflict`), a collision, a
  special file (symlink, FIFO…) or an unreadable local folder blocks everything beneath
  it: the listing there is not trustworthy, so nothing is planned there.
- Remote folders missing for an upload are created by `mkdir` ops, listed first,
  parents before children.
- A path gets an op (or a conflict, whose decision would give one) only if the executor
  would accept its names: the remote path passes `placet.paths.check_remote_path` and
  every segment `check_name` (no `:`, leading `-`, control characters, placet's
  reserved `.placet-tmp-` prefix...), and the local path `check_local_shape`. The
  planner calls those functions, so the rule cannot drift from the executor's; a path
  that fails is reported `skipped_special` with the refusal, and nothing is done there.
  A file equal on both sides stays `skip` whatever its name: nothing would be done.
- If a baseline exists and one side lists empty, or a listing failed, planning stops
  (`EmptySideRefused`) unless `allow_empty_side`: an empty side more often means a
  wrong path or an unmounted disk than a real mass deletion.

Runs in O(n log n) for the sort and O(n) dict work otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from placet.errors import LimitExceeded, PathRefused
from placet.paths import check_local_shape, check_name, check_remote_path
from placet.sync.digests import choose_digest_type, compare
from placet.sync.model import (
    ALLOWED_DECISIONS,
    DEFAULT_ENTRY_CAP,
    OP_KINDS,
    REPORT_KINDS,
    BaselineEntry,
    Capabilities,
    ConflictKind,
    EmptySideRefused,
    LocalEntry,
    OneDigest,
    PlanOp,
    PlanOpKind,
    PlanReport,
    RemoteEntry,
    ReportKind,
    SyncPlan,
    gc_paused,
    new_report,
    nfc,
    parse_rfc3339_ns,
)

_LONG = 255
"""Paths longer than this (characters) get the whole-path checks too (see `unusable`)."""
_DEEP = 8
"""Paths with this many `/` or more get the whole-path checks too (see `unusable`)."""


class _Planner:
    """One planning run's state; `plan()` is the public entry."""

    def __init__(self, capabilities: Capabilities) -> None:
        self.ci = bool(capabilities.case_insensitive)
        self.precision = max(int(capabilities.modtime_precision_ns or 1), 1)
        self.no_digest = (
            "; the remote offers no digest"
            if not choose_digest_type(capabilities.hash_types)
            else "; the remote gave no digest for it"
        )
        self.ops: list[PlanOp] = []
        self.mkdirs: list[PlanOp] = []
        self.reports: list[PlanReport] = []
        self.blocked: dict[str, tuple[ReportKind, str]] = {}
        self.pending_dirs: list[str] = []
        self.needed_dirs: set[str] = set()
        self.loc: dict[str, LocalEntry] = {}
        self.rem: dict[str, RemoteEntry] = {}
        self.ldups: dict[str, list[LocalEntry]] = {}
        self.rdups: dict[str, list[RemoteEntry]] = {}
        self.base: dict[str, BaselineEntry] = {}
        self._names: dict[str, str] = {}  # segment -> refusal ("" = usable), memoised

    def unusable(self, local_path: str, remote_path: str) -> str | None:
        """Why the executor would refuse an op on these names, or None if it would not
        (see the module docstring: placet.paths' own checks, called, not copied).

        Each segment is checked once per plan by both rules (`check_name`, the remote
        one, and `check_local_shape` on the segment alone; memoised: a plan of 100,000
        new files repeats its folder names 100,000 times). The whole-path calls, which
        add only the total length and depth limits, run for paths past `_LONG`
        characters or `_DEEP` levels, below every such limit of `placet.paths`
        (`tests/test_sync_names.py` checks that this stays so)."""
        names = self._names
        for path in (remote_path,) if local_path == remote_path else (remote_path, local_path):
            for seg in path.split("/"):
                why = names.get(seg)
                if why is None:
                    try:
                        check_name(seg)
                        check_local_shape(seg)
                        why = ""
                    except PathRefused as e:
                        why = e.message
                    names[seg] = why
                if why:
                    return why
        if max(len(remote_path), len(local_path)) > _LONG or (
            max(remote_path.count("/"), local_path.count("/")) >= _DEEP
        ):
            try:
                check_remote_path(remote_path)
                check_local_shape(local_path)
            except PathRefused as e:
                return e.message
        return None

    def refused(
        self,
        path: str,
        local: LocalEntry | None,
        remote: RemoteEntry | None,
    ) -> bool:
        """Report `path` as unusable and return True if its names would be refused."""
        lpath = local.raw_path if local is not None else path
        rpath = remote.path if remote is not None else path
        why = self.unusable(lpath, rpath)
        if why is None:
            return False
        self.report(path, "skipped_special", f"not synced: {why}", local=local, remote=remote)
        return True

    def key(self, path: str) -> str:
        return path.casefold() if self.ci else path

    # ---- reading the listings -------------------------------------------------------

    def read_local(
        self, entries: Iterable[LocalEntry], include_hidden: bool, cap: int
    ) -> tuple[dict[str, LocalEntry], dict[str, list[LocalEntry]], str]:
        by_key: dict[str, LocalEntry] = {}
        dups: dict[str, list[LocalEntry]] = {}
        kept: list[LocalEntry] = []
        files = dirs = 0
        ci = self.ci
        for e in entries:
            p = e.path if e.path.isascii() else nfc(e.path)
            if not include_hidden and (p[:1] == "." or "/." in p):  # a component starts with "."
                continue
            if p != e.path:
                e = replace(e, path=p)
            kept.append(e)
            if e.kind == "dir":
                dirs += 1
                if dirs > cap:
                    raise _cap_error("local", cap, "folders")
            else:
                files += 1
                if files > cap:
                    raise _cap_error("local", cap, "files")
            k = p.casefold() if ci else p
            if k in by_key:
                dups.setdefault(k, [by_key[k]]).append(e)
            else:
                by_key[k] = e
        for k in [k for k in by_key if "/" in k and k.rpartition("/")[0] not in by_key]:
            if k.rpartition("/")[0] not in by_key:  # a sibling may have implied it since
                e = by_key[k]
                self._imply_parents(by_key, e.path, e.raw_path, local=True)
        kept.sort(key=attrgetter("raw_path"))
        lines = (
            f"{e.raw_path}\0{e.kind}\0{e.size}\0{e.mtime_ns}\0{e.sha256}\0{e.digest}" for e in kept
        )
        return by_key, dups, _fingerprint(lines)

    def read_remote(
        self, entries: Iterable[RemoteEntry], include_hidden: bool, cap: int
    ) -> tuple[dict[str, RemoteEntry], dict[str, list[RemoteEntry]], str]:
        by_key: dict[str, RemoteEntry] = {}
        dups: dict[str, list[RemoteEntry]] = {}
        kept: list[RemoteEntry] = []
        files = dirs = 0
        ci = self.ci
        for e in entries:
            p = e.path if e.path.isascii() else nfc(e.path)
            if not include_hidden and (p[:1] == "." or "/." in p):  # a component starts with "."
                continue
            kept.append(e)
            if e.kind == "dir":
                dirs += 1
                if dirs > cap:
                    raise _cap_error("remote", cap, "folders")
            else:
                files += 1
                if files > cap:
                    raise _cap_error("remote", cap, "files")
            k = p.casefold() if ci else p
            if k in by_key:
                dups.setdefault(k, [by_key[k]]).append(e)
            else:
                by_key[k] = e
        for k in [k for k in by_key if "/" in k and k.rpartition("/")[0] not in by_key]:
            if k.rpartition("/")[0] not in by_key:
                e = by_key[k]
                self._imply_parents(by_key, nfc(e.path), e.path, local=False)
        kept.sort(key=attrgetter("path"))
        one = OneDigest
        lines = (
            f"{e.path}\0{e.kind}\0{e.size}\0{e.mtime}\0"
            # One digest (the usual listing): its value, without two method calls.
            f"{d.value if type(d) is one else chr(0).join(d.values())}"
            for e in kept
            for d in (e.digests,)
        )
        return by_key, dups, _fingerprint(lines)

    def _imply_parents(self, by_key: dict[str, Any], path: str, raw: str, *, local: bool) -> None:
        """Add the folders a listing implies but did not list (bucket remotes, partial
        local listings), so parent checks see them."""
        parts, raw_parts = path.split("/"), raw.split("/")
        for i in range(len(parts) - 1, 0, -1):
            pp = "/".join(parts[:i])
            pk = self.key(pp)
            if pk in by_key:
                return
            if local:
                by_key[pk] = LocalEntry(pp, "/".join(raw_parts[:i]), "dir", note="implied")
            else:
                by_key[pk] = RemoteEntry("/".join(raw_parts[:i]), "dir")

    # ---- classification -------------------------------------------------------------

    def report(self, path: str, kind: ReportKind, detail: str, **kw: object) -> None:
        self.reports.append(PlanReport(path, kind, detail, **kw))  # type: ignore[arg-type]

    def conflict(
        self,
        path: str,
        ck: ConflictKind,
        detail: str,
        local: LocalEntry | None,
        remote: RemoteEntry | None,
        **kw: object,
    ) -> None:
        if ck != "type_conflict" and self.refused(path, local, remote):
            return
        self.report(
            path,
            "conflict",
            detail,
            conflict_kind=ck,
            allowed_decisions=ALLOWED_DECISIONS[ck],
            local=local,
            remote=remote,
            **kw,
        )

    def op(
        self,
        path: str,
        kind: PlanOpKind,
        reason: str,
        local: LocalEntry | None,
        remote: RemoteEntry | None,
    ) -> None:
        if self.refused(path, local, remote):
            return
        if kind == "download":
            size = remote.size if remote is not None else None
        else:
            size = local.size if local is not None else None
        self.ops.append(PlanOp(path, kind, size, reason, local, remote))

    def remote_same_as_base(self, r: RemoteEntry, b: BaselineEntry) -> bool:
        """Has the remote file stayed what the baseline recorded? By digest when both
        have one, else by size and mtime within the remote's precision."""
        if b.remote_digest_type and b.remote_digest:
            rv = r.digests.get(b.remote_digest_type)
            if rv:
                return rv.lower() == b.remote_digest.lower()
        rv = r.digests.get("sha256")
        if rv and b.sha256:
            return rv.lower() == b.sha256.lower()
        if b.size is None or r.size != b.size:
            return False
        if b.mtime == r.mtime:
            return True
        t1, t2 = parse_rfc3339_ns(b.mtime), parse_rfc3339_ns(r.mtime)
        return t1 is not None and t2 is not None and abs(t1 - t2) < self.precision

    def both_files(
        self, path: str, lo: LocalEntry, r: RemoteEntry, b: BaselineEntry | None
    ) -> None:
        dtype, equal = compare(lo, r)
        if equal:  # the common case, kept free of keyword-argument overhead
            self.reports.append(
                new_report(
                    path,
                    "skip",
                    _SAME.get(dtype) or f"same {dtype}",
                    None,
                    (),
                    lo,
                    r,
                    dtype,
                    None,
                    (),
                )
            )
            return
        why = "" if equal is False else self.no_digest
        if b is None:
            if equal is None:
                self.report(
                    path,
                    "unverified",
                    f"same size ({lo.size} bytes), content not compared{why}",
                    local=lo,
                    remote=r,
                )
            else:
                self.conflict(
                    path,
                    "content_differs",
                    _differs(dtype) + ", no previous sync",
                    lo,
                    r,
                    digest_type=dtype,
                )
            return
        local_same = lo.sha256 is not None and lo.sha256 == (b.sha256 or "").lower()
        remote_same = self.remote_same_as_base(r, b)
        if local_same and remote_same:
            if equal is None:
                self.report(
                    path,
                    "unverified",
                    f"unchanged on both sides since the last sync by size and mtime{why}",
                    local=lo,
                    remote=r,
                )
            else:
                self.conflict(
                    path,
                    "content_differs",
                    _differs(dtype) + " although neither side changed since the last sync",
                    lo,
                    r,
                    digest_type=dtype,
                )
        elif remote_same:
            self.op(path, "upload_revision", "changed here since the last sync", lo, r)
        elif local_same:
            self.op(path, "download", "changed on the remote since the last sync", lo, r)
        else:
            self.conflict(
                path,
                "content_differs",
                f"changed on both sides since the last sync{why}",
                lo,
                r,
                digest_type=dtype,
            )

    def classify(self, key: str) -> None:
        """Classify one key; called in sorted key order, so parents come first."""
        lo, r, b = self.loc.get(key), self.rem.get(key), self.base.get(key)
        ldups, rdups = self.ldups, self.rdups
        if lo is not None:
            path = lo.path
        else:
            assert r is not None
            path = nfc(r.path)
        parent = key.rpartition("/")[0]
        blk = self.blocked.get(parent) if parent else None
        if blk is not None:
            self.report(
                path, blk[0], f"not planned: see {blk[1]!r}", local=lo, remote=r, blocked_by=blk[1]
            )
            self.blocked[key] = blk
            return
        if key in ldups or key in rdups:
            names = [e.raw_path for e in ldups.get(key, ())] + [e.path for e in rdups.get(key, ())]
            for p in sorted({e.path for e in ldups.get(key, ())} or {path}):
                detail = f"names that address one object on the remote: {names!r}"
                self.report(p, "collision", detail, local=lo, remote=r)
            self.blocked[key] = ("collision", path)
            return
        file_base = b if b is not None and b.sha256 is not None else None
        if lo is not None and lo.kind in ("skipped", "error"):
            rk: ReportKind = "skipped_special" if lo.kind == "skipped" else "error"
            self.report(path, rk, lo.note, local=lo, remote=r)
            self.blocked[key] = (rk, path)
        elif lo is not None and lo.kind == "file" and lo.sha256 is None:
            self.report(
                path, "error", lo.note or "the local file was not hashed", local=lo, remote=r
            )
        elif r is None:
            assert lo is not None
            self.local_only(key, path, lo, file_base)
        elif lo is None:
            self.remote_only(path, r, b)
        elif lo.kind == "dir" and r.kind == "dir":
            self.report(path, "skip", "folder on both sides", local=lo, remote=r)
        elif lo.kind == "dir" or r.kind == "dir":
            what = "a folder here and a file" if lo.kind == "dir" else "a file here and a folder"
            self.conflict(path, "type_conflict", f"{what} on the remote", lo, r)
            self.blocked[key] = ("skip", path)
        else:
            self.both_files(path, lo, r, file_base)

    def local_only(
        self,
        key: str,
        path: str,
        lo: LocalEntry,
        b: BaselineEntry | None,
    ) -> None:
        if lo.kind == "dir":
            self.pending_dirs.append(key)  # mkdir or deleted_remote: decided by finish_dirs
        elif b is None:
            self.op(path, "upload", "new here", lo, None)
            self.needed_dirs.update(self.missing_parents(key))
        elif lo.sha256 == (b.sha256 or "").lower():
            self.report(
                path,
                "deleted_remote",
                "deleted on the remote since the last sync; not uploaded again",
                local=lo,
            )
        else:
            missing = tuple(self.loc[k].path for k in reversed(self.missing_parents(key)))
            self.conflict(
                path,
                "edited_here_deleted_there",
                "changed here, deleted on the remote since the last sync",
                lo,
                None,
                missing_parents=missing,
            )

    def remote_only(self, path: str, r: RemoteEntry, b: BaselineEntry | None) -> None:
        if r.kind == "dir":
            if b is not None and b.sha256 is None:
                self.report(
                    path, "deleted_local", "folder deleted here since the last sync", remote=r
                )
            else:
                self.report(
                    path,
                    "skip",
                    "folder only on the remote; downloads beneath it create it here",
                    remote=r,
                )
        elif b is None or b.sha256 is None:
            self.op(path, "download", "new on the remote", None, r)
        elif self.remote_same_as_base(r, b):
            self.report(
                path,
                "deleted_local",
                "deleted here since the last sync; not downloaded again",
                remote=r,
            )
        else:
            self.conflict(
                path,
                "deleted_here_edited_there",
                "deleted here, changed on the remote since the last sync",
                None,
                r,
            )

    def finish_dirs(self) -> None:
        """Local folders the remote lacks: `mkdir`, unless the baseline says the remote
        deleted it and no new upload needs it (then `deleted_remote`)."""
        for key in self.pending_dirs:
            lo = self.loc[key]
            b = self.base.get(key)
            if (key in self.needed_dirs or b is None or b.sha256 is not None) and self.refused(
                lo.path, lo, None
            ):
                continue
            if key in self.needed_dirs:
                self.mkdirs.append(PlanOp(lo.path, "mkdir", None, "parent of new uploads", lo))
            elif b is None or b.sha256 is not None:
                self.mkdirs.append(PlanOp(lo.path, "mkdir", None, "new folder here", lo))
            else:
                self.report(
                    lo.path,
                    "deleted_remote",
                    "folder deleted on the remote since the last sync; not created again",
                    local=lo,
                )

    def missing_parents(self, key: str) -> list[str]:
        """Keys of the ancestors of `key` that the remote lacks, nearest first."""
        out: list[str] = []
        parent = key.rpartition("/")[0]
        while parent and parent not in self.rem:
            out.append(parent)
            parent = parent.rpartition("/")[0]
        return out


_SAME = {t: f"same {t}" for t in (None, "sha256", "sha1", "md5")}
"""The detail of a skip, one shared string per digest type."""


def _differs(dtype: str | None) -> str:
    return f"{dtype} differs" if dtype else "sizes differ"


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

    capabilities: Capabilities
    local_fingerprint: str
    remote_fingerprint: str
    _loc: dict[str, LocalEntry]
    _ldups: dict[str, list[LocalEntry]]
    _rem: dict[str, RemoteEntry]
    _rdups: dict[str, list[RemoteEntry]]


@gc_paused()
def read_listings(
    local: Iterable[LocalEntry],
    remote: Iterable[RemoteEntry],
    capabilities: Capabilities,
    *,
    include_hidden: bool = False,
    entry_cap: int = DEFAULT_ENTRY_CAP,
) -> Listings:
    """The first half of `plan`: NFC (and case-fold) keys, implied folders, duplicate
    names, the entry cap and the fingerprints.

    Raises:
        LimitExceeded: a side has more than `entry_cap` files (or folders).
    """
    pl = _Planner(capabilities)
    loc, ldups, lfp = pl.read_local(local, include_hidden, entry_cap)
    rem, rdups, rfp = pl.read_remote(remote, include_hidden, entry_cap)
    return Listings(capabilities, lfp, rfp, loc, ldups, rem, rdups)


@gc_paused()
def plan(
    local: Iterable[LocalEntry],
    remote: Iterable[RemoteEntry],
    baseline: Mapping[str, BaselineEntry],
    capabilities: Capabilities,
    *,
    include_hidden: bool = False,
    allow_empty_side: bool = False,
    had_listing_error: bool = False,
    entry_cap: int = DEFAULT_ENTRY_CAP,
) -> SyncPlan:
    """Classify every path of two listings against the baseline (DESIGN.md section 7).

    Args:
        local: the local folder's entries (`index_local`), paths relative to it.
        remote: the remote folder's entries, paths relative to it.
        baseline: last synced state per NFC path (see `BaselineEntry`).
        capabilities: the remote's `hash_types`, `case_insensitive`, `modtime_precision_ns`.
        include_hidden: also plan paths with a component starting with ".".
        allow_empty_side: plan even if a side is empty while a baseline exists, or a
            listing failed.
        had_listing_error: the caller's listing of either side failed part-way.
        entry_cap: most files per side, and most folders per side (DESIGN.md section
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
) -> SyncPlan:
    """The second half of `plan`: classify `read_listings`' result against `baseline`
    (may be called more than once on the same listings).

    Raises:
        EmptySideRefused: `empty_side`, unless `allow_empty_side`.
    """
    pl = _Planner(listings.capabilities)
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
    for key in sorted(loc.keys() | rem.keys()):
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
    summary["upload_bytes"], summary["download_bytes"] = up, down
    return SyncPlan(tuple(pl.mkdirs + pl.ops), tuple(pl.reports), summary, lfp, rfp)
