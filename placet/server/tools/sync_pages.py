"""What one reply of `local_index` and `drive_changes` holds, and the opaque cursors of
the sync read tools.

Split from `placet.server.tools.sync` (the tool handlers): this is the agent's view of a
result (docs/design.md section 5). Each answers a summary by default (counts, bytes, the
first few entries or changes of each kind) and lists entries or changes only when asked,
by kind, in pages whose cursor a tool refuses (`invalid_cursor`) when it did not give it:
the agent's whole task must fit its context (docs/decisions/0015-reply-budget.md). Items
leave out what the page already says; a page holds at most `INDEX_PAGE`/`CHANGES_PAGE`
items and what fits the reply budget (`placet.server.budget.fitting`). A plan's summary
and pages are `placet.server.tools.plan_pages`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from placet.errors import UsageError
from placet.server.budget import fitting, json_bytes, room_for
from placet.server.framework import ToolOutput
from placet.server.tools.params import NextCursor
from placet.sync.changes import Change
from placet.sync.entries import LocalEntry
from placet.sync.service import IndexedFolder
from placet.text import inert

INDEX_PAGE = 500
CHANGES_PAGE = 500
EXAMPLES = 3
"""Entries (changes) of each kind a summary shows."""
T = TypeVar("T")
V = TypeVar("V", bound=BaseModel)


_CURSOR_KEY = secrets.token_bytes(32)
"""This process's key for signed cursors: a signed cursor is good in the server that
made it only (another `placet serve` refuses it; the agent restarts paging)."""


def _mac(tag: str, body: str) -> str:
    digest = hmac.new(_CURSOR_KEY, f"{tag}.{body}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def encode_cursor(tag: str, value: Any, *, signed: bool = False) -> str:
    """An opaque cursor: `tag` ("i1" index, "p1" plan, "o1" a proposal's ops) and
    base64url JSON of `value`; `signed`: followed by an HMAC of both under this process's
    key, so that `decode_cursor` refuses an altered or forged one."""
    body = base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{tag}.{body}.{_mac(tag, body)}" if signed else f"{tag}.{body}"


def decode_cursor(tag: str, cursor: str, tool: str, *, signed: bool = False) -> Any:
    """The JSON value of a cursor `encode_cursor(tag, ..., signed=signed)` made.

    Raises:
        UsageError (`invalid_cursor`): not such a cursor (or, `signed`, altered or made by
            another process); names `tool` to call again.
    """
    head, _, body = cursor.partition(".")
    if signed:
        body, _, mac = body.partition(".")
        if not hmac.compare_digest(mac.encode(), _mac(tag, body).encode()):
            head = ""
    try:
        if head == tag:
            return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error):
        pass
    raise UsageError(
        f"the cursor is not one {tool} gave; call {tool} again without a cursor to restart paging",
        code="invalid_cursor",
    )


# ---- compact items and summaries (shared) --------------------------------------------


def _none(v: object) -> bool:
    return v is None


def optional(description: str) -> Any:
    """A field that defaults to None and is left out of the reply while it is None."""
    return Field(default=None, exclude_if=_none, description=description)


def examples_field(items: str) -> Any:
    """A summary's `examples`: the first `EXAMPLES` of each kind (`items` names them)."""
    return Field(description=f"The first {EXAMPLES} {items} of each kind (the summary only).")


def listed_field(items: str, item: str) -> Any:
    """`listed`: the kind the page field `items` lists, null in a summary."""
    return Field(
        description=f"The kind `{items}` lists (all: every one); null: the summary only, "
        f"whose next_cursor lists every {item}."
    )


def page_field(most: int) -> Any:
    """A page of at most `most` items, cut to fit the reply budget."""
    return Field(description=f"At most {most} per page, fewer when they would not fit the reply.")


def examples_by_kind(
    items: Iterable[T], kind_of: Callable[[T], str], view: Callable[[T], V], room: int
) -> dict[str, list[V]]:
    """The first `EXAMPLES` items of each kind, as `view` shows them, while they fit in
    `room` bytes (a kind whose first item would not fit is left out)."""
    firsts: dict[str, list[T]] = {}
    for x in items:
        got = firsts.setdefault(kind_of(x), [])
        if len(got) < EXAMPLES:
            got.append(x)
    out: dict[str, list[V]] = {}
    for kind, xs in firsts.items():
        shown = fitting(map(view, xs), room - json_bytes({kind: []}), EXAMPLES)
        size = json_bytes({kind: shown}) + 2
        if shown and size <= room:
            out[kind] = shown
            room -= size
    return out


# ---- local_index ---------------------------------------------------------------------

IndexKind = Literal["all", "file", "dir", "skipped", "error"]


class LocalEntryView(BaseModel):
    path: str = Field(description="Relative to the indexed folder.")
    kind: str | None = optional(
        "file | dir | skipped (symlink, FIFO...) | error; left out when it is the kind "
        "listed (listing all: when it is a file)."
    )
    size: int | None = optional("Bytes (files).")
    mtime_ns: int = Field(description="Modification time, ns since the epoch.")
    sha256: str | None = optional("SHA-256 of the bytes (files).")
    digest: str | None = optional(
        "The drive's digest (digest_type), computed here; left out when equal to sha256."
    )
    note: str | None = optional("Why an entry is skipped or in error.")

    @classmethod
    def of(cls, e: LocalEntry, listed: str | None) -> LocalEntryView:
        usual = "file" if listed in (None, "all") else listed
        return cls(
            path=e.path,
            kind=None if e.kind == usual else e.kind,
            size=None if e.kind == "dir" else e.size,
            mtime_ns=e.mtime_ns,
            sha256=e.sha256,
            digest=e.digest if e.digest != e.sha256 else None,
            note=e.note or None,
        )


class LocalIndexOut(ToolOutput):
    root: str
    path: str = Field(description='The indexed folder, relative to the root ("" = root).')
    digest_type: str | None = Field(description="The drive's digest type (null: none).")
    total_entries: int
    files_hashed: int = Field(description="Files read and hashed (the rest came from cache).")
    counts: dict[str, int] = Field(description="Entries per kind: file, dir, skipped, error.")
    bytes: int = Field(description="Bytes of all the files.")
    examples: dict[str, list[LocalEntryView]] = examples_field("entries")
    listed: str | None = listed_field("entries", "entry")
    entries: list[LocalEntryView] = page_field(INDEX_PAGE)
    next_cursor: NextCursor

    def summary(self) -> str:
        more = "; more with next_cursor" if self.next_cursor else ""
        return inert(
            f"{self.root}:{self.path or '.'}: {self.total_entries} entries, "
            f"{self.files_hashed} hashed now{more}"
        )


def index_page(
    ix: IndexedFolder,
    token: str,
    listed: str | None,
    after: str | None,
    budget: int,
) -> LocalIndexOut:
    """The summary of `ix` (`listed` None), or the page of its entries of kind `listed`
    ("all": every kind) after path `after` (None: the first): at most `INDEX_PAGE`
    entries and what fits a reply of `budget` bytes; its cursor carries `token`
    (`SyncService.remember_index`), the folder, the kind and the last path.
    """
    entries = ix.result.entries
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    f = ix.folder
    out = LocalIndexOut(
        root=f.root.name,
        path=f.rel,
        digest_type=ix.digest_type,
        total_entries=len(entries),
        files_hashed=ix.result.hashed_count,
        counts=counts,
        bytes=sum(e.size for e in entries if e.kind == "file"),
        examples={},
        listed=listed,
        entries=[],
        next_cursor=None,
    )
    key = [token, str(f.root.path), f.rel, ix.include_hidden]
    if listed is None:  # its cursor lists every entry, from the first
        out.next_cursor = encode_cursor("i2", [*key, "all", None]) if entries else None
        out.examples = examples_by_kind(
            entries, lambda e: e.kind, lambda e: LocalEntryView.of(e, e.kind),
            room_for(budget, out),
        )  # fmt: skip
        return out
    start = 0
    if after is not None:
        start = next((i for i, e in enumerate(entries) if e.path > after), len(entries))
    chosen = (e for e in entries[start:] if listed == "all" or e.kind == listed)
    views = [LocalEntryView.of(e, listed) for e in _take(chosen, INDEX_PAGE + 1)]
    longest = max((v.path for v in views), key=len, default="")
    cursor_room = len(encode_cursor("i2", [*key, listed, longest]))
    out.entries = fitting(views, room_for(budget, out) - cursor_room, INDEX_PAGE)
    if out.entries and len(views) > len(out.entries):  # an empty folder: one empty page
        out.next_cursor = encode_cursor("i2", [*key, listed, out.entries[-1].path])
    return out


def _take(items: Iterable[T], n: int) -> list[T]:
    out: list[T] = []
    for x in items:
        out.append(x)
        if len(out) == n:
            break
    return out


# ---- drive_changes pages -------------------------------------------------------------

ChangesKind = Literal["all", "added", "changed", "removed"]


def _side(v: dict[str, Any] | None) -> dict[str, Any] | None:
    """A listed side of a change, compact: kind only for a folder, no size for one, no
    null digest."""
    if v is None:
        return None
    out: dict[str, Any] = {"kind": "dir"} if v.get("kind") == "dir" else {"size": v.get("size")}
    if v.get("mtime") is not None:
        out["mtime"] = v["mtime"]
    if v.get("digest"):
        out["digest"] = v["digest"]
    return out


class ChangeView(BaseModel):
    path: str = Field(description="Relative to the folder asked about.")
    change: str | None = optional("added | changed | removed; left out when it is the kind listed.")
    before: dict[str, Any] | None = optional(
        "As listed before (size, mtime, digest; kind only for a folder); absent: added."
    )
    after: dict[str, Any] | None = optional("As listed now; absent: removed.")

    @classmethod
    def of(cls, c: Change, listed: str | None) -> ChangeView:
        return cls(
            path=c.path,
            change=None if c.change == listed else c.change,
            before=_side(c.before),
            after=_side(c.after),
        )


class DriveChangesOut(ToolOutput):
    path: str
    anchor: str = Field(description="Pass as since_anchor next time.")
    taken_at: str = Field(description="When this listing was taken (UTC).")
    since: str | None = Field(description="When the anchor's listing was taken; null: none given.")
    entry_count: int = Field(description="Entries under the folder now.")
    counts: dict[str, int] = Field(description="added / changed / removed in total.")
    examples: dict[str, list[ChangeView]] = examples_field("changes")
    listed: str | None = listed_field("changes", "change")
    changes: list[ChangeView] = page_field(CHANGES_PAGE)
    next_cursor: NextCursor

    def summary(self) -> str:
        c = self.counts
        base = (
            f"{c['added']} added, {c['changed']} changed, {c['removed']} removed"
            if self.since
            else "anchor set; call again with since_anchor to see changes"
        )
        return inert(f"{self.path or '(drive root)'}: {base}")


def changes_page(out: DriveChangesOut, changes: Sequence[Change], offset: int, budget: int) -> int:
    """Fill `out` (its `listed` set) with the summary's examples (`listed` None) or the
    changes of its kind from `offset`; returns how many changes were put in the page."""
    if out.listed is None:
        out.examples = examples_by_kind(
            changes, lambda c: c.change, lambda c: ChangeView.of(c, c.change),
            room_for(budget, out),
        )  # fmt: skip
        return 0
    views = [ChangeView.of(c, out.listed) for c in changes[offset : offset + CHANGES_PAGE]]
    out.changes = fitting(views, room_for(budget, out), CHANGES_PAGE)
    return len(out.changes)
