"""A large sync's ops, a window at a time: the op table of the detail pane.

A sync proposal may hold 100,000 ops. Its ops are stored by reference
(docs/decisions/0023-ops-by-reference.md) and read here only through `Store.ops(pid,
start=, limit=)`, `WINDOW` at a time, in a thread worker: Textual's DataTable measures
every row it is given, so the table holds one window of rows, never all of them. Moving
past the window's last (first) row loads the next (previous) window with the cursor on the
op it moved to; End loads the last window with the cursor on the last op, Home the first.
The caption says which ops are shown and how many there are. Every path and note went
through `render.name` / `render.lit` (inert text, never markup).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from placet.display import human_bytes
from placet.errors import PlacetError
from placet.store import ProposalRecord, Store
from placet.tui import tables
from placet.tui.facts import EffectOp, effect_op
from placet.tui.render import lit, name

WINDOW = 200
"""Ops in the table at a time (a page read is ~5 ms; adding 200 rows ~0.1 s)."""

COLUMNS: tables.Columns = (
    ("op", "op", 7),
    ("kind", "kind", 15),
    ("remote", "remote path", None),
    ("size", "size", 9),
    ("note", "replaces / local target / planner", None),
)


def op_cells(op: EffectOp) -> list[Text]:
    """One row: op index, kind, remote path, size, and what it replaces or where a
    download goes, then the planner's reason."""
    note = Text(end="")
    if op.replace:
        note.append("replaces  ", style="bold yellow")
    if op.kind == "download" and op.local_path:
        note.append("into ", style="dim")
        note.append_text(name(op.local_path))
        note.append("  ")
    note.append_text(lit(op.note, "dim"))
    return [
        Text(str(op.index), end=""),
        lit(op.kind),
        name(op.remote_path or "?"),
        Text("" if op.kind == "mkdir" else human_bytes(op.size), end=""),
        note,
    ]


class OpsTable(DataTable[Text]):
    """The ops of one sync proposal, `WINDOW` rows at a time (see the module doc).

    `base`: the position (0-based, in index order) of the first row shown; `total`: the
    proposal's op count; `loaded`: set after each window is shown (tests wait on it).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home,ctrl+home", "first_op", "First op", show=False),
        Binding("end,ctrl+end", "last_op", "Last op", show=False),
    ]

    DEFAULT_CSS = """
    OpsTable { height: 14; }
    """

    def __init__(self, store: Store | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.store = store
        self.record: ProposalRecord | None = None
        self.total = 0
        self.base = 0
        self.loaded = 0
        """How many windows were shown so far (a counter tests and benches wait on)."""
        self._busy = False

    def on_mount(self) -> None:
        tables.add_columns(self, COLUMNS, 40)

    # -- loading ------------------------------------------------------------------------

    def show_ops(self, record: ProposalRecord, total: int) -> None:
        """Show the first window of `record`'s `total` ops."""
        self.record, self.total, self.base = record, total, 0
        self.clear()
        self._load(0, 0)

    def _load(self, base: int, cursor: int) -> None:
        """Load the window starting at position `base`, cursor on its row `cursor`."""
        if self.record is None or self.store is None:
            return
        self._busy = True
        self._read(self.store, self.record, max(0, min(base, self.total - 1)), cursor)

    @work(thread=True, exclusive=True, group="ops-window", exit_on_error=False)
    def _read(self, store: Store, record: ProposalRecord, base: int, cursor: int) -> None:
        root = record.request.get("root")
        try:
            raw = store.ops(record.id, start=base, limit=WINDOW)
            ops = [effect_op(o, root if isinstance(root, dict) else None, base + i)
                   for i, o in enumerate(raw)]  # fmt: skip
        except PlacetError as e:
            self.app.call_from_thread(self._failed, e)
            return
        except Exception as e:  # a malformed stored op must not stop later window loads
            why = f"the ops of proposal {record.id} cannot be shown ({type(e).__name__}: {e})"
            self.app.call_from_thread(self._failed, PlacetError(why, code="request_invalid"))
            return
        self.app.call_from_thread(self._apply, record.id, base, ops, cursor)

    def _failed(self, e: PlacetError) -> None:
        self._busy = False
        self.notify(e.message, title=e.error_code, severity="error", markup=False)

    def _apply(self, pid: int, base: int, ops: Sequence[EffectOp], cursor: int) -> None:
        self._busy = False
        if self.record is None or self.record.id != pid:
            return  # another proposal was selected meanwhile
        self.base = base
        self.clear()
        self.add_rows([op_cells(op) for op in ops])
        if ops:
            row = max(0, min(cursor, len(ops) - 1))
            self.move_cursor(row=row, animate=False)
        self.loaded += 1
        self.border_title = self.caption()

    def caption(self) -> str:
        if not self.total:
            return "no ops"
        last = self.base + self.row_count
        return f"ops {self.base + 1:,}-{last:,} of {self.total:,} (End: last op, Home: first)"

    # -- moving past the window ----------------------------------------------------------

    def action_first_op(self) -> None:
        if self.base == 0:
            self.move_cursor(row=0)
        elif not self._busy:
            self._load(0, 0)

    def action_last_op(self) -> None:
        last_base = max(0, self.total - WINDOW)
        if self.base == last_base:
            self.move_cursor(row=self.row_count - 1)
        elif not self._busy:
            self._load(last_base, WINDOW)

    def action_cursor_down(self) -> None:
        at_end = self.cursor_row >= self.row_count - 1
        if at_end and self.base + self.row_count < self.total:
            if not self._busy:
                self._load(self.base + self.row_count, 0)
            return
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.cursor_row <= 0 and self.base > 0:
            if not self._busy:
                start = max(0, self.base - WINDOW)
                self._load(start, self.base - start - 1)
            return
        super().action_cursor_up()

    def action_page_down(self) -> None:
        if self.cursor_row >= self.row_count - 1:
            self.action_cursor_down()
            return
        super().action_page_down()

    def action_page_up(self) -> None:
        if self.cursor_row <= 0:
            self.action_cursor_up()
            return
        super().action_page_up()

    @property
    def shown_indexes(self) -> list[int]:
        """The op indexes of the rows in the table (tests)."""
        return [int(str(self.get_row_at(i)[0])) for i in range(self.row_count)]

    def row_text(self, row: int) -> list[Any]:
        return list(self.get_row_at(row))
