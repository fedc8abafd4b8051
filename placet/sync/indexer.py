"""The local indexer: walk a folder under a root and list every entry in it.

`placet.sync.local_tree` reads the folder a folder at a time (its docstring says how:
descriptors from the root down, nothing followed, the digest cache reused); this walks
it whole, depth first, for `local_index` and for tests. A plan reads the same tree
through the merge instead (`placet.sync.march`), never holding it whole."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path

from placet.sync.cache import DigestCache
from placet.sync.entries import LocalEntry
from placet.sync.index_file import IndexResult
from placet.sync.local_tree import LocalTree
from placet.sync.model import DEFAULT_ENTRY_CAP

_PATH = attrgetter("path")


def index_local(
    root_path: Path,
    rel: str,
    *,
    digest_types: Sequence[str],
    cache: DigestCache,
    root_key: str,
    workers: int = 4,
    now_ns: int | None = None,
    include_hidden: bool = False,
    entry_cap: int = DEFAULT_ENTRY_CAP,
    progress: Callable[[int, int], None] | None = None,
) -> IndexResult:
    """Walk `root_path/rel` and return every entry with SHA-256 and `digest_types`.

    Args:
        root_path: the local root (absolute; resolved when the owner nominated it).
        rel: the folder to index, relative to the root ("" = the root itself); entry
            paths are relative to it.
        digest_types: remote types to compute besides SHA-256 (sha256/sha1/md5); the
            strongest becomes `LocalEntry.digest_type` (pass the remote's choice,
            `choose_digest_type(capabilities.hash_types)`).
        cache: digests from earlier indexes; fresh ones are written back.
        root_key: the cache namespace of this root (e.g. its name, device and inode).
        workers: hashing threads (1 = hash in the calling thread).
        now_ns: the scan's start for the racily-clean rule (default: the clock now).
        include_hidden: also list names starting with "." (else not entered at all).
        entry_cap: most files, and most folders (docs/design.md section 9: 100,000; the
            cap counts files, so a tree of 100,000 files in 1,000 folders fits).
        progress: called from the walking thread every 1,024 files with (files seen,
            bytes hashed so far in that thread); for a long read's progress figure.

    Returns:
        `IndexResult`, entries in path order (NFC `path`, on-disk `raw_path`).

    Raises:
        NotFound / PathRefused: `rel` is missing, a symlink, not a folder, unreadable.
        LimitExceeded: more than `entry_cap` files (or folders).
        UsageError: an unknown digest type.
    """
    tree = LocalTree(
        root_path,
        rel,
        digest_types=digest_types,
        cache=cache,
        root_key=root_key,
        workers=workers,
        now_ns=now_ns,
        include_hidden=include_hidden,
        entry_cap=entry_cap,
        progress=progress,
    )
    return walk_whole(tree)


def walk_whole(tree: LocalTree) -> IndexResult:
    """Every entry of `tree`, depth first, in path order; closes the tree.

    Raises what `LocalTree.listing` raises.
    """
    entries: list[LocalEntry] = []

    def walk(listed: list[LocalEntry]) -> None:
        for e in listed:
            if e.kind != "dir":
                entries.append(e)
                continue
            e = tree.open(e)
            entries.append(e)
            if e.kind == "dir":
                walk(tree.listing("", (e,)))
                tree.done((e,))

    try:
        walk(tree.listing("", ()))
    finally:
        tree.close()
    entries.sort(key=_PATH)
    w = tree.w
    return IndexResult(
        entries=tuple(entries),
        hashed_count=tree.hashed_count,
        cache_hits=w.cache_hits,
        # Most trees have neither: no scan of 100,000 entries for nothing.
        skipped=tuple(e for e in entries if e.kind == "skipped") if w.specials else (),
        errors=tuple(e for e in entries if e.kind == "error") if w.specials else (),
        bytes_hashed=w.bytes_hashed,
        scan_start_ns=tree.start_ns,
    )


__all__ = [
    "index_local",
    "walk_whole",
]
