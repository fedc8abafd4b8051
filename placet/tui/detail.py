"""The detail pane: the exact effect of the selected proposal.

A proposal placet would refuse to accept (made against another drive than the
configured one, a request that no longer hashes as stored, ...: the checks `placet
accept` makes before its code) is headed by a warning with the same message.

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
from placet.errors import PlacetError
from placet.store import AuditRecord, OpResultRecord, ProposalRecord
from placet.text import inert
from placet.tui.facts import effect_of
from placet.tui.render import header_line, proposal_view

DECIDABLE = ("pending", "failed", "interrupted")
"""Statuses the owner can still accept (again): the detail warns when placet would refuse."""


def refusal_banner(refusal: PlacetError) -> Text:
    """The warning heading the detail of a proposal placet refuses to accept: the same
    message `placet accept` gives (`placet.tui.deciding.refusal_before_accept`)."""
    out = Text(f"WARNING: placet will refuse to accept this ({refusal.error_code}): ", end="")
    out.stylize("bold white on red")
    out.append(inert(refusal.message), style="bold red")
    return out


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
            refusal = self._refusal(record)
            if refusal is not None:
                self.body = Group(refusal_banner(refusal), Text(""), self.body)
        self.query_one(".detail-body", Static).update(self.body)
        if moved:
            self.scroll_home(animate=False)
        self.refresh_head()

    def _refusal(self, record: ProposalRecord) -> PlacetError | None:
        """What `placet accept` would refuse `record` for (drive changed, request
        altered, ...), for a proposal the owner can still accept; else None."""
        settings = getattr(self.app, "settings", None)
        if record.status not in DECIDABLE or settings is None:
            return None
        from placet.tui.deciding import refusal_before_accept  # deciding imports this module

        return refusal_before_accept(settings, record)

    def refresh_head(self) -> None:
        head = self.query_one(".detail-head", Static)
        if self.record is None:
            head.update(Text(self.placeholder, style="dim"))
        else:
            head.update(header_line(self.record, self.clock()))
