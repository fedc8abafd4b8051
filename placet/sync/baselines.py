"""The baseline as a plan's merge reads it: a folder's entries at a time, by key
(`placet.sync.march.BaselineSide`).

Up to `memory_rows` entries it is held (and kept between plans, `SyncData.baseline`);
above, each folder's entries are read as the merge enters it (`SyncData.baseline_folders`),
since on a case-sensitive remote a folder's key is its NFC path. On a case-insensitive
remote a key may stand for paths the table cannot find by one folder: the baseline is
held whatever its size there (docs/decisions/0026-plan-memory.md)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from placet.sync.cache import FolderRows
from placet.sync.entries import BaselineEntry
from placet.sync.march import HeldBaseline
from placet.sync.stored import SyncData
from placet.sync.tables import Pair


class ReadBaseline:
    """A baseline read a folder at a time (a case-sensitive remote's keys)."""

    def __init__(self, rows: FolderRows[BaselineEntry]) -> None:
        self.rows = rows

    def folder(self, key: str, subfolders: Collection[str]) -> Mapping[str, BaselineEntry]:
        return self.rows.rows(key, subfolders)


def baseline_side(
    data: SyncData, pair: Pair, *, case_insensitive: bool
) -> tuple[HeldBaseline | ReadBaseline, int, int, Callable[[str], BaselineEntry | None] | None]:
    """The pair's baseline for a merge: (the side, how many entries, its generation,
    the entry of an exact NFC path when only a held baseline can say it; None: the
    merge's own entry of the key is that path's, as on a case-sensitive remote)."""
    count, generation = data.baseline_count(pair)
    if count > data.memory_rows and not case_insensitive:
        return ReadBaseline(data.baseline_folders(pair)), count, generation, None
    entries, generation = data.baseline(pair)
    side = HeldBaseline(entries, case_insensitive)
    return side, len(entries), generation, entries.get if case_insensitive else None
