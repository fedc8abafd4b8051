"""How many bytes a reply takes, and how many items fit in a page under the reply budget.

Every tool reply fits `Settings.reply_budget_bytes` (40,000 bytes by default), its text
content and its structured content each measured as UTF-8 JSON (`json_bytes`; a lone
surrogate, which stands for a name byte that is not UTF-8, counts as its 6-byte escape).
Pages of plans, indexes, changes, proposals and a proposal's ops are filled item by item
until the next item would not fit (`fitting`), so a page of long names holds fewer items
than a page of short ones; `placet.server.framework` refuses, as a last resort, a reply
that would still exceed the budget (`reply_too_large`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

MARGIN = 1_000
"""Bytes kept free under the budget for what is set after a page is filled (a cursor)."""


def _dumped(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")


def json_bytes(value: Any) -> int:
    """Bytes of `value` as JSON with non-ASCII text as UTF-8 (the size a host counts);
    pydantic models anywhere in it as they are sent (`model_dump`)."""
    text = json.dumps(_dumped(value) if isinstance(value, BaseModel) else value,
                      ensure_ascii=False, default=_dumped)  # fmt: skip
    return len(text.encode("utf-8", "backslashreplace"))


def fitting(views: Iterable[T], room: int, most: int) -> list[T]:
    """The leading `views` (at most `most`) that fit in `room` bytes, each measured as
    `json_bytes(view)` plus its separator. At least one when there is any, so paging
    always moves on. Takes views one at a time, so a lazy iterable is read only up to
    the first view that does not fit."""
    taken: list[T] = []
    used = 0
    for v in itertools.islice(views, most):  # stops at the first view that does not fit
        used += json_bytes(v) + 2
        if used > room and taken:
            break
        taken.append(v)
    return taken


def fit(items: Sequence[T], view: Callable[[T], Any], room: int, most: int) -> int:
    """How many items from the start of `items` fit as `fitting` takes their views."""
    return len(fitting(map(view, items), room, most))


def room_for(budget: int, empty_page: BaseModel) -> int:
    """Bytes left for a page's items: `budget` less the page without them and `MARGIN`."""
    return budget - MARGIN - json_bytes(empty_page)
