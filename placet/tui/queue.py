"""The queue: active proposals (pending, approved, executing) in id order, and their detail.

Selection follows the proposal id, never the row number: each reload reconciles the
table in place and puts the cursor back on the same id (docs/design.md section 9,
"Review UI"); if that proposal left, the cursor stays at its position. The table holds a
window of `PAGE` proposals and grows as the cursor nears its end, since DataTable
measures every cell it is given; the "expires in" countdown rewrites only the rows on
screen. A pending proposal that appears after the first load rings the bell once per
reload and stays highlighted (`FRESH_STYLE`, a `*` before its id) until the owner moves
onto it. Space marks a pending proposal (a `+`) and moves down; `a`, `d` and `e` then
decide the marked set. Each target is named by its distinctive end (``…/backup/todo.txt``)
in what it needs, up to 60 % of the width the fixed columns leave; the reason gets the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import Button, DataTable, Static
from textual.widgets.data_table import ColumnKey

from placet.proposals.risk import RiskFlag
from placet.store import ProposalRecord
from placet.text import cell_width, inert
from placet.tui import tables
from placet.tui.detail import DetailPane
from placet.tui.facts import Effect, effect_of, target_of
from placet.tui.render import expires_cell, queue_cells
from placet.tui.transfer import TransferPanel

PAGE = 200
"""Rows loaded at first and added each time the cursor nears the end of the window
(200 rows cost about 0.1 s of event-loop time to add and measure; see bench/tui_open.py)."""
MORE_MARGIN = 25
"""Load the next page when the cursor is this close to the last loaded row."""
REBUILD_OVER = 40
"""Removing more rows than this rebuilds the table (DataTable.remove_row is O(rows))."""

COLUMNS: tables.Columns = (
    ("id", "id", 5),
    ("kind", "kind", 10),
    ("target", "target", None),
    ("size", "size", 9),
    ("agent", "agent", 12),
    ("expires", "expires in", 10),
    ("reason", "reason", None),
)
"""Columns (key, label, width); target and reason (width None) share the width left."""
NARROW = 110
"""Below this many cells the fixed columns shrink to `NARROW_WIDTHS`."""
NARROW_WIDTHS = {"size": 7, "agent": 6, "expires": 8}
BUTTONS_FROM = 30
"""Terminal rows from which the queue shows its action buttons."""
FLEX_MIN = 8
TARGET_MAX = 48
FRESH_STYLE = "bold"
"""Style added to every cell of a row the owner has not looked at yet (a new proposal)."""


class QueueTable(DataTable[Text]):
    """The table of active proposals; rows keyed by proposal id."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "first_row", "First", show=False),
        Binding("end", "last_row", "Last", show=False),
        Binding("space", "toggle_mark", "Mark"),
        Binding("escape", "clear_marks", "Unmark all", show=False),
    ]

    class SelectionChanged(Message):
        """The proposal under the cursor may have changed (or its record did)."""

    class MarksChanged(Message):
        """The owner marked or unmarked a proposal."""

    def __init__(self, clock: Callable[[], datetime], *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.clock = clock
        self.records: dict[int, ProposalRecord] = {}
        self.effects: dict[int, Effect] = {}
        self.order: list[int] = []
        self.exhausted = True
        self.loaded = False
        self.fresh: set[int] = set()
        """Ids of pending proposals that arrived after the first load and were not
        under the cursor yet."""
        self.marked: set[int] = set()
        """Ids the owner marked (space) to decide together."""
        self.target_width = TARGET_MAX
        self._needs: dict[int, int] = {}  # cells each loaded target takes whole
        self._under_cursor: int | None = None
        self._fitted_width = -1  # the width the columns were last sized for

    def on_mount(self) -> None:
        tables.add_columns(self, COLUMNS, FLEX_MIN)
        self.set_interval(1.0, self.tick)
        self.fit_reason()

    def on_resize(self) -> None:
        self.fit_reason()
        self.call_after_refresh(self.fit_reason)  # the compositor's region may lag the event

    def fit_reason(self) -> None:
        """Size the columns to the table's width: below `NARROW` cells the fixed columns
        shrink; the target gets what its longest loaded target needs, up to 60 % of what
        they leave (and `TARGET_MAX`), the reason the rest, so nothing runs off screen at
        80 columns and two targets in one folder still differ by their ends."""
        width = self._fitted_width = self.scrollable_content_region.width
        narrow = width < NARROW
        fixed = {k: (NARROW_WIDTHS.get(k, w) if narrow else w) for k, _l, w in COLUMNS if w}
        fixed["id"] = len(str(max(self.order, default=1))) + 1  # room for the mark too
        padding = 2 * self.cell_padding * len(COLUMNS)
        free = width - sum(fixed.values()) - padding
        need = max((self._need(r) for r in self.records.values()), default=FLEX_MIN)
        target = max(min(need, free * 3 // 5, TARGET_MAX), FLEX_MIN)
        widths = {**fixed, "target": target, "reason": max(free - target, FLEX_MIN)}
        changed = False
        for key, width in widths.items():
            column = self.columns.get(ColumnKey(key))
            if column is not None and column.width != width:
                column.width = width
                changed = True
        if target != self.target_width:
            self.target_width = target
            now = self.clock()
            for pid in self.order:
                self.update_cell(str(pid), "target", self._cells(self.records[pid], now)[2])
        if changed:
            self._require_update_dimensions = True  # DataTable re-measures on idle
            self._clear_caches()
            self.refresh()

    def _need(self, record: ProposalRecord) -> int:
        """Cells the target of `record` takes whole."""
        need = self._needs.get(record.id)
        if need is None:
            need = self._needs[record.id] = cell_width(inert(target_of(record)))
        return need

    # -- reading -------------------------------------------------------------------------

    def selected_id(self) -> int | None:
        if not self.order:
            return None
        row = min(max(self.cursor_row, 0), len(self.order) - 1)
        return self.order[row]

    def selected(self) -> ProposalRecord | None:
        pid = self.selected_id()
        return None if pid is None else self.records.get(pid)

    def effect(self, pid: int) -> Effect:
        record = self.records[pid]
        eff = self.effects.get(pid)
        if eff is None:
            eff = self.effects[pid] = effect_of(record)
        return eff

    def marked_records(self) -> list[ProposalRecord]:
        """The marked proposals still in the table, in id order."""
        return [self.records[pid] for pid in sorted(self.marked) if pid in self.records]

    def set_marks(self, ids: set[int]) -> None:
        """Mark exactly `ids` (those in the table)."""
        before, self.marked = self.marked, ids & set(self.records)
        self._redraw(before ^ self.marked)

    def clear_marks(self) -> None:
        self.set_marks(set())
        self.post_message(self.MarksChanged())

    def action_clear_marks(self) -> None:
        self.clear_marks()

    def action_toggle_mark(self) -> None:
        """Mark or unmark the proposal under the cursor (pending ones only), then move
        down, so marking a run of proposals is one key each."""
        record = self.selected()
        if record is None:
            return
        if record.id in self.marked:
            self.marked.discard(record.id)
        elif record.status == "pending":
            self.marked.add(record.id)
        else:
            self.app.notify(
                f"#{record.id} is {record.status}: only pending proposals can be marked",
                severity="warning",
                markup=False,
            )
            return
        self._redraw({record.id})
        self.post_message(self.MarksChanged())
        if self.cursor_row < len(self.order) - 1:
            self.move_cursor(row=self.cursor_row + 1, animate=False)

    def _redraw(self, ids: set[int]) -> None:
        now = self.clock()
        for pid in ids:
            if pid in self.records:
                self.update_cell(str(pid), "id", self._cells(self.records[pid], now)[0])

    def near_end(self) -> bool:
        return not self.exhausted and self.cursor_row >= len(self.order) - MORE_MARGIN

    # -- writing -------------------------------------------------------------------------

    def _cells(self, record: ProposalRecord, now: datetime) -> list[Text]:
        cells = queue_cells(record, self.effect(record.id), now, target_width=self.target_width)
        if record.id in self.marked:
            cells[0] = Text.assemble(("+", "bold reverse green"), cells[0], end="")
        if record.id in self.fresh:
            cells[0] = Text.assemble(("*", "bold reverse"), cells[0], end="")
            for cell in cells:
                cell.stylize(FRESH_STYLE)
        return cells

    def _unmark(self, pid: int) -> None:
        """The owner has seen proposal `pid`: drop its highlight."""
        record = self.records.get(pid)
        if pid not in self.fresh or record is None:
            return
        self.fresh.discard(pid)
        for (key, _label, _w), cell in zip(COLUMNS, self._cells(record, self.clock()), strict=True):
            self.update_cell(str(pid), key, cell)

    def apply(self, records: list[ProposalRecord], *, exhausted: bool, replace: bool) -> None:
        """Reconcile the rows with `records` (see `QueueLoaded`), keeping the selection.

        `replace=True`: `records` is the whole window; rows not in it are removed.
        `replace=False`: `records` is a further page, added to the window.
        """
        selected, old_row = self.selected_id(), self.cursor_row
        now = self.clock()
        target = {} if replace else dict(self.records)
        target.update((r.id, r) for r in records)
        new_order = sorted(target)
        removed = [pid for pid in self.order if pid not in target]
        kept = [pid for pid in self.order if pid in target]
        added = [pid for pid in new_order if pid not in self.records]
        inserted_inside = bool(added and kept and added[0] < kept[-1])
        for pid in removed:
            self.effects.pop(pid, None)
        for pid, r in target.items():
            old = self.records.get(pid)
            if old is not None and old.request_hash != r.request_hash:
                self.effects.pop(pid, None)
        old_records = self.records
        fresh_load = self.loaded and replace  # not the first load, nor a further page
        arrived = [pid for pid in added if target[pid].status == "pending"] if fresh_load else []
        self.fresh = (self.fresh & set(target)) | set(arrived)
        self.marked &= set(target)
        self._needs = {pid: n for pid, n in self._needs.items() if pid in target}
        self.records, self.order, self.exhausted = target, new_order, exhausted
        if len(removed) > REBUILD_OVER or inserted_inside:
            self.clear()
            for pid in new_order:
                self.add_row(*self._cells(target[pid], now), key=str(pid))
        else:
            for pid in removed:
                self.remove_row(str(pid))
            for pid in kept:
                if old_records[pid] != target[pid]:
                    for (key, _label, _w), cell in zip(
                        COLUMNS, self._cells(target[pid], now), strict=True
                    ):
                        self.update_cell(str(pid), key, cell)
            for pid in added:
                self.add_row(*self._cells(target[pid], now), key=str(pid))
        self.loaded = True
        self.fit_reason()
        self._restore(selected, old_row)
        if arrived:
            self.app.bell()  # a new proposal waits
        self.post_message(self.SelectionChanged())

    def set_flags(self, pid: int, flags: list[RiskFlag]) -> None:
        """A summary-only sync's flags, once the detail pane computed them: its row gets
        the flag mark the other kinds get at once."""
        effect, record = self.effects.get(pid), self.records.get(pid)
        if effect is None or record is None or effect.flags_checked:
            return
        self.effects[pid] = replace(effect, flags=flags, flags_checked=True)
        cells = self._cells(record, self.clock())
        self.update_cell(str(pid), "kind", cells[1])

    def _restore(self, selected: int | None, old_row: int) -> None:
        if not self.order:
            return
        if selected is not None and selected in self.records:
            row = self.get_row_index(str(selected))
        else:
            row = min(max(old_row, 0), len(self.order) - 1)
        if row != self.cursor_row:
            self.move_cursor(row=row, animate=False)

    def select_id(self, pid: int) -> bool:
        """Move the cursor to proposal `pid` if it is loaded."""
        if pid not in self.records:
            return False
        self.move_cursor(row=self.get_row_index(str(pid)), animate=False)
        return True

    def action_first_row(self) -> None:
        if self.order:
            self.move_cursor(row=0, animate=False)

    def action_last_row(self) -> None:
        """Last loaded row (which loads the next page, if any)."""
        if self.order:
            self.move_cursor(row=len(self.order) - 1, animate=False)

    def tick(self) -> None:
        """Rewrite the countdown of the rows on screen (a 1 s timer owned by the table),
        and refit the columns if the width changed without a resize reaching the table."""
        if self.scrollable_content_region.width != self._fitted_width:
            self.fit_reason()
        if not self.order:
            return
        now = self.clock()
        first = max(int(self.scroll_y) - 1, 0)
        last = min(first + self.size.height + 2, len(self.order))
        for pid in self.order[first:last]:
            cell = expires_cell(self.records[pid], now)
            if pid in self.fresh:
                cell.stylize(FRESH_STYLE)
            self.update_cell(str(pid), "expires", cell)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.tick()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        pid, before = self.selected_id(), self._under_cursor
        self._under_cursor = pid
        if pid is not None and before is not None and pid != before:
            self._unmark(pid)  # the owner moved onto it
        self.post_message(self.SelectionChanged())

    def row_key_at(self, row: int) -> int:
        """Proposal id of a row (for tests and mouse handlers)."""
        key = self.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value
        return int(key or -1)


class QueuePane(Vertical):
    """Queue tab: counts, the table, the detail of the selection, the transfer panel."""

    DEFAULT_CSS = """
    QueuePane > #queue-count { height: 1; padding: 0 1; }
    QueuePane > QueueTable { height: auto; max-height: 40%; min-height: 3; }
    QueuePane > DetailPane { height: 1fr; min-height: 5; }
    QueuePane > #queue-actions { height: auto; }
    QueuePane > #queue-actions > Button { margin: 0 1; min-width: 12; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "app.accept_selected", "Accept"),
        Binding("d", "app.discard_selected", "Discard"),
        Binding("e", "app.extend_selected", "Extend +15m"),
    ]

    class NeedMore(Message):
        """The cursor neared the end of the loaded window: load the next page."""

    def __init__(self, clock: Callable[[], datetime], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.counts: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text("loading the queue..."), id="queue-count")
        yield QueueTable(self.clock, id="queue-table")
        yield DetailPane(self.clock, placeholder="No proposal selected.", id="queue-detail")
        yield TransferPanel(id="transfer")
        with Horizontal(id="queue-actions"):
            yield Button("Accept (a)", id="btn-accept", variant="success")
            yield Button("Discard (d)", id="btn-discard", variant="error")
            yield Button("Extend +15m (e)", id="btn-extend")
            yield Button("Help (?)", id="btn-help")

    @property
    def table(self) -> QueueTable:
        return self.query_one(QueueTable)

    def on_resize(self) -> None:
        # Below `BUTTONS_FROM` rows the buttons go (the footer names the same keys), so
        # the detail pane keeps most of the rows.
        self.query_one("#queue-actions").display = self.app.size.height >= BUTTONS_FROM

    def apply(
        self,
        records: list[ProposalRecord],
        *,
        exhausted: bool,
        replace: bool,
        counts: dict[str, int] | None = None,
    ) -> None:
        table = self.table
        table.apply(records, exhausted=exhausted, replace=replace)
        if counts is not None:
            self.counts = counts
        self.show_count()

    def show_count(self) -> None:
        """The line above the table: pending, running, marked, loaded."""
        table = self.table
        pending = self.counts.get("pending", 0)
        running = self.counts.get("approved", 0) + self.counts.get("executing", 0)
        count = Text(f"{pending} pending", style="bold", end="")
        if running:
            count.append(f", {running} accepted or executing")
        if table.marked:
            count.append(f"  {len(table.marked)} marked: a, d, e decide them", style="bold green")
        if not table.exhausted:
            count.append(f"  ({len(table.order)} loaded: move down to load more)", style="dim")
        shown = self.query("#queue-count")
        if shown:  # none while the pane is being removed (the app closing)
            shown.first(Static).update(count)

    def on_queue_table_marks_changed(self, event: QueueTable.MarksChanged) -> None:
        event.stop()
        self.show_count()

    def on_detail_pane_flags_checked(self, event: DetailPane.FlagsChecked) -> None:
        event.stop()
        self.table.set_flags(event.proposal_id, event.flags)

    def on_queue_table_selection_changed(self, event: QueueTable.SelectionChanged) -> None:
        event.stop()
        table = self.table
        self.query_one(DetailPane).show(table.selected())
        if table.near_end():
            self.post_message(self.NeedMore())

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        actions = {
            "btn-accept": "app.accept_selected",
            "btn-discard": "app.discard_selected",
            "btn-extend": "app.extend_selected",
            "btn-help": "app.help",
        }
        action = actions.get(event.button.id or "")
        if action:
            event.stop()
            await self.run_action(action)
