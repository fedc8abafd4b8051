"""The audit view: the append-only event log, newest first, and the chain check.

Every lifecycle transition is one audit event (docs/design.md section 4). The view lists the
newest `AUDIT_LIMIT` events with the selected one in full below; `v` runs
`store.verify_audit()` (hash chain plus the anchor file outside the database) and
reports the result.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from placet.store import AuditRecord
from placet.tui.render import audit_cells, audit_view

AUDIT_LIMIT = 500
"""Newest events shown (a rebuild of 500 rows is ~0.2 s)."""

_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("id", "event", 7),
    ("at", "at", 20),
    ("proposal", "proposal", 9),
    ("actor", "actor", 24),
    ("transition", "transition", 26),
    ("hash", "hash", 13),
)


class AuditPane(Vertical):
    """Table of audit events and the selected event's detail."""

    DEFAULT_CSS = """
    AuditPane > #audit-count { height: 1; padding: 0 1; }
    AuditPane > DataTable { height: 2fr; }
    AuditPane > VerticalScroll { height: 1fr; border: round $primary; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("v", "app.verify_audit", "Verify chain")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.events: dict[int, AuditRecord] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text("audit log not loaded yet"), id="audit-count")
        yield DataTable(id="audit-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll():
            yield Static(Text(""), id="audit-detail")

    def on_mount(self) -> None:
        table = self.query_one("#audit-table", DataTable)
        for key, label, width in _COLUMNS:
            table.add_column(Text(label), key=key, width=width)

    def apply(self, events: list[AuditRecord], total: int) -> None:
        """Show `events` (newest first); `total` is the number of events in the log."""
        table: DataTable[Text] = self.query_one("#audit-table", DataTable)
        if self.events and [e.id for e in events] == list(self.events):
            return  # nothing new since the last load
        selected = self._selected_id()
        self.events = {e.id: e for e in events}
        table.clear()
        for e in events:
            table.add_row(*audit_cells(e), key=str(e.id))
        if selected is not None and selected in self.events:
            table.move_cursor(row=table.get_row_index(str(selected)), animate=False)
        count = Text(f"{total} audit events", end="")
        if total > len(events):
            count.append(f" (newest {len(events)} shown)", style="dim")
        count.append("   v: verify the chain", style="dim")
        self.query_one("#audit-count", Static).update(count)
        self._show()

    def _selected_id(self) -> int | None:
        table = self.query_one("#audit-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return int(key) if key is not None else None

    def _show(self) -> None:
        pid = self._selected_id()
        event = self.events.get(pid) if pid is not None else None
        detail = self.query_one("#audit-detail", Static)
        detail.update(audit_view(event) if event is not None else Text(""))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show()
