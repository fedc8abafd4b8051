"""History: finished proposals (succeeded, failed, discarded, expired, withdrawn,
interrupted), newest first, filtered by status and by agent, with per-op results.

The status filter is pushed down to the store; the agent filter (label or client name,
attribution only) is applied to the loaded rows. A failed or interrupted proposal can be
accepted again from here (`a`): ops already done then report `already_done`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Select, Static

from placet.store import AuditRecord, OpResultRecord, ProposalRecord
from placet.tui import tables
from placet.tui.detail import DetailPane
from placet.tui.facts import TERMINAL_STATUSES, agent_of
from placet.tui.render import history_cells, lit

HISTORY_LIMIT = 500
"""Newest finished proposals loaded per filter (a rebuild of 500 rows is ~0.2 s)."""

_COLUMNS: tables.Columns = (
    ("id", "id", 6),
    ("kind", "kind", 8),
    ("target", "target", 36),
    ("status", "status", 11),
    ("agent", "agent", 16),
    ("resolved", "resolved", 20),
    ("by", "by", 12),
)
ALL = "*"


class HistoryPane(Vertical):
    """Filters, the table of finished proposals, and the selected one's detail."""

    DEFAULT_CSS = """
    HistoryPane > #history-filters { height: auto; }
    HistoryPane > #history-filters > Select { width: 32; margin-right: 1; }
    HistoryPane > #history-count { height: 1; padding: 0 1; }
    HistoryPane > DataTable { height: 2fr; min-height: 5; }
    HistoryPane > DetailPane { height: 3fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("a", "app.accept_history", "Accept again")]

    class FilterChanged(Message):
        """The status filter changed: the app reloads from the store."""

    class Selected(Message):
        """A finished proposal was selected: the app loads its op results."""

        def __init__(self, proposal_id: int) -> None:
            super().__init__()
            self.proposal_id = proposal_id

    def __init__(self, clock: Callable[[], datetime], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.records: list[ProposalRecord] = []
        self.shown: dict[int, ProposalRecord] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(id="history-filters"):
            yield Select(
                [(Text(s), s) for s in TERMINAL_STATUSES],
                prompt="status: all",
                id="history-status",
            )
            yield Select([], prompt="agent: all", id="history-agent")
        yield Static(Text(""), id="history-count")
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield DetailPane(self.clock, placeholder="No finished proposal selected.")

    def on_mount(self) -> None:
        tables.add_columns(self.query_one("#history-table", DataTable), _COLUMNS)

    @property
    def status_filter(self) -> list[str]:
        value = self.query_one("#history-status", Select).value
        return [value] if isinstance(value, str) else list(TERMINAL_STATUSES)

    @property
    def agent_filter(self) -> str | None:
        value = self.query_one("#history-agent", Select).value
        return value if isinstance(value, str) else None

    def selected_id(self) -> int | None:
        return tables.selected_id(self.query_one("#history-table", DataTable))

    def selected(self) -> ProposalRecord | None:
        pid = self.selected_id()
        return None if pid is None else self.shown.get(pid)

    def apply(self, records: list[ProposalRecord]) -> None:
        """Show `records` (newest first) under the agent filter; keep the selection."""
        if records == self.records and self.shown:
            return  # a reload that found no change (e.g. heartbeats during a transfer)
        self.records = records
        agents = sorted({agent_of(r) for r in records})
        agent_select: Select[str] = self.query_one("#history-agent", Select)
        current = self.agent_filter
        with agent_select.prevent(Select.Changed):
            agent_select.set_options([(lit(a), a) for a in agents])
            if current in agents:
                agent_select.value = current
        self._render_rows()

    def _render_rows(self) -> None:
        table: DataTable[Text] = self.query_one("#history-table", DataTable)
        agent = self.agent_filter
        rows = [r for r in self.records if agent is None or agent_of(r) == agent]
        self.shown = {r.id: r for r in rows}
        tables.refill(table, ((r.id, history_cells(r)) for r in rows))
        count = Text(f"{len(rows)} finished proposal{'s' if len(rows) != 1 else ''}", end="")
        if len(self.records) >= HISTORY_LIMIT:
            count.append(f" (newest {HISTORY_LIMIT} loaded)", style="dim")
        self.query_one("#history-count", Static).update(count)
        self._announce()

    def _announce(self) -> None:
        self.app.refresh_bindings()  # "Accept again" is offered for failed/interrupted only
        pid = self.selected_id()
        detail = self.query_one(DetailPane)
        if pid is None:
            detail.show(None)
        else:
            self.post_message(self.Selected(pid))

    def show_detail(
        self, record: ProposalRecord, results: list[OpResultRecord], events: list[AuditRecord]
    ) -> None:
        if record.id == self.selected_id():
            self.query_one(DetailPane).show(record, results, events)

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.select.id == "history-status":
            self.post_message(self.FilterChanged())
        else:
            self._render_rows()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._announce()
