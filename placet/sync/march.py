"""The plan as a per-folder merge of the two listings, the way rclone's `fs/march` walks
two trees: a folder is listed on each side, its names matched by key and classified, its
subfolders entered in turn, so a plan holds the folders on the path it is at, never a
tree (docs/decisions/0026-plan-memory.md).

Keys are NFC paths, case-folded on a case-insensitive remote. A folder's events run in
sorted order: each name at its key, each subfolder's contents at key + "/", so every key
of the trees is classified in sorted order, parents first, as `Classifier` expects. A
local folder is opened when its name is classified (an unreadable one is an `error`
entry then) and listed when entered; the remote side lists folders in the order
`subfolders` predicts; the baseline gives a folder's entries as it is entered. A
local-only folder is decided once everything beneath it is classified. Each side's
fingerprint hashes its entries folder by folder in that order, each folder's lines
sorted."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Generic, Protocol, TypeVar

from placet.errors import LimitExceeded, PathRefused
from placet.sync.classify import Classifier
from placet.sync.entries import BaselineEntry, LocalEntry, OneDigest, RemoteEntry, nfc
from placet.sync.model import EmptySideRefused

_E = TypeVar("_E", LocalEntry, RemoteEntry)
_T = TypeVar("_T")


class LocalSide(Protocol):
    """The local tree as the merge reads it."""

    def open(self, folder: LocalEntry) -> LocalEntry:
        """`folder` (a `dir` entry of a listing) opened for `listing`: the entry as it
        stands now, an `error` entry when it cannot be opened or read."""
        ...

    def listing(self, key: str, folders: Sequence[LocalEntry]) -> list[LocalEntry]:
        """The entries directly in `folders` (opened `dir` entries under `key`; none and
        key "" for the synced folder itself), in listing order."""
        ...

    def done(self, folders: Sequence[LocalEntry]) -> None:
        """Everything beneath `folders` (listed) is classified."""
        ...


class RemoteSide(Protocol):
    """The remote tree as the merge reads it: `listing` is called for the synced folder
    first, then for each folder in the order `subfolders` gives, depth first."""

    def listing(self, key: str, folders: Sequence[RemoteEntry]) -> list[RemoteEntry]:
        """The entries directly in `folders` (the `dir` entries under `key`; none and
        key "" for the synced folder itself), in listing order."""
        ...


class BaselineSide(Protocol):
    """The baseline as the merge reads it."""

    def folder(self, key: str, subfolders: Collection[str]) -> Mapping[str, BaselineEntry]:
        """The entries directly in the folder of `key` ("" the synced folder) by key
        (more may be there); `subfolders`: the names of the folders beneath it on
        either side, whose entries are asked for when the merge enters them."""
        ...


class HeldBaseline:
    """A baseline in memory (`entries`: NFC path -> entry), by key (`ci`: case-folded)."""

    def __init__(self, entries: Mapping[str, BaselineEntry], ci: bool) -> None:
        self.by_key: Mapping[str, BaselineEntry] = entries
        if ci or not all(nfc(k) == k for k in entries):  # else its keys are keys already
            by_key: dict[str, BaselineEntry] = {}
            for k, v in entries.items():
                p = nfc(k)
                by_key[p.casefold() if ci else p] = v
            self.by_key = by_key

    def folder(self, key: str, subfolders: Collection[str]) -> Mapping[str, BaselineEntry]:
        return self.by_key


def hidden(path: str) -> bool:
    """Whether a component of NFC `path` starts with "."."""
    return path[:1] == "." or "/." in path


def cap_error(side: str, cap: int, what: str) -> LimitExceeded:
    """More than `cap` files (or folders) on `side`: the plan entry cap."""
    return LimitExceeded(
        f"cannot plan: the {side} listing has more than {cap} {what} (the plan entry "
        "cap); plan a smaller folder",
        details={"side": side, "cap": cap, "counted": what},
    )


def key_of(path: str, ci: bool) -> tuple[str, str]:
    """A listed path's NFC form and its key (the NFC form, case-folded when `ci`)."""
    p = path if path.isascii() else nfc(path)
    return p, p.casefold() if ci else p


def subfolders(
    folders: Iterable[tuple[str, _T]], ci: bool, include_hidden: bool
) -> list[tuple[str, list[_T]]]:
    """The folders the merge enters beneath one folder, given (listed path, item) for
    each folder among its entries in listing order: (key, their items), sorted by
    key + "/" as the merge enters them. The remote side lists ahead in this order."""
    found: dict[str, list[_T]] = {}
    for path, item in folders:
        p, k = key_of(path, ci)
        if include_hidden or not hidden(p):
            found.setdefault(k, []).append(item)
    return sorted(found.items(), key=lambda kv: kv[0] + "/")


class Fingerprint(Generic[_E]):
    """SHA-256 of one side's entries, fed a folder at a time (each folder's lines sorted:
    by name first, the listed one); `lines` gives a folder's lines, one per entry."""

    def __init__(self, lines: Callable[[list[_E]], list[str]]) -> None:
        self.h = hashlib.sha256()
        self.lines: Callable[[list[_E]], list[str]] = lines

    def add(self, entries: list[_E]) -> None:
        if entries:
            lines = self.lines(entries)
            lines.sort()
            lines.append("")
            self.h.update("\n".join(lines).encode("utf-8", "surrogateescape"))

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def local_lines(entries: list[LocalEntry]) -> list[str]:
    """A local folder's fingerprint lines (a comprehension: no call per entry)."""
    return [
        f"{e.raw_path}\0{e.kind}\0{e.size}\0{e.mtime_ns}\0{e.sha256}\0{e.digest}" for e in entries
    ]


def remote_lines(entries: list[RemoteEntry]) -> list[str]:
    """A remote folder's fingerprint lines: path, kind, size, mtime, the digests' values
    NUL-joined (a `OneDigest`'s one value read directly)."""
    return [
        f"{e.path}\0{e.kind}\0{e.size}\0{e.mtime}\0"
        f"{e.digests.value if type(e.digests) is OneDigest else chr(0).join(e.digests.values())}"
        for e in entries
    ]


class March:
    """One merge: `run` classifies every key of both trees into `pl` (its ops, its mkdirs
    in post-order, its reports unsorted); the caller assembles the plan. `implied`:
    whether an entry was added for a folder a listing implies (neither counted against
    the cap nor fingerprinted); `beneath`: whether a listing holds entries beneath a key
    that no folder stands for (listings handed over whole may)."""

    def __init__(
        self,
        pl: Classifier,
        local: LocalSide,
        remote: RemoteSide,
        baseline: BaselineSide,
        *,
        include_hidden: bool,
        entry_cap: int,
        implied: Callable[[object], bool] | None = None,
        beneath: Callable[[str], bool] | None = None,
    ) -> None:
        self.pl, self.local, self.remote, self.baseline = pl, local, remote, baseline
        self.include_hidden, self.cap = include_hidden, entry_cap
        self.implied, self.beneath = implied, beneath
        self.counts = {"local": [0, 0], "remote": [0, 0]}  # files, folders
        # Remote folders whose classification waits for their listing: one the drive
        # refuses to list is an error, not a folder on the remote (`_children`).
        self.deferred: set[str] = set()
        self.local_fp: Fingerprint[LocalEntry] = Fingerprint(local_lines)
        self.remote_fp: Fingerprint[RemoteEntry] = Fingerprint(remote_lines)

    def run(self, *, baseline_entries: int, allow_empty_side: bool) -> None:
        """Classify both trees.

        Raises:
            EmptySideRefused: a side lists empty while the baseline holds
                `baseline_entries` paths, unless `allow_empty_side`.
            LimitExceeded: a side has more than `entry_cap` files (or folders).
        """
        lchildren = self.local.listing("", ())
        rchildren = self.remote.listing("", ())
        if baseline_entries and not allow_empty_side:
            for side, got in (("local", lchildren), ("remote", rchildren)):
                if not any(self.include_hidden or not hidden(nfc(e.path)) for e in got):
                    raise EmptySideRefused(
                        f"stopped planning: the {side} folder lists empty but "
                        f"{baseline_entries} paths were synced before; check the folder "
                        "(wrong path? unmounted disk?), or plan again with "
                        "allow_empty_side=true",
                        details={"side": side, "baseline_entries": baseline_entries},
                    )
        self._walk(lchildren, rchildren)
        pl = self.pl
        while pl.pending_dirs:  # each is decided once its folder is done; a safeguard
            pl.finish_dir(pl.pending_dirs.pop())

    def _take(
        self,
        entries: list[_E],
        side: str,
        into: dict[str, _E],
        dups: dict[str, list[_E]],
        keys: list[str],
        dirs: set[str],
        fp: Fingerprint[_E],
    ) -> None:
        """Key one folder's `entries` of `side` into `into` (the first under a key) and
        `dups`, counting and fingerprinting them; appends the keys new to this folder to
        `keys`, and those with a folder to `dirs`."""
        ci, show, other = self.pl.ci, self.include_hidden, self.pl.loc
        local = side == "local"
        counts, implied = self.counts[side], self.implied
        listed: list[_E] = []  # what counts: neither hidden nor implied
        keep, find, add_key = listed.append, into.get, keys.append
        files = folders = 0
        for e in entries:
            p = e.path  # `key_of` and `hidden`, inline: the hot loop
            if not p.isascii():
                p = nfc(p)
                if local and p != e.path:
                    e = replace(e, path=p)
            if not show and (p[:1] == "." or "/." in p):
                continue
            k = p.casefold() if ci else p
            is_dir = e.kind == "dir"
            if is_dir:
                dirs.add(k)
            if implied is None or not implied(e):
                keep(e)
                if is_dir:
                    folders += 1
                else:
                    files += 1
            first = find(k)
            if first is not None:
                dups.setdefault(k, [first]).append(e)
            else:
                into[k] = e
                if local or k not in other:
                    add_key(k)
        counts[0] += files
        counts[1] += folders
        if counts[0] > self.cap or counts[1] > self.cap:
            raise cap_error(side, self.cap, "files" if counts[0] > self.cap else "folders")
        fp.add(listed)
        if self.beneath is not None:
            dirs.update(k for k in keys if self.beneath(k))

    def _walk(self, lchildren: list[LocalEntry], rchildren: list[RemoteEntry]) -> None:
        """Classify the synced folder, whose entries are `lchildren` and `rchildren`, and
        every folder beneath it, depth first on a stack of `_folder` steps (a tree may be
        deeper than Python's recursion limit)."""
        stack = [self._folder("", lchildren, rchildren)]
        while stack:
            entering = next(stack[-1], None)
            if entering is None:
                stack.pop()
            else:
                stack.append(self._folder(entering[0], *self._children(*entering)))

    def _folder(
        self, n: str, lchildren: list[LocalEntry], rchildren: list[RemoteEntry]
    ) -> Iterator[tuple[str, list[LocalEntry]]]:
        """Classify the folder `n` (its key; "" the synced folder) whose entries are
        `lchildren` and `rchildren`; yields each subfolder to enter in turn (its key, its
        opened local folders), and goes on once `_walk` classified all beneath it."""
        pl = self.pl
        loc, rem, ldups, rdups, base, blocked = (
            pl.loc, pl.rem, pl.ldups, pl.rdups, pl.base, pl.blocked,
        )  # fmt: skip
        keys: list[str] = []
        dirs: set[str] = set()
        self._take(lchildren, "local", loc, ldups, keys, dirs, self.local_fp)
        self._take(rchildren, "remote", rem, rdups, keys, dirs, self.remote_fp)
        del lchildren, rchildren
        events = keys + [k + "/" for k in dirs]
        events.sort()
        parent_blocked = n in blocked
        opened: dict[str, list[LocalEntry]] = {}
        cut = len(n) + 1 if n else 0
        get_base = self.baseline.folder(n, [k[cut:] for k in dirs]).get
        sink = pl.on_skip
        for k in events:
            if k[-1] == "/":
                k = k[:-1]
                lfolders = opened.pop(k, [])
                yield k, lfolders
                if lfolders:
                    self.local.done(lfolders)
                if pl.pending_dirs and pl.pending_dirs[-1] == k:
                    pl.finish_dir(pl.pending_dirs.pop())
                continue
            b = get_base(k)
            if b is not None:
                base[k] = b
            lo, r = loc.get(k), rem.get(k)
            if lo is not None and k in dirs:
                opened[k] = self._open(k, lo)
                lo = loc[k]
            # Most of a tree: a file on both sides, nothing unusual above it.
            if (
                lo is not None
                and r is not None
                and lo.kind == "file"
                and r.kind == "file"
                and lo.sha256 is not None
                and not parent_blocked
                and k not in ldups
                and k not in rdups
            ):
                d = r.digests
                if (
                    sink is not None
                    and type(d) is OneDigest
                    and lo.size == r.size
                    and d.value
                    and d.value == (lo.sha256 if d.digest_type == "sha256" else
                                    lo.digest if lo.digest_type == d.digest_type else None)
                ):  # fmt: skip
                    # Equal by the one listed digest: `Classifier.both_files`, inline.
                    sink(lo.path, lo, r, d.digest_type)
                    pl.skips_sunk += 1
                else:
                    b = b if b is not None and b.sha256 is not None else None
                    pl.both_files(lo.path, lo, r, b)
            elif (
                r is not None
                and r.kind == "dir"
                and (lo is None or lo.kind == "dir")
                and not parent_blocked
                and k not in ldups
                and k not in rdups
            ):
                self.deferred.add(k)  # classified once its listing is known (`_children`)
            else:
                pl.classify(k)
        for k in keys:  # the folder is done: only its ancestors' entries stay
            loc.pop(k, None)
            rem.pop(k, None)
            base.pop(k, None)
            if ldups:
                ldups.pop(k, None)
            if rdups:
                rdups.pop(k, None)
            if blocked:
                blocked.pop(k, None)

    def _open(self, k: str, first: LocalEntry) -> list[LocalEntry]:
        """Open the local folders under key `k` (the first entry, then its duplicates):
        each becomes what `LocalSide.open` says; returns those still folders."""
        pl = self.pl
        out: list[LocalEntry] = []
        if first.kind == "dir":
            first = pl.loc[k] = self.local.open(first)
            if first.kind == "dir":
                out.append(first)
        same = pl.ldups.get(k)
        if same is not None:
            for i, e in enumerate(same):
                if i == 0:
                    same[0] = first
                elif e.kind == "dir":
                    e = same[i] = self.local.open(e)
                    if e.kind == "dir":
                        out.append(e)
        return out

    def _children(
        self, k: str, lfolders: list[LocalEntry]
    ) -> tuple[list[LocalEntry], list[RemoteEntry]]:
        """The entries beneath key `k`, on the sides that hold a folder there."""
        pl = self.pl
        more = self.beneath is not None and self.beneath(k)
        lchildren = self.local.listing(k, lfolders) if lfolders or more else []
        r = pl.rem.get(k)
        rfolders = [e for e in pl.rdups.get(k, ()) if e.kind == "dir"]
        if not rfolders and r is not None and r.kind == "dir":
            rfolders = [r]
        rchildren: list[RemoteEntry] = []
        if rfolders or more:
            try:
                rchildren = self.remote.listing(k, rfolders)
            except PathRefused as e:
                if e.error_code != "permission_denied":
                    raise
                if k in self.deferred:
                    self.deferred.discard(k)
                    self._unlistable(k, e)
                elif k not in pl.blocked:  # else its report already blocks all beneath
                    raise
                return lchildren, []
        if k in self.deferred:
            self.deferred.discard(k)
            pl.classify(k)
        return lchildren, rchildren

    def _unlistable(self, k: str, e: PathRefused) -> None:
        """Report the remote folder of key `k`, which the drive refuses to list, as an
        error, and everything beneath it as not planned: nothing there is known."""
        pl = self.pl
        lo, r = pl.loc.get(k), pl.rem.get(k)
        path = lo.path if lo is not None else nfc(r.path) if r is not None else k
        pl.report(path, "error", e.message, local=lo, remote=r)
        pl.blocked[k] = ("error", path)
