"""A unified line diff in bounded time: difflib's opcodes over blocks anchored first.

`difflib.SequenceMatcher` finds each longest match by scanning the whole range again, so
two files of n unique lines with an edit every few lines cost O(n²) (20,000 lines with
10% changed: about 30 s; 100,000: minutes). The owner waits on this, so the matching
blocks are found the way patience diff finds them: common prefix and suffix trimmed,
then the lines that occur once on each side matched and the longest increasing run of
those pairs kept as anchors (O(n log n)); difflib itself only matches the ranges
between anchors, and a range over `GAP_MAX` lines on both sides with no anchor is left
unmatched (shown as removed and added, never searched). difflib then groups the blocks
into hunks as `difflib.unified_diff` does (`SequenceMatcher.get_grouped_opcodes`).
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["GAP_MAX", "AnchoredMatcher", "DiffLine", "line_diff"]

GAP_MAX = 2000
"""Lines on each side of an unanchored range above which difflib is not run on it."""
_DEPTH_MAX = 16

Block = tuple[int, int, int]
"""(start in a, start in b, length): lines a[i:i+n] == b[j:j+n]."""


def _anchors(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int
) -> list[Block]:
    """The longest increasing run of lines that occur once in a[alo:ahi] and once in
    b[blo:bhi] (patience sorting), as one-line blocks in order."""
    count_a = Counter(a[alo:ahi])
    count_b = Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if count_b[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(alo, ahi) if count_a[a[i]] == 1 and a[i] in where_b]
    tails: list[int] = []  # the smallest j ending a run of each length
    tail_at: list[int] = []  # index into pairs of that tail
    back: list[int] = []
    for k, (_i, j) in enumerate(pairs):
        n = bisect.bisect_left(tails, j)
        if n == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[n] = j
            tail_at[n] = k
        back.append(tail_at[n - 1] if n else -1)
    run: list[Block] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        run.append((pairs[k][0], pairs[k][1], 1))
        k = back[k]
    return run[::-1]


def _match(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int, depth: int,
    out: list[Block],
) -> None:  # fmt: skip
    """Append the matching blocks of a[alo:ahi] and b[blo:bhi], in order, to `out`."""
    start = alo
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        alo, blo = alo + 1, blo + 1
    if alo > start:
        out.append((start, blo - (alo - start), alo - start))
    end = ahi
    while ahi > alo and bhi > blo and a[ahi - 1] == b[bhi - 1]:
        ahi, bhi = ahi - 1, bhi - 1
    suffix = (ahi, bhi, end - ahi) if end > ahi else None
    if alo < ahi and blo < bhi and not set(a[alo:ahi]).isdisjoint(b[blo:bhi]):
        if ahi - alo <= GAP_MAX or bhi - blo <= GAP_MAX:
            sm = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
            out.extend((alo + i, blo + j, n) for i, j, n in sm.get_matching_blocks() if n)
        elif depth < _DEPTH_MAX:
            prev_a, prev_b = alo, blo
            for i, j, n in _anchors(a, b, alo, ahi, blo, bhi):
                _match(a, b, prev_a, i, prev_b, j, depth + 1, out)
                out.append((i, j, n))
                prev_a, prev_b = i + n, j + n
            if prev_a > alo:  # no anchor at all: the range stays unmatched
                _match(a, b, prev_a, ahi, prev_b, bhi, depth + 1, out)
    if suffix is not None:
        out.append(suffix)


class AnchoredMatcher(difflib.SequenceMatcher[str]):
    """A `difflib.SequenceMatcher` over lines whose matching blocks are found as the
    module docstring says; `get_opcodes` and `get_grouped_opcodes` are difflib's."""

    def __init__(self, a: Sequence[str], b: Sequence[str]) -> None:
        super().__init__(None, a, b, autojunk=False)
        self._lines = (a, b)
        self._blocks: list[difflib.Match] | None = None

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self._blocks is not None:
            return self._blocks
        a, b = self._lines
        raw: list[Block] = []
        _match(a, b, 0, len(a), 0, len(b), 0, raw)
        merged: list[Block] = []
        for i, j, n in raw:
            if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
                pi, pj, pn = merged[-1]
                merged[-1] = (pi, pj, pn + n)
            else:
                merged.append((i, j, n))
        merged.append((len(a), len(b), 0))
        self._blocks = [difflib.Match(i, j, n) for i, j, n in merged]
        return self._blocks


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff: `kind` is ``hunk`` (``@@ -1,3 +1,4 @@``), ``context``,
    ``del`` or ``add``; `text` is the line as the file holds it (no newline, not yet
    made inert)."""

    kind: str
    text: str


def _range(start: int, stop: int) -> str:
    """A unified diff range, as `difflib.unified_diff` writes it."""
    first, length = start + 1, stop - start
    if length == 1:
        return str(first)
    if not length:
        first -= 1
    return f"{first},{length}"


def line_diff(
    old: Sequence[str], new: Sequence[str], context: int = 3
) -> tuple[Iterator[DiffLine], int, int]:
    """The unified diff of `old` to `new` (lines without their ends): (its lines, made
    as they are read, lines added, lines removed)."""
    matcher = AnchoredMatcher(old, new)
    added = removed = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("delete", "replace"):
            removed += i2 - i1
        if tag in ("insert", "replace"):
            added += j2 - j1

    def lines() -> Iterator[DiffLine]:
        for group in matcher.get_grouped_opcodes(context):
            first, last = group[0], group[-1]
            yield DiffLine(
                "hunk", f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
            )
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    yield from (DiffLine("context", s) for s in old[i1:i2])
                    continue
                if tag in ("delete", "replace"):
                    yield from (DiffLine("del", s) for s in old[i1:i2])
                if tag in ("insert", "replace"):
                    yield from (DiffLine("add", s) for s in new[j1:j2])

    return lines(), added, removed
