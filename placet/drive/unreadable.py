"""Folders rclone lists as empty because it may not read them.

rclone's local backend answers a folder it may not open (permission denied) with an empty
listing and no error: the error only counts in the call's stats group ("ignore error but
fail sync", which `rclone lsjson` turns into exit code 6, and rcd's `operations/list`
drops). An empty folder and a folder nobody may read would then look alike, and a plan
would infer what lies beneath the second. So each listing request runs in a stats group
of its own (rc's ``_group``); a request whose answer holds an empty folder asks the group
for errors, and when there are some, lists each empty folder alone to tell which one was
refused; a single listing (recursive or not) that holds an empty folder asks the same.
Listings of folders with entries, most of a tree, cost nothing more.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DENIED", "new_group", "refused_in", "refused_marked"]

DENIED = re.compile(r"permission denied|access denied|access is denied|forbidden", re.I)
"""rclone's messages for a folder the drive refuses to list."""

_EMPTY_LIST = re.compile(rb'"list":\s*\[\s*\]')
"""An empty folder in rcd's answer, found without decoding it."""
_COUNTER = itertools.count(1)

Rc = Callable[[str, dict[str, Any]], Any]
"""An rcd call: (method, params) -> decoded answer."""


def new_group() -> str:
    """A stats group name no other request of this rcd uses."""
    return f"placet-list-{os.getpid()}-{next(_COUNTER)}"


def _errors(rc: Rc, group: str) -> tuple[int, str]:
    """(errors counted in `group`, the last one's message), the group then deleted."""
    stats = rc("core/stats", {"group": group})
    rc("core/stats-delete", {"group": group})
    if not isinstance(stats, dict):
        return 0, ""
    errors = stats.get("errors")
    return (errors if isinstance(errors, int) else 0), str(stats.get("lastError") or "")


def refused_marked(rc: Rc, raw: bytes, inputs: Sequence[dict[str, Any]], group: str) -> bytes:
    """The `job/batch` answer `raw` to listing `inputs` (run in stats `group`), with each
    folder the drive refused to list answered as an error (status 403, rclone's message)
    instead of an empty list. `raw` itself when no folder lists empty (no call made)."""
    if not _EMPTY_LIST.search(raw):  # most answers: not decoded here (the caller does)
        return raw
    errors, _ = _errors(rc, group)
    if not errors:
        return raw
    try:
        body = json.loads(raw)
        results = body["results"]
        empty = [i for i, r in enumerate(results) if r == {"list": []}]
    except (ValueError, KeyError, TypeError):
        return raw  # decoded (and refused) by the caller
    for i in empty:
        alone = new_group()
        params = {k: v for k, v in inputs[i].items() if k != "_path"}
        rc(str(inputs[i]["_path"]), {**params, "_group": alone})
        count, message = _errors(rc, alone)
        if count and DENIED.search(message):
            results[i] = {"error": message, "status": 403}
    return json.dumps(body).encode()


def _has_empty_folder(items: list[Any], recurse: bool) -> bool:
    """Whether a listing's `items` hold no entry, or (`recurse`) a folder with nothing
    listed beneath it."""
    if not items:
        return True
    if not recurse:
        return False
    folders = {i.get("Path") for i in items if isinstance(i, dict) and i.get("IsDir")}
    for i in items:
        if isinstance(i, dict) and isinstance(i.get("Path"), str):
            folders.discard(i["Path"].rpartition("/")[0])
    return bool(folders)


def refused_in(rc: Rc, items: list[Any], recurse: bool, group: str) -> str | None:
    """rclone's message for a folder the drive refused to list in a listing run in stats
    `group` whose answer is `items`, or None (no call made unless a folder lists empty)."""
    if not _has_empty_folder(items, recurse):
        return None
    count, message = _errors(rc, group)
    return message if count and DENIED.search(message) else None
