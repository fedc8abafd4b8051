"""How many bytes a reply takes, and how many items fit in a page under the reply budget.

Every tool reply fits `Settings.reply_budget_bytes` (40,000 bytes by default), its text
content and its structured content each measured as UTF-8 JSON (`json_bytes`; a lone
surrogate, which stands for a name byte that is not UTF-8, counts as its 6-byte escape).
Pages of plans, indexes, changes, proposals and a proposal's ops are filled item by item
until the next item would not fit (`fit`), so a page of long names holds fewer items
than a page of short ones; `placet.server.framework` refuses, as a last resort, a reply
that would still exceed the budget (`reply_too_large`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

MARGIN = 1_000
"""Bytes kept free under the budget for what is set after a page is filled (a cursor)."""


def json_bytes(value: Any) -> int:
    """Bytes of `value` as JSON with non-ASCII text as UTF-8 (the size a host counts)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "backslashreplace"))


def fit(items: Sequence[T], view: Callable[[T], Any], room: int, most: int) -> int:
    """How many items from the start of `items` (at most `most`) fit in `room` bytes, each
    measured as `json_bytes(view(item))` plus its separator. At least one when `items`
    is not empty, so paging always moves on."""
    used = 0
    for n in range(min(len(items), most)):  # stops at the first item that does not fit
        used += json_bytes(view(items[n])) + 2
        if used > room and n > 0:
            return n
    return min(len(items), most)


def room_for(budget: int, empty_page: BaseModel) -> int:
    """Bytes left for a page's items: `budget` less the page without them and `MARGIN`."""
    return budget - MARGIN - json_bytes(empty_page)
