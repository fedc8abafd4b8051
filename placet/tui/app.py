"""The review app: where the owner accepts or discards what agents proposed.

The app is a thin shell over the store and the executor (DESIGN.md section 2). Widgets
render; every store call and the executor run in thread workers whose results come back
as dataclass messages (`messages.py`). The app decides:

- Live queue: a widget-owned timer polls `store.data_version()` every 0.5 s and reloads
  when another process changed the database, so a new proposal appears within a second
  without a key press (with a notification), and `store.sweep()` runs every
  `settings.sweep_seconds` (expiring due proposals, recovering lapsed executions).
- Accept binds to what was shown: the confirmation shows the request hash, and the
  accept call records that hash (`detail.request_hash`); the record is re-read first
  and refused if its hash changed. A pending proposal past `expires_at` is refused
  before the modal opens, and again by the store's compare-and-set if it expires while
  the modal is open.
- One transfer at a time. Quitting during a transfer asks first; if the owner insists,
  the executor is told to stop and the proposal is marked `interrupted`.
- The clock is injectable (`make_app(clock=...)`) so tests can stand past an expiry
  without sleeping; every store call is given `now=clock()`.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import get_current_worker

from placet.config import Settings
from placet.errors import PlacetError, StaleEvidence
from placet.store import ProposalRecord, Store
from placet.text import inert, inert_with_ascii
from placet.tui.facts import ACTIVE_STATUSES, agent_of, countdown, effect_of, target_of
from placet.tui.messages import (
    ActionDone,
    AuditLoaded,
    DetailLoaded,
    HistoryLoaded,
    QueueLoaded,
    SweepDone,
    TransferFinished,
    TransferProgress,
    TransferStarted,
)
from placet.tui.queue import PAGE, QueuePane, QueueTable
from placet.tui.render import when
from placet.tui.transfer import TransferPanel

if TYPE_CHECKING:  # imported where used: they are not needed for the first paint
    from placet.tui.history import HistoryPane

Clock = Callable[[], datetime]
Executor = Callable[..., ProposalRecord]
"""`execute(store, settings, proposal_id, *, progress=None, cancel=None) -> ProposalRecord`."""

POLL_SECONDS = 0.5
EXTEND_MINUTES = 15
PROGRESS_EVERY = 0.05
"""Seconds between progress messages from the executor thread (op results always go)."""
RETRY_STATUSES = ("failed", "interrupted")


def utc_now() -> datetime:
    return datetime.now(UTC)


class ReviewApp(App[None]):
    """`placet review`. Build it with `make_app`."""

    TITLE = "placet review"
    SUB_TITLE = "agents propose, you decide"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "request_quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("1", "show_tab('queue')", "Queue", show=False),
        Binding("2", "show_tab('history')", "History", show=False),
        Binding("3", "show_tab('audit')", "Audit", show=False),
    ]

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        clock: Clock = utc_now,
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
        self._data_version: int | None = None
        self._max_seen_id: int | None = None
        self._loading_more = False
        self._swept_once = False
        self._tabs_mounted = False

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="queue", id="tabs"):
            with TabPane("Queue (1)", id="queue"):
                yield QueuePane(self.clock, id="queue-pane")
            # Hidden at start: their panes (and Textual's Select, which only they use)
            # are imported and mounted when first opened, not before the first paint.
            yield TabPane("History (2)", id="history")
            yield TabPane("Audit (3)", id="audit")
        yield Footer()

    @property
    def queue_pane(self) -> QueuePane:
        return self.query_one(QueuePane)

    @property
    def queue_table(self) -> QueueTable:
        return self.query_one(QueueTable)

    @property
    def history_pane(self) -> HistoryPane:
        from placet.tui.history import HistoryPane

        return self.query_one(HistoryPane)

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
        # half-torn-down app (see LIBRARIES.md, Textual gotchas).
        pane.set_interval(POLL_SECONDS, self.poll_changes)
        pane.set_interval(self.settings.sweep_seconds, self.run_sweep)
        self._data_version = self._read_version()
        # The first page is read here, before the first paint, so the first frame is the
        # queue itself (one indexed read of PAGE rows, ~10 ms for 10,000 pending; a WAL
        # reader never waits for a writer). Every later read runs in a thread worker.
        try:
            self.on_queue_loaded(self.read_queue(PAGE))
        except PlacetError as e:
            self._refuse(e.error_code, inert(e.message))
            self.reload_queue()
        self.queue_table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # App-level keys do nothing while a modal (confirmation, discard, help) is up.
        modal = isinstance(self.screen, ModalScreen)
        return not (modal and action in ("request_quit", "help", "show_tab"))

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
        self.queue_pane.apply(
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
        """Expire due proposals and recover lapsed executions (DESIGN.md section 9)."""
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
                "Accept it again from History (2) to finish it.",
                title="Interrupted execution found",
                severity="warning",
                markup=False,
                timeout=15,
            )
        if msg.expired or msg.interrupted:
            self.reload_all()

    # -- deciding -------------------------------------------------------------------------

    def action_accept_selected(self) -> None:
        self._begin_accept(self.queue_table.selected(), retry=False)

    def action_accept_history(self) -> None:
        self._begin_accept(self.history_pane.selected(), retry=True)

    def _refuse(self, title: str, message: str) -> None:
        self.notify(message, title=title, severity="error", markup=False)

    def _begin_accept(self, record: ProposalRecord | None, *, retry: bool) -> None:
        if record is None:
            self.notify("select a proposal first", severity="warning", markup=False)
            return
        if self.transfer is not None:
            self._refuse("busy", f"#{self.transfer[0]} is executing; wait for it to finish")
            return
        now = self.clock()
        if retry and record.status not in RETRY_STATUSES:
            self._refuse(
                "not accepted",
                f"#{record.id} is {record.status}: only a failed or interrupted proposal "
                "can be accepted again",
            )
            return
        if not retry and record.status != "pending":
            self._refuse("not accepted", f"#{record.id} is {record.status}, not pending")
            return
        if not retry and record.is_expired(now):
            self._refuse(
                "expired",
                f"#{record.id} expired at {when(record.expires_at)} and can no longer be "
                "accepted; the agent must propose it again",
            )
            return

        def decided(accept: bool | None) -> None:
            if accept:
                self._start_transfer(record)

        from placet.tui.confirm import AcceptScreen

        screen = AcceptScreen(
            record, effect_of(record), now, guard_seconds=self.confirm_guard_seconds
        )
        self.push_screen(screen, decided)

    def _start_transfer(self, record: ProposalRecord) -> None:
        cancel = threading.Event()
        self.transfer = (record.id, cancel)
        self.query_one(TransferPanel).start(record)
        self.run_transfer(record.id, record.request_hash, cancel)

    def _resolve_executor(self) -> Executor:
        if self.executor is not None:
            return self.executor
        try:
            # Imported on first use: the review UI starts (and can discard) without it.
            execute = cast(Executor, importlib.import_module("placet.executor").execute)
        except (ImportError, AttributeError) as e:
            raise PlacetError(
                f"the proposal was accepted but this placet has no executor ({e}); "
                "run `placet accept ID` from a placet that has one",
                code="executor_unavailable",
            ) from e
        self.executor = execute
        return execute

    @work(thread=True, exclusive=True, group="transfer", exit_on_error=False)
    def run_transfer(self, proposal_id: int, shown_hash: str, cancel: threading.Event) -> None:
        """Accept with the hash that was shown, then execute, posting progress."""
        last = 0.0

        def progress(event: Any) -> None:
            nonlocal last
            t = time.monotonic()
            result = getattr(event, "op_result", None)
            if result is None and t - last < PROGRESS_EVERY:
                return
            last = t
            self.post_message(
                TransferProgress(
                    proposal_id,
                    event.op_index,
                    event.op_count,
                    event.bytes_done,
                    event.bytes_total,
                    result,
                )
            )

        try:
            current = self.store.get(proposal_id)
            if current.request_hash != shown_hash:
                raise StaleEvidence(
                    f"proposal #{proposal_id} changed after it was shown (request hash "
                    f"{current.request_hash[:12]}, shown {shown_hash[:12]}); review it again",
                    details={"shown": shown_hash, "stored": current.request_hash},
                )
            accepted = self.store.accept(
                proposal_id,
                actor="owner",
                now=self.clock(),
                detail={"request_hash": shown_hash, "via": "review", "tty": True},
            )
            self.post_message(TransferStarted(accepted))
            execute = self._resolve_executor()
            final = execute(
                self.store, self.settings, proposal_id, progress=progress, cancel=cancel
            )
            results = self.store.op_results(proposal_id)
            self.post_message(TransferFinished(proposal_id, final, results))
        except PlacetError as e:
            self.post_message(TransferFinished(proposal_id, None, [], e.message, e.error_code))
        except Exception as e:  # the UI must survive and say what happened
            self.post_message(
                TransferFinished(proposal_id, None, [], f"{type(e).__name__}: {e}", "error")
            )

    def on_transfer_started(self, msg: TransferStarted) -> None:
        self.reload_queue()

    def on_transfer_progress(self, msg: TransferProgress) -> None:
        panel = self.query_one(TransferPanel)
        panel.progress(msg.op_index, msg.op_count, msg.bytes_done, msg.bytes_total)
        if msg.op_result is not None:
            panel.op_result(msg.op_result)

    def on_transfer_finished(self, msg: TransferFinished) -> None:
        self.transfer = None
        self.query_one(TransferPanel).finish(msg.record, msg.results, msg.error)
        if msg.record is not None:
            ok = msg.record.status == "succeeded"
            done = sum(1 for r in msg.results if r.outcome in ("done", "already_done"))
            self.notify(
                f"#{msg.proposal_id} {msg.record.status}: {done} of {len(msg.results)} ops done",
                title="Executed" if ok else "Execution failed",
                severity="information" if ok else "error",
                markup=False,
            )
        else:
            self._refuse(msg.error_title or "error", inert(msg.error or "unknown error"))
        self.reload_all()

    def action_discard_selected(self) -> None:
        record = self.queue_table.selected()
        if record is None:
            return
        if record.status != "pending":
            self._refuse("not discarded", f"#{record.id} is {record.status}, not pending")
            return

        def decided(reason: str | None) -> None:
            if reason is not None:
                self.store_action("discard", record.id, reason or None)

        from placet.tui.confirm import DiscardScreen

        self.push_screen(DiscardScreen(record), decided)

    def action_extend_selected(self) -> None:
        record = self.queue_table.selected()
        if record is None:
            return
        if record.status != "pending" or record.is_expired(self.clock()):
            self._refuse("not extended", f"#{record.id} is no longer pending")
            return
        self.store_action("extend", record.id)

    def action_verify_audit(self) -> None:
        self.store_action("verify", 0)

    @work(thread=True, group="action", exit_on_error=False)
    def store_action(self, kind: str, proposal_id: int, reason: str | None = None) -> None:
        """Discard, extend or verify in a thread; the outcome comes back as `ActionDone`."""
        now = self.clock()
        try:
            if kind == "discard":
                self.store.discard(proposal_id, actor="owner", reason=reason, now=now)
                said = f": {inert(reason)}" if reason else ""
                msg = ActionDone("Discarded", f"#{proposal_id} discarded{said}")
            elif kind == "extend":
                r = self.store.extend(proposal_id, minutes=EXTEND_MINUTES, actor="owner", now=now)
                msg = ActionDone(
                    "Extended",
                    f"#{proposal_id} now expires at {when(r.expires_at)} "
                    f"(in {countdown(r.expires_at, now)})",
                )
            else:
                v = self.store.verify_audit()
                msg = ActionDone(
                    "Audit chain intact" if v.ok else "Audit chain BROKEN",
                    inert(f"{v.count} events checked. {v.message}"),
                    "information" if v.ok else "error",
                    reload=False,
                )
        except PlacetError as e:
            msg = ActionDone(e.error_code, inert(e.message), "error")
        self.post_message(msg)

    def on_action_done(self, msg: ActionDone) -> None:
        severity = msg.severity if msg.severity in ("information", "warning", "error") else "error"
        self.notify(msg.message, title=msg.title, severity=severity, markup=False)  # type: ignore[arg-type]
        if msg.reload:
            self.reload_all()

    # -- navigation and quitting ----------------------------------------------------------

    def action_help(self) -> None:
        from placet.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_show_tab(self, tab: str) -> None:
        if tab != "queue":
            await self.mount_later_tabs()
        self.query_one(TabbedContent).active = tab
        table_id = {"queue": "#queue-table", "history": "#history-table"}.get(tab, "#audit-table")
        self.query_one(table_id).focus()

    async def action_request_quit(self) -> None:
        await self.action_quit()

    async def action_quit(self) -> None:
        """Quit; while a transfer runs, ask first and mark it interrupted if insisted."""
        if self.transfer is None:
            self.exit()
            return
        from placet.tui.confirm import QuitScreen

        if isinstance(self.screen, QuitScreen):
            return
        self.push_screen(QuitScreen(self.transfer[0]), self._quit_answer)

    def _quit_answer(self, insist: bool | None) -> None:
        if not insist:
            return
        if self.transfer is not None:
            proposal_id, cancel = self.transfer
            # The owner's decision is recorded first (actor owner), then the executor is
            # told to stop; it finds the proposal already interrupted and writes no more.
            # PlacetError: it finished, or was not yet claimed, in the meantime.
            with contextlib.suppress(PlacetError):
                self.store.mark_interrupted(
                    proposal_id,
                    actor="owner",
                    now=self.clock(),
                    why="the owner quit the review UI during the transfer",
                )
            cancel.set()
        self.exit()

    def status_text(self) -> Text:
        """The queue count line (for tests and the benchmark)."""
        return Text(str(self.query_one("#queue-count").render()))


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
        executor: `execute(store, settings, proposal_id, *, progress, cancel)`;
            None means `placet.executor.execute`, imported when first needed.
        confirm_guard_seconds: how long the accept confirmation ignores keys and clicks.
    """
    return ReviewApp(
        settings,
        store,
        clock=clock or utc_now,
        executor=executor,
        confirm_guard_seconds=confirm_guard_seconds,
    )
