"""The detail pane: the exact effect of the selected proposal.

A proposal `placet accept` would refuse before its code is headed by a warning with the
same message. A one-line head (id, status, time to expiry) refreshes every second; the
body (folders created on the way, risk flags, every op, evidence, request hash,
attribution, results, the agent's boxed reason) is rebuilt only when the record changes,
so a large sync keeps its scroll. A sync whose ops are stored by reference shows its
counts at once, its ops in the op table a window at a time (`placet.tui.ops_table`), and
its flags once a worker has read and checked every op, so selecting a 100,000-op sync
never blocks the UI (docs/decisions/0023-ops-by-reference.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from placet.display import missing_folders_line
from placet.errors import PlacetError
from placet.executor import check_before_accept, refusal_before_accept
from placet.proposals.risk import RiskFlag
from placet.store import AuditRecord, OpResultRecord, ProposalRecord
from placet.store.host import runs_elsewhere
from placet.store.lifecycle import ACCEPTABLE
from placet.text import inert
from placet.tui.facts import Effect, effect_of, flags_of
from placet.tui.ops_table import OpsTable
from placet.tui.render import header_line, proposal_view, proposal_view_parts


def refusal_banner(refusal: PlacetError) -> Text:
    """The warning heading the detail of a proposal placet refuses to accept: the same
    message `placet accept` gives (`placet.executor.refusal_before_accept`)."""
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


class _Left(Exception):
    """The pane's check of a sync's ops was cancelled (see `DetailPane.check_sync`)."""


class DetailPane(VerticalScroll):
    """Shows one proposal; `show(None)` shows `placeholder`."""

    DEFAULT_CSS = """
    DetailPane { border: round $primary; padding: 0 1; height: 1fr; }
    DetailPane > .detail-head { height: auto; }
    DetailPane > .detail-body { height: auto; }
    DetailPane > .detail-rest { height: auto; display: none; }
    DetailPane > OpsTable { display: none; border: round $secondary; }
    DetailPane.-ops > .detail-rest { display: block; }
    DetailPane.-ops > OpsTable { display: block; }
    """

    class FlagsChecked(Message):
        """A summary-only sync's risk flags, computed over all of its ops."""

        def __init__(self, proposal_id: int, flags: list[RiskFlag]) -> None:
            super().__init__()
            self.proposal_id = proposal_id
            self.flags = flags

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
        self.effect: Effect | None = None
        self._parts: tuple[RenderableType, RenderableType] | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(self.placeholder), classes="detail-head")
        yield Static(Text(""), classes="detail-body")
        yield OpsTable(getattr(self.app, "store", None), id=f"{self.id or 'detail'}-ops")
        yield Static(Text(""), classes="detail-rest")

    @property
    def ops_table(self) -> OpsTable:
        return self.query_one(OpsTable)

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
        self.effect = effect = None if record is None else effect_of(record)
        by_reference = effect is not None and not effect.complete
        self.set_class(by_reference, "-ops")
        if record is None or effect is None:
            self.body = Text("")
        elif by_reference:
            if moved or self.ops_table.record is None:
                self.ops_table.show_ops(record, effect.total_ops)
            self._show_parts(record, effect, None)
            self.check_sync(record)
            self._after_show(moved)
            return
        else:
            view = proposal_view(record, effect, results, events)
            self.body = with_created_folders(record, view)
            refusal = self._refusal(record)
            if refusal is not None:
                self.body = Group(refusal_banner(refusal), Text(""), self.body)
        self.query_one(".detail-rest", Static).update(Text(""))
        self.query_one(".detail-body", Static).update(self.body)
        self._after_show(moved)

    def _after_show(self, moved: bool) -> None:
        if moved:
            self.scroll_home(animate=False)
        self.refresh_head()

    def _show_parts(
        self, record: ProposalRecord, effect: Effect, refusal: PlacetError | None
    ) -> None:
        """A by-reference sync: flags and effect above the op table, the rest below."""
        top, rest = proposal_view_parts(record, effect, self.results, self.events)
        if refusal is not None:
            top = Group(refusal_banner(refusal), Text(""), top)
        self.body = Group(top, Text(""), rest)
        self.query_one(".detail-body", Static).update(top)
        self.query_one(".detail-rest", Static).update(rest)

    @work(thread=True, exclusive=True, group="detail-check", exit_on_error=False)
    def check_sync(self, record: ProposalRecord) -> None:
        """Read and check every op of a by-reference sync (`Store.checked_ops`), then its
        risk flags and what `placet accept` would refuse; shown when done."""
        store, settings = getattr(self.app, "store", None), getattr(self.app, "settings", None)
        if store is None or settings is None:
            return
        worker = get_current_worker()

        def go_on(_read: int, _count: int) -> None:
            if worker.is_cancelled:
                raise _Left

        try:
            refusal, ops = check_before_accept(store, settings, record, on_page=go_on)
            if worker.is_cancelled:
                return  # another proposal was selected: its own check runs
            flags = flags_of(record, ops if ops is not None else store.ops(record.id))
        except PlacetError as e:  # unreadable: say so where the flags go
            refusal, flags = e, []
        except _Left:
            return
        if not worker.is_cancelled:
            self.app.call_from_thread(self.show_checked, record, flags, refusal)

    def hand_over_check(self, record_id: int) -> bool:
        """An accept's checks read and check every op of proposal `record_id` now: when
        the pane shows it with its flags unchecked, its own check of the same ops stops
        at the next page (they would share the interpreter), and True: the accept hands
        its flags, or its refusal, to `show_checked`."""
        if self.record is None or self.record.id != record_id or self.effect is None:
            return False
        if self.effect.flags_checked:
            return False
        self.workers.cancel_group(self, "detail-check")
        return True

    def show_checked(
        self, record: ProposalRecord, flags: list[RiskFlag], refusal: PlacetError | None
    ) -> None:
        """The flags of a summary-only sync computed over all of its ops, and what
        `placet accept` refuses it for (None: nothing)."""
        if self.record is None or self.record.id != record.id or self.effect is None:
            return
        self.effect = replace(self.effect, flags=flags, flags_checked=True)
        shown = refusal if record.status in ACCEPTABLE else None
        self._show_parts(self.record, self.effect, shown)
        self.post_message(self.FlagsChecked(record.id, flags))

    def _refusal(self, record: ProposalRecord) -> PlacetError | None:
        """What `placet accept` would refuse `record` for (drive changed, request
        altered, ...), for a proposal the owner can still accept; else None."""
        settings = getattr(self.app, "settings", None)
        if record.status not in ACCEPTABLE or settings is None:
            return None
        here = getattr(getattr(self.app, "store", None), "host_id", None)
        elsewhere = here is not None and runs_elsewhere(record.host_id, here)
        return refusal_before_accept(settings, record, elsewhere=elsewhere)

    def refresh_head(self) -> None:
        head = self.query_one(".detail-head", Static)
        if self.record is None:
            head.update(Text(self.placeholder, style="dim"))
        else:
            here = getattr(getattr(self.app, "store", None), "host_id", None)
            head.update(header_line(self.record, self.clock(), here))
