"""The local indexer: walk a folder under a root and list every entry in it.

`placet.sync.local_tree` reads the folder a folder at a time (its docstring says how:
descriptors from the root down, nothing followed, the digest cache reused); this walks
it whole, depth first, for `local_index` and for tests. A plan reads the same tree
through the merge instead (`placet.sync.march`), never holding it whole."""

from __future__ import annotations

from operator import attrgetter

from placet.sync.entries import LocalEntry
from placet.sync.index_file import IndexResult
from placet.sync.local_tree import LocalTree

_PATH = attrgetter("path")


def index_local(tree: LocalTree) -> IndexResult:
    """Every entry of `tree` (`LocalTree(root_path, rel, ...)`), depth first, with
    SHA-256 and its digest types; closes the tree.

    Returns:
        `IndexResult`, entries in path order (NFC `path`, on-disk `raw_path`).

    Raises:
        LimitExceeded: more than the tree's `entry_cap` files (or folders).
        Others as `LocalTree.listing`.
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


__all__ = ["index_local"]
