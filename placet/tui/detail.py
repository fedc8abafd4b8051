"""The detail pane: the exact effect of the selected proposal.

Two parts: a one-line head (id, status, live time to expiry) refreshed by the pane's
own one-second timer, and the body (the remote folders an upload or mkdir creates on the
way, risk flags, every op, evidence, request hash, attribution, per-op results, the
agent's boxed reason) rebuilt only when the shown
record changes, so a large sync is not re-rendered every second and the owner's scroll
position in it is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from placet.display import missing_folders_line
from placet.store import AuditRecord, OpResultRecord, ProposalRecord
from placet.tui.facts import effect_of
from placet.tui.render import header_line, proposal_view


def with_created_folders(record: ProposalRecord, view: RenderableType) -> RenderableType:
    """`view` headed by the line saying which remote folders an upload or mkdir creates on
    the way (`placet.display.missing_folders_line`), when it creates any or may."""
    line = missing_folders_line(record.kind, record.request, record.evidence)
    if line is None:
        return view
    return Group(Text(line, style="bold"), Text(""), view)


class DetailPane(VerticalScroll):
    """Shows one proposal; `show(None)` shows `placeholder`."""

    DEFAULT_CSS = """
    DetailPane { border: round $primary; padding: 0 1; height: 1fr; }
    DetailPane > .detail-head { height: auto; }
    DetailPane > .detail-body { height: auto; }
    """

    def __init__(
        self, clock: Callable[[], datetime], *, placeholder: str, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.placeholder = placeholder
        self.record: ProposalRecord | None = None
        self.results: Sequence[OpResultRecord] | None = None
        self.events: Sequence[AuditRecord] | None = None
        self.body: RenderableType = Text("")
        """What the body shows now (a Rich renderable; tests render it to text)."""

    def compose(self) -> ComposeResult:
        yield Static(Text(self.placeholder), classes="detail-head")
        yield Static(Text(""), classes="detail-body")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh_head)

    def show(
        self,
        record: ProposalRecord | None,
        results: Sequence[OpResultRecord] | None = None,
        events: Sequence[AuditRecord] | None = None,
    ) -> None:
        """Display `record` (with its op results and audit trail, for a finished one)."""
        if (record, results, events) == (self.record, self.results, self.events):
            self.refresh_head()
            return
        moved = self.record is None or record is None or record.id != self.record.id
        self.record, self.results, self.events = record, results, events
        if record is None:
            self.body = Text("")
        else:
            view = proposal_view(record, effect_of(record), results, events)
            self.body = with_created_folders(record, view)
        self.query_one(".detail-body", Static).update(self.body)
        if moved:
            self.scroll_home(animate=False)
        self.refresh_head()

    def refresh_head(self) -> None:
        head = self.query_one(".detail-head", Static)
        if self.record is None:
            head.update(Text(self.placeholder, style="dim"))
        else:
            head.update(header_line(self.record, self.clock()))
