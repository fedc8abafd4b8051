"""Classification of one path: its local entry, remote entry and baseline in, one op or report out.

This is the table of docs/design.md section 7, path by path; `placet.sync.march` feeds
it the keys in sorted order (parents first). No op deletes: a path gone from one side is
reported, and a conflict if the other side changed. One side changed since the baseline
is a fast-forward, both a conflict. Equality needs a digest of the strongest common type;
without one, equal sizes are `unverified`, never `skip`. A type conflict, a name
collision, a special file or an unreadable folder blocks everything beneath it. Missing
remote folders get `mkdir` ops, parents first. A path gets an op only if the executor
would accept its names (this module calls `placet.paths`' own checks, so the rule cannot
drift); one that fails is `skipped_special`, while equal files stay `skip`."""

from __future__ import annotations

from collections.abc import Callable

from placet.errors import PathRefused
from placet.paths.local import check_local_shape
from placet.paths.remote import check_name, check_remote_path
from placet.schema import DIGEST_PREFERENCE
from placet.sync.digests import choose_digest_type, compare
from placet.sync.entries import (
    BaselineEntry,
    CapabilityFlags,
    LocalEntry,
    RemoteEntry,
    nfc,
    parse_rfc3339_ns,
)
from placet.sync.model import (
    ALLOWED_DECISIONS,
    ConflictKind,
    PlanOp,
    PlanOpKind,
    PlanReport,
    ReportKind,
    new_report,
)

SkipSink = Callable[[str, LocalEntry, RemoteEntry, str | None], None]
"""Takes a skip of a path on both sides instead of a `PlanReport`: (path, local entry,
remote entry, the digest type they were found equal by; None for two folders)."""

MAX_PLAN_PATH_CHARS = 255
"""Paths longer than this (characters) get the whole-path checks too (see `unusable`)."""
MAX_PLAN_DEPTH = 8
"""Paths with this many `/` or more get the whole-path checks too (see `unusable`)."""


class Classifier:
    """One planning run's state: the keyed entries and baseline it reads (the folders
    on the merge's path, kept by `placet.sync.march`) and the ops and reports it
    builds."""

    def __init__(self, capabilities: CapabilityFlags) -> None:
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
        # Where skips of a path on both sides go instead of `reports` (see
        # `placet.sync.planner.plan`), and how many went there.
        self.on_skip: SkipSink | None = None
        self.skips_sunk = 0

    def unusable(self, local_path: str, remote_path: str) -> str | None:
        """Why the executor would refuse an op on these names, or None if it would not
        (see the module docstring: `placet.paths`' own checks, called, not copied).

        Each segment is checked once per plan by both rules (`check_name`, the remote
        one, and `check_local_shape` on the segment alone; memoised: a plan of 100,000
        new files repeats its folder names 100,000 times). The whole-path calls, which
        add only the total length and depth limits, run for paths past `MAX_PLAN_PATH_CHARS`
        characters or `MAX_PLAN_DEPTH` levels, below every such limit of `placet.paths.local`
        (`tests/sync/test_names.py` checks that this stays so)."""
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
        if max(len(remote_path), len(local_path)) > MAX_PLAN_PATH_CHARS or (
            max(remote_path.count("/"), local_path.count("/")) >= MAX_PLAN_DEPTH
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

    def not_proven_equal(
        self,
        path: str,
        lo: LocalEntry,
        r: RemoteEntry,
        dtype: str | None,
        equal: bool | None,
        unverified: str,
        differs_because: str,
    ) -> None:
        """A file on both sides that neither side changed (or no sync saw), not shown
        equal: `unverified` (that detail) when no digest compared them (`equal` None),
        else a `content_differs` conflict ("<dtype> differs" + `differs_because`)."""
        if equal is None:
            self.report(path, "unverified", unverified, local=lo, remote=r)
        else:
            self.conflict(
                path,
                "content_differs",
                _differs(dtype) + differs_because,
                lo,
                r,
                digest_type=dtype,
            )

    def both_files(
        self, path: str, lo: LocalEntry, r: RemoteEntry, b: BaselineEntry | None
    ) -> None:
        dtype, equal = compare(lo, r)
        if equal and self.on_skip is not None:
            self.on_skip(path, lo, r, dtype)
            self.skips_sunk += 1
            return
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
            self.not_proven_equal(
                path,
                lo,
                r,
                dtype,
                equal,
                f"same size ({lo.size} bytes), content not compared{why}",
                ", no previous sync",
            )
            return
        local_same = lo.sha256 is not None and lo.sha256 == (b.sha256 or "").lower()
        remote_same = self.remote_same_as_base(r, b)
        if local_same and remote_same:
            self.not_proven_equal(
                path,
                lo,
                r,
                dtype,
                equal,
                f"unchanged on both sides since the last sync by size and mtime{why}",
                " although neither side changed since the last sync",
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
            if self.on_skip is not None:
                self.on_skip(path, lo, r, None)
                self.skips_sunk += 1
            else:
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
            self.pending_dirs.append(key)  # mkdir or deleted_remote: `finish_dir`, later
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

    def finish_dir(self, key: str) -> None:
        """Decide one local folder the remote lacks (a key `local_only` set aside), once
        everything beneath it is classified: `mkdir`, unless the baseline says the remote
        deleted it and no new upload needs it (then `deleted_remote`)."""
        lo = self.loc[key]
        b = self.base.get(key)
        needed = key in self.needed_dirs
        self.needed_dirs.discard(key)  # nothing beneath asks again
        if (needed or b is None or b.sha256 is not None) and self.refused(lo.path, lo, None):
            return
        if needed:
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


_SAME: dict[str | None, str] = {t: f"same {t}" for t in (None, *DIGEST_PREFERENCE)}
"""The detail of a skip, one shared string per digest type."""


def _differs(dtype: str | None) -> str:
    return f"{dtype} differs" if dtype else "sizes differ"
