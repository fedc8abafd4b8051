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
from placet.tui import tables
from placet.tui.render import audit_cells, audit_view

AUDIT_LIMIT = 500
"""Newest events shown (a rebuild of 500 rows is ~0.2 s)."""

_COLUMNS: tables.Columns = (
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
        tables.add_columns(self.query_one("#audit-table", DataTable), _COLUMNS)

    def apply(self, events: list[AuditRecord], total: int) -> None:
        """Show `events` (newest first); `total` is the number of events in the log."""
        table: DataTable[Text] = self.query_one("#audit-table", DataTable)
        if self.events and [e.id for e in events] == list(self.events):
            return  # nothing new since the last load
        self.events = {e.id: e for e in events}
        tables.refill(table, ((e.id, audit_cells(e)) for e in events))
        count = Text(f"{total} audit events", end="")
        if total > len(events):
            count.append(f" (newest {len(events)} shown)", style="dim")
        count.append("   v: verify the chain", style="dim")
        self.query_one("#audit-count", Static).update(count)
        self._show()

    def _show(self) -> None:
        pid = tables.selected_id(self.query_one("#audit-table", DataTable))
        event = self.events.get(pid) if pid is not None else None
        detail = self.query_one("#audit-detail", Static)
        detail.update(audit_view(event) if event is not None else Text(""))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show()
