"""The review app: where the owner accepts or discards what agents proposed.

A thin shell over the store and the executor (docs/design.md section 2): widgets render;
store calls and the executor run in thread workers whose results come back as dataclass
messages (`messages.py`). Three quick calls run on the event loop on purpose: the first
page before the first paint, the `data_version` poll and the owner's interrupt when
quitting mid-transfer. The queue reloads when another process commits (a 0.5 s poll on
SQLite, a `Store.change_waiter()` thread on PostgreSQL;
docs/decisions/0022-live-changes.md); `store.sweep()` runs every `settings.sweep_seconds`.
Selection follows the proposal id (`queue.py`); History and Audit mount when first
opened. Decisions and the transfer are `deciding.py`, its base class. The clock is
injectable (`make_app(clock=...)`); every store call gets `now=clock()`."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import get_current_worker

from placet.config import Settings
from placet.errors import PlacetError
from placet.store import ProposalRecord, Store
from placet.store.db import utcnow
from placet.text import inert, inert_with_ascii
from placet.tui.deciding import RETRY_STATUSES, Clock, DecidingApp, Executor
from placet.tui.facts import ACTIVE_STATUSES, agent_of, target_of
from placet.tui.messages import (
    ActionDone,
    AuditLoaded,
    DetailLoaded,
    HistoryLoaded,
    QueueLoaded,
    RulesRefused,
    StoreChanged,
    SweepDone,
)
from placet.tui.queue import PAGE, QueuePane

if TYPE_CHECKING:  # imported where used: not needed for the first paint
    from placet.tui.history import HistoryPane

POLL_SECONDS = 0.5
"""SQLite: how often the queue reads the data version."""
WATCH_SLICE = 0.5
"""PostgreSQL: longest the change thread sleeps before looking whether the app ended."""


class ReviewApp(DecidingApp):
    """`placet review`. Build it with `make_app`."""

    TITLE = "placet review"
    SUB_TITLE = "agents propose, you decide"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "request_quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("c", "view_content", "Content"),
        Binding("1", "show_tab('queue')", "Queue", show=False),
        Binding("2", "show_tab('history')", "History", show=False),
        Binding("3", "show_tab('audit')", "Audit", show=False),
    ]

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        clock: Clock = utcnow,
        executor: Executor | None = None,
        confirm_guard_seconds: float = 0.5,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.store = store
        self.clock = clock
        self.executor = executor
        self.confirm_guard_seconds = confirm_guard_seconds
        self.transfer: tuple[int, threading.Event] | None = None
        self.shown_views = {}
        self.retrying: int | None = None
        self.warming = set()
        self._data_version: int | None = None
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._max_seen_id: int | None = None
        self._loading_more = False
        self._swept_once = False
        self._tabs_mounted = False

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="queue", id="tabs"):
            with TabPane(Content("Queue [1]"), id="queue"):
                yield QueuePane(self.clock, id="queue-pane")
            # Hidden at start: their panes (and Textual's Select, which only they use)
            # are imported and mounted when first opened, not before the first paint.
            yield TabPane(Content("History [2]"), id="history")
            yield TabPane(Content("Audit [3]"), id="audit")
        yield Footer()

    async def mount_later_tabs(self) -> None:
        """Mount the History and Audit panes (once), when either tab is first opened."""
        if self._tabs_mounted:
            return
        self._tabs_mounted = True
        from placet.tui.audit import AuditPane
        from placet.tui.history import HistoryPane

        await self.query_one("#history", TabPane).mount(HistoryPane(self.clock, id="history-pane"))
        await self.query_one("#audit", TabPane).mount(AuditPane(id="audit-pane"))

    def on_mount(self) -> None:
        pane = self.queue_pane
        # Timers live on a widget: they stop when it is removed, never firing into a
        # half-torn-down app.
        if self.store.postgres:
            self.start_watching()
        else:
            pane.set_interval(POLL_SECONDS, self.poll_changes)
            self._data_version = self._read_version()
        pane.set_interval(self.settings.sweep_seconds, self.run_sweep)
        # The first page is read here, before the first paint, so the first frame is the
        # queue itself (one indexed read of PAGE rows, ~10 ms for 10,000 pending; a WAL
        # reader never waits for a writer). Every later read runs in a thread worker.
        try:
            self.on_queue_loaded(self.read_queue(PAGE))
        except PlacetError as e:
            self._refuse(e.error_code, inert(e.message))
            self.reload_queue()
        self.queue_table.focus()
        self.check_rules()

    @work(thread=True, group="rules", exit_on_error=False)
    def check_rules(self) -> None:
        """Tell the owner when the rules file is refused (no standing rule approves
        anything then), as `placet doctor` does: the roots checked are those the recent
        proposals used."""
        from pathlib import Path

        from placet.rules.ledger import RuleLedger
        from placet.rules.loading import load_rules

        try:
            roots = [Path(p) for p in RuleLedger(self.store).recent_roots()]
        except PlacetError:
            roots = []
        state = load_rules(self.settings, roots=roots)
        if state.status == "refused":
            self.post_message(RulesRefused(state.line()))

    def on_rules_refused(self, msg: RulesRefused) -> None:
        self.notify(
            inert(msg.message), title="Standing rules are off", severity="warning",
            markup=False, timeout=30,
        )  # fmt: skip

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # App-level keys do nothing while a modal (confirmation, discard, help) is up.
        modal = isinstance(self.screen, ModalScreen)
        if action == "accept_history":
            # Offered (footer and key) only for a selected failed or interrupted one.
            from placet.tui.history import HistoryPane

            panes = self.query(HistoryPane)
            record = panes.first().selected() if panes else None
            return record is not None and record.status in RETRY_STATUSES
        return not (modal and action in ("request_quit", "help", "show_tab", "view_content"))

    # -- loading --------------------------------------------------------------------------

    def _read_version(self) -> int | None:
        try:
            return self.store.data_version()
        except PlacetError:
            return None

    def poll_changes(self) -> None:
        """Reload when another connection committed (PRAGMA data_version moved)."""
        version = self._read_version()
        if version is not None and version != self._data_version:
            self._data_version = version
            self.reload_all()

    def start_watching(self) -> None:
        """PostgreSQL: start the thread that waits for changes (`watch_changes`); the
        app's unmount stops it. Not a Textual worker: it never completes, and waiting
        for the app's workers to finish must not wait for it."""
        self._watcher = threading.Thread(
            target=self.watch_changes, name="placet-review-changes", daemon=True
        )
        self._watcher.start()

    def on_unmount(self) -> None:
        for warm in list(self.warming):  # confirmations left open: nothing accepted
            warm.close()
        self.warming.clear()
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.join(WATCH_SLICE * 4)  # closes its LISTEN connection

    def watch_changes(self) -> None:
        """Wait in `Store.change_waiter()` until a change commits anywhere, then post
        `StoreChanged`, until the app ends (seen within `WATCH_SLICE` seconds). A lost
        connection is said once (a toast) and the waiter made again every `WATCH_SLICE`
        seconds until the server answers; then the queue is read again."""
        stop = self._watch_stop
        said = False
        while not stop.is_set():
            try:
                with self.store.change_waiter() as waiter:
                    if said:  # back: what changed meanwhile was missed
                        self.post_message(StoreChanged())
                    said = False
                    while not stop.is_set():
                        if waiter.wait(WATCH_SLICE, stop):
                            self.post_message(StoreChanged())
            except Exception as e:  # StoreError, or psycopg's from a dropped connection
                if not said:
                    code = e.error_code if isinstance(e, PlacetError) else "store_error"
                    why = e.message if isinstance(e, PlacetError) else f"{type(e).__name__}: {e}"
                    self.post_message(ActionDone(code, inert(why), "error", reload=False))
                    said = True
                stop.wait(WATCH_SLICE)

    def on_store_changed(self, msg: StoreChanged) -> None:
        self.reload_all()

    def reload_all(self) -> None:
        self.reload_queue()
        active = self.query_one(TabbedContent).active
        if active == "history":
            self.reload_history()
        elif active == "audit":
            self.load_audit()

    def reload_queue(self) -> None:
        self.load_queue(max(PAGE, len(self.queue_table.order)))

    def read_queue(self, limit: int) -> QueueLoaded:
        """The first `limit` active proposals, the counts, and the pending proposals new
        since the last read (store reads; raises PlacetError)."""
        seen = self._max_seen_id
        records = self.store.list(ACTIVE_STATUSES, limit=limit + 1)
        counts = self.store.counts()
        if seen is None:
            newest = self.store.list(None, limit=1, newest_first=True)
            new: list[ProposalRecord] = []
            max_id = newest[0].id if newest else 0
        else:
            new = self.store.list(["pending"], limit=100, after_id=seen)
            max_id = max([seen, *(r.id for r in new)])
        return QueueLoaded(records[:limit], len(records) <= limit, True, new, max_id, counts)

    @work(thread=True, exclusive=True, group="queue", exit_on_error=False)
    def load_queue(self, limit: int) -> None:
        """`read_queue` in a thread; the result comes back as a `QueueLoaded` message."""
        worker = get_current_worker()
        try:
            loaded = self.read_queue(limit)
        except PlacetError as e:
            self.post_message(ActionDone(e.error_code, inert(e.message), "error", reload=False))
            return
        if not worker.is_cancelled:
            self.post_message(loaded)

    @work(thread=True, exclusive=True, group="queue-more", exit_on_error=False)
    def load_more(self, after_id: int) -> None:
        try:
            records = self.store.list(ACTIVE_STATUSES, limit=PAGE + 1, after_id=after_id)
        except PlacetError as e:
            self.post_message(ActionDone(e.error_code, inert(e.message), "error", reload=False))
            return
        self.post_message(QueueLoaded(records[:PAGE], len(records) <= PAGE, False))

    def on_queue_pane_need_more(self, _: QueuePane.NeedMore) -> None:
        table = self.queue_table
        if not self._loading_more and table.order and not table.exhausted:
            self._loading_more = True
            self.load_more(table.order[-1])

    def on_queue_loaded(self, msg: QueueLoaded) -> None:
        if not msg.replace:
            self._loading_more = False
        if not self._swept_once:
            self._swept_once = True
            self.call_after_refresh(self.run_sweep)
        panes = self.query(QueuePane)
        if not panes:
            return  # a reload that lands while the app is closing: nothing left to show it
        panes.first().apply(
            msg.records, exhausted=msg.exhausted, replace=msg.replace, counts=msg.counts
        )
        if msg.max_id is None:
            return
        seen = self._max_seen_id
        fresh = [] if seen is None else [r for r in msg.new if r.id > seen]
        self._max_seen_id = max(seen or 0, msg.max_id)
        for r in fresh[:3]:
            self.notify(
                f"#{r.id} {r.kind} {inert_with_ascii(target_of(r))}, from {inert(agent_of(r))}",
                title="New proposal",
                markup=False,
            )
        if len(fresh) > 3:
            self.notify(f"and {len(fresh) - 3} more", title="New proposals", markup=False)

    def reload_history(self) -> None:
        from placet.tui.history import HistoryPane

        panes = self.query(HistoryPane)
        if panes:  # else never opened yet: it loads when first opened
            self.load_history(panes.first().status_filter)

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def load_history(self, statuses: list[str]) -> None:
        from placet.tui.history import HISTORY_LIMIT

        try:
            records = self.store.list(statuses, limit=HISTORY_LIMIT, newest_first=True)
            pid = self.retrying
            if pid is not None and all(r.id != pid for r in records):
                # Accepted again from here: its row stays (approved, executing) so the
                # selection stays on it instead of jumping to another proposal.
                records = sorted([*records, self.store.get(pid)], key=lambda r: -r.id)
        except PlacetError as e:
            self.post_message(ActionDone(e.error_code, inert(e.message), "error", reload=False))
            return
        self.post_message(HistoryLoaded(records))

    def on_history_loaded(self, msg: HistoryLoaded) -> None:
        self.history_pane.apply(msg.records)

    def on_history_pane_filter_changed(self, _: HistoryPane.FilterChanged) -> None:
        self.reload_history()

    def on_history_pane_selected(self, msg: HistoryPane.Selected) -> None:
        self.load_detail(msg.proposal_id)

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def load_detail(self, proposal_id: int) -> None:
        try:
            record = self.store.get(proposal_id)
            results = self.store.op_results(proposal_id)
            events = self.store.audit_events(proposal_id=proposal_id)
        except PlacetError:
            return
        self.post_message(DetailLoaded(record, results, events))

    def on_detail_loaded(self, msg: DetailLoaded) -> None:
        self.history_pane.show_detail(msg.record, msg.results, msg.events)

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False)
    def load_audit(self) -> None:
        try:
            events = self.store.audit_events()
        except PlacetError as e:
            self.post_message(ActionDone(e.error_code, inert(e.message), "error", reload=False))
            return
        from placet.tui.audit import AUDIT_LIMIT

        self.post_message(AuditLoaded(events[-AUDIT_LIMIT:][::-1], len(events)))

    def on_audit_loaded(self, msg: AuditLoaded) -> None:
        from placet.tui.audit import AuditPane

        panes = self.query(AuditPane)
        if panes:
            panes.first().apply(msg.events, msg.total)

    async def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id in ("history", "audit"):
            await self.mount_later_tabs()
        if event.pane.id == "history":
            self.reload_history()
        elif event.pane.id == "audit":
            self.load_audit()

    # -- sweeping -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sweep", exit_on_error=False)
    def run_sweep(self) -> None:
        """Expire due proposals and recover lapsed executions (docs/design.md section 9)."""
        try:
            result = self.store.sweep(now=self.clock())
        except PlacetError as e:
            self.post_message(ActionDone(e.error_code, inert(e.message), "error", reload=False))
            return
        self.post_message(SweepDone(result.expired, result.interrupted))

    def on_sweep_done(self, msg: SweepDone) -> None:
        if msg.expired:
            ids = ", ".join(f"#{i}" for i in msg.expired[:10])
            more = f" and {len(msg.expired) - 10} more" if len(msg.expired) > 10 else ""
            self.notify(f"{ids}{more} expired", title="Expired", markup=False)
        for pid in msg.interrupted:
            self.notify(
                f"#{pid} was executing when its executor stopped; it is now interrupted. "
                "Accept it again from History (key 2) to finish it.",
                title="Interrupted execution found",
                severity="warning",
                markup=False,
                timeout=15,
            )
        if msg.expired or msg.interrupted:
            self.reload_all()

    # -- navigation and quitting ----------------------------------------------------------

    def action_help(self) -> None:
        from placet.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_view_content(self) -> None:
        """Open the content view (`placet.tui.content_view`) of the selected proposal: the
        op under its op table's cursor, or its first op that writes a file."""
        from placet.tui.content_view import ContentScreen
        from placet.tui.detail import DetailPane

        if self.query_one(TabbedContent).active == "history":
            from placet.tui.history import HistoryPane

            panes = self.query(HistoryPane)
            record = panes.first().selected() if panes else None
            pane: Widget = panes.first() if panes else self.queue_pane
        else:
            record, pane = self.queue_table.selected(), self.queue_pane
        if record is None:
            self.notify("select a proposal first", title="Content", markup=False)
            return
        table = (detail := pane.query_one(DetailPane)).ops_table
        index = None
        if detail.has_class("-ops") and table.row_count:
            index = int(str(table.get_row_at(table.cursor_row)[0]))
        self.push_screen(ContentScreen(self.store, self.settings, record, index))

    async def action_show_tab(self, tab: str) -> None:
        if tab != "queue":
            await self.mount_later_tabs()
        self.query_one(TabbedContent).active = tab
        table_id = {"queue": "#queue-table", "history": "#history-table"}.get(tab, "#audit-table")
        self.query_one(table_id).focus()


def make_app(
    settings: Settings,
    store: Store,
    *,
    clock: Clock | None = None,
    executor: Executor | None = None,
    confirm_guard_seconds: float = 0.5,
) -> ReviewApp:
    """The review app over `store`, shared by `placet review` and the tests.

    Args:
        settings: owner settings (`sweep_seconds` sets the sweep cadence).
        store: an open store (`placet.store.open_store(settings)`).
        clock: returns aware UTC now; injected by tests to stand past an expiry.
        executor: `execute(store, settings, proposal_id, *, progress, cancel, drive)`;
            None means `placet.executor.execute`, imported when first needed.
        confirm_guard_seconds: how long the accept confirmation ignores keys and clicks.
    """
    return ReviewApp(
        settings,
        store,
        clock=clock or utcnow,
        executor=executor,
        confirm_guard_seconds=confirm_guard_seconds,
    )
