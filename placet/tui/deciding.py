"""Deciding in the review app: accept (and execute), discard, extend, verify, quit.

Every decision goes through `placet.decisions` (the checks, the binding to what was
shown, the approval's proof, all or nothing for a set); this module keeps the input
and the display. Accept binds to what was shown (docs/design.md section 9): the record
the confirmation showed, its request hash and the ops the owner unticked. Refusals the
core gives before any confirmation (`decisions.state_refusal`, `decisions.check`)
are shown before a modal opens. Marked proposals (space) are accepted, discarded or
extended together with one confirmation that lists each id with its request hash; if
any changed, expired or was decided since, nothing is decided and the set is shown
again. One transfer at a time: accepted proposals run one after another in a thread
worker that reports through dataclass messages, on the drive warmed as the checks
began (`placet.decisions.warming`; closed if the confirmation is refused, cancelled or
left open at exit). Quitting during a transfer asks first. `DecidingApp` is the base
of `ReviewApp` (placet/tui/app.py), which supplies loading.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.screen import ModalScreen

from placet import decisions
from placet.config import Settings
from placet.decisions import Proof, Shown, WarmDrive, state_refusal
from placet.errors import PlacetError, SetRefused, one_or_set
from placet.executor import Plan
from placet.executor.audit import verify_audit
from placet.schema import is_by_reference
from placet.store import OpResultRecord, ProposalRecord, Store
from placet.store.host import waiting_note
from placet.store.lifecycle import PENDING
from placet.text import inert
from placet.tui.facts import Effect, countdown, effect_of_plan
from placet.tui.messages import (
    ActionDone,
    TransferFinished,
    TransferProgress,
    TransferStarted,
)
from placet.tui.queue import QueuePane, QueueTable
from placet.tui.render import when
from placet.tui.transfer import TransferPanel

if TYPE_CHECKING:  # imported where used: not needed for the first paint
    from placet.tui.detail import DetailPane
    from placet.tui.history import HistoryPane

Clock = Callable[[], datetime]
Checked = tuple[Plan, Effect]
"""An accept's checks passed: the plan they read, and its effect as the confirmation
shows it."""
Executor = decisions.Executor

EXTEND_MINUTES = 15
ACCEPT_IN_WORKER = 5000
"""A by-reference sync with more ops is read and checked for its confirmation in a thread
worker (a smaller one on the event loop: a few tens of milliseconds). Its plan, read
there once (`decisions.check`), is what the confirmation shows and what the accept runs
(`Shown.plan`): nothing goes over every op between the decision and the first op."""
PROGRESS_EVERY = 0.05
"""Seconds between progress messages from the executor thread that only move bytes; an
event with an op result, or that changes the ops ended or the ops in flight, always goes
(the panel's counts and running rows are exact; bytes are cumulative, so a byte-only
event left out is covered by the next one)."""
RETRY_STATUSES = ("failed", "interrupted")


def _terminal_fd() -> int | None:
    """The review UI's terminal (stdin, else stdout), or None."""
    for stream in (sys.stdin, sys.stdout):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        if os.isatty(fd):
            return fd
    return None


class DecidingApp(App[None]):
    """The owner's decisions and the transfer; see the module doc."""

    settings: Settings
    store: Store
    clock: Clock
    executor: Executor | None
    confirm_guard_seconds: float
    transfer: tuple[int, threading.Event] | None
    shown_views: dict[int, tuple[ProposalRecord, list[int], Effect | None]]
    """The proposals of the decision being carried out: record, unticked ops, effect."""
    retrying: int | None
    """The proposal being accepted again from History, while its transfer runs."""
    warming: set[WarmDrive]
    """The drives warmed for accepts being confirmed, not yet handed to a transfer."""

    @property
    def queue_table(self) -> QueueTable:
        return self.query_one(QueueTable)

    @property
    def queue_pane(self) -> QueuePane:
        return self.query_one(QueuePane)

    @property
    def history_pane(self) -> HistoryPane:
        from placet.tui.history import HistoryPane

        return self.query_one(HistoryPane)

    def reload_all(self) -> None:
        """Reload what is shown from the store (the app's loading side)."""
        raise NotImplementedError

    def reload_queue(self) -> None:
        raise NotImplementedError

    def action_accept_selected(self) -> None:
        marked = self.queue_table.marked_records()
        if marked:
            self._begin_accept_set(marked)
        else:
            self._begin_accept(self.queue_table.selected(), retry=False)

    def _begin_accept_set(self, records: list[ProposalRecord], note: str | None = None) -> None:
        """Check the marked `records` (`decisions.state_refusal`, then the checks before
        accepting in a worker) and open the set's confirmation; a refusal lists each."""
        if self.transfer is not None:
            self._refuse("busy", f"#{self.transfer[0]} is executing; wait for it to finish")
            return
        now = self.clock()
        refused = [(r.id, e) for r in records if (e := state_refusal(self.settings, r, now=now))]
        if refused:
            self._refuse_set(refused, len(records))
            return
        self.prepare_set(records, note, self._warm_up(records))

    def _refuse_set(self, refused: list[tuple[int, PlacetError]], size: int) -> None:
        e = one_or_set("accept", size, refused)
        self._refuse(f"not accepted: {e.error_code}", inert(e.message))

    def _checked(self, record: ProposalRecord, now: datetime) -> Plan | PlacetError:
        """The checks of accepting `record` as it is shown now (`decisions.check`, every
        op read, verified and checked once): the plan they read, or the refusal."""
        try:
            return decisions.check(self.store, self.settings, Shown.of(record), now=now).plan
        except PlacetError as e:
            return e

    def _warm_up(self, records: list[ProposalRecord]) -> WarmDrive:
        """The drive an accept of `records` would run on, opened from now on."""
        warm = decisions.warm_for(self.settings, self.store.host_id, records)
        self.warming.add(warm)
        return warm

    def _warm_down(self, warm: WarmDrive) -> None:
        """Nothing is accepted on `warm`: its rcd is stopped, off the event loop."""
        self.warming.discard(warm)
        threading.Thread(target=warm.close, name="placet-warm-close", daemon=True).start()

    @contextlib.contextmanager
    def _cooled_if_failed(self, warm: WarmDrive) -> Iterator[None]:
        """`warm` closed if the checks fail with an error they do not return as a
        refusal: their worker then ends with no confirmation, which would close it."""
        try:
            yield
        except BaseException:
            self._warm_down(warm)
            raise

    @work(thread=True, exclusive=True, group="prepare-accept", exit_on_error=False)
    def prepare_set(self, records: list[ProposalRecord], note: str | None, warm: WarmDrive) -> None:
        """The checks of accepting each marked proposal (`_checked`), off the event loop;
        the set's confirmation opens when every one passed."""
        refused: list[tuple[int, PlacetError]] = []
        effects: dict[int, tuple[Effect, Plan]] = {}
        with self._cooled_if_failed(warm):
            now = self.clock()
            for r in records:
                plan = self._checked(r, now)
                if isinstance(plan, PlacetError):
                    refused.append((r.id, plan))
                else:
                    effects[r.id] = (effect_of_plan(r, plan), plan)
        self.call_from_thread(self._confirm_set, records, effects, refused, note, warm)

    def _confirm_set(
        self,
        records: list[ProposalRecord],
        effects: dict[int, tuple[Effect, Plan]],
        refused: list[tuple[int, PlacetError]],
        note: str | None,
        warm: WarmDrive,
    ) -> None:
        if refused:
            self._warm_down(warm)
            self._refuse_set(refused, len(records))
            return
        if self.transfer is not None or isinstance(self.screen, ModalScreen):
            self._warm_down(warm)
            return
        from placet.tui.set_confirm import AcceptSetScreen

        shown = {pid: effect for pid, (effect, _) in effects.items()}
        screen = AcceptSetScreen(
            records, shown, self.clock(), guard_seconds=self.confirm_guard_seconds, note=note
        )

        def decided(accept: bool | None) -> None:
            if not accept:
                self._warm_down(warm)
                return
            self.retrying = None
            views = {r.id: (r, shown.get(r.id)) for r in records}
            shown_now = [Shown.of(r, (), effects[r.id][1]) for r in records]
            self.start_decided(shown_now, views, warm)

        self.push_screen(screen, decided)

    def show_set_again(self, records: list[ProposalRecord], why: str) -> None:
        """A set refused whole: its proposals still pending are marked and shown again,
        with the refusal above them."""
        self.queue_table.set_marks({r.id for r in records})
        self.queue_pane.show_count()
        if records:
            self._begin_accept_set(records, note=why)

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
        refusal = state_refusal(self.settings, record, now=now)
        if refusal is not None:
            self._refuse(f"not accepted: {refusal.error_code}", inert(refusal.message))
            return
        count = record.request.get("op_count")
        large = isinstance(count, int) and count > ACCEPT_IN_WORKER
        warm = self._warm_up([record])
        if large and is_by_reference(record.kind, record.request):
            self.notify(f"reading and checking the {count:,} ops of #{record.id}...", markup=False)
            for pane in self._detail_panes():
                pane.hand_over_check(record.id)  # the accept reads the same ops
            self.prepare_accept(record, retry, now, warm)
            return
        self._confirm(record, retry, now, self._checked_view(record, now), warm)

    @work(thread=True, exclusive=True, group="prepare-accept", exit_on_error=False)
    def prepare_accept(
        self, record: ProposalRecord, retry: bool, now: datetime, warm: WarmDrive
    ) -> None:
        """The checks of accepting a large sync (`_checked`: every op read, verified and
        checked: seconds for 100,000 ops) and its effect and risk flags, off the event
        loop; the confirmation opens when done."""
        with self._cooled_if_failed(warm):
            checked = self._checked_view(record, now)
        self.call_from_thread(self._confirm, record, retry, now, checked, warm)

    def _checked_view(self, record: ProposalRecord, now: datetime) -> Checked | PlacetError:
        """`_checked`, and the effect (risk flags included) of the plan it read."""
        plan = self._checked(record, now)
        if isinstance(plan, PlacetError):
            return plan
        return plan, effect_of_plan(record, plan)

    def _confirm(
        self,
        record: ProposalRecord,
        retry: bool,
        now: datetime,
        checked: Checked | PlacetError,
        warm: WarmDrive,
    ) -> None:
        """Open the accept confirmation of `record` as `checked` (its plan and effect)
        holds it, unless the checks refused it (see `_checked`); `warm`: the drive its
        accept runs on."""
        for pane in self._detail_panes():  # the flags (or the refusal) the checks found
            if pane.effect is not None and not pane.effect.flags_checked:
                flags = [] if isinstance(checked, PlacetError) else checked[1].flags
                refusal = checked if isinstance(checked, PlacetError) else None
                pane.show_checked(record, flags, refusal)
        if isinstance(checked, PlacetError):
            self._warm_down(warm)
            self._refuse(f"not accepted: {checked.error_code}", inert(checked.message))
            return
        plan, effect = checked
        if self.transfer is not None or isinstance(self.screen, ModalScreen):
            self._warm_down(warm)
            return  # something else began while a large sync's ops were read

        from placet.tui.confirm import AcceptScreen

        previous = self._previous_results(record) if retry else None
        screen = AcceptScreen(
            record,
            effect,
            now,
            guard_seconds=self.confirm_guard_seconds,
            previous=previous,
        )

        def decided(accept: bool | None) -> None:
            if not accept:
                self._warm_down(warm)
                return
            self.retrying = record.id if retry else None
            self._start_transfer(record, screen.skip_ops, effect, plan, warm)

        self.push_screen(screen, decided)

    def _start_transfer(
        self,
        record: ProposalRecord,
        skip_ops: list[int],
        effect: Effect | None = None,
        plan: Plan | None = None,
        warm: WarmDrive | None = None,
    ) -> None:
        """Accept `record` as shown (`plan`: as its confirmation read it), with `skip_ops`
        unticked, then run it (on `warm`'s drive, else one the run opens)."""
        shown = [Shown.of(record, skip_ops, plan)]
        self.start_decided(shown, {record.id: (record, effect)}, warm or WarmDrive(None))

    def start_decided(
        self,
        shown: list[Shown],
        views: dict[int, tuple[ProposalRecord, Effect | None]],
        warm: WarmDrive,
    ) -> None:
        """Accept the proposals `shown` (all or none) and run those of this host, one
        after another, on `warm`'s drive; `views`: each one's record and effect as shown
        (the transfer panel lists its ops)."""
        self.warming.discard(warm)  # the transfer closes it
        cancel = threading.Event()
        first = shown[0].proposal_id
        self.transfer = (first, cancel)
        self.shown_views = {
            pid: (record, sorted(s.skip_ops), effect)
            for s in shown
            for pid, (record, effect) in [(s.proposal_id, views[s.proposal_id])]
        }
        # What is held now (a large sync's plan and effect: millions of objects) lives
        # until the run ends: out of the collector's full passes, which would stall the
        # run's first ops for half a second at 100,000 ops (`on_transfer_finished` thaws).
        gc.freeze()
        self.run_transfer(shown, cancel, warm)  # first: the panel's table does not hold it up
        record, skip, effect = self.shown_views[first]
        self.query_one(TransferPanel).start(record, skip, effect)

    def _detail_panes(self) -> list[DetailPane]:
        from placet.tui.detail import DetailPane

        return list(self.query(DetailPane))

    def _previous_results(self, record: ProposalRecord) -> list[OpResultRecord]:
        """The op results of `record`'s last attempt: those the history detail shows, else
        one indexed store read."""
        from placet.tui.detail import DetailPane

        detail = self.history_pane.query_one(DetailPane)
        if detail.record is not None and detail.record.id == record.id and detail.results:
            return list(detail.results)
        try:
            return self.store.op_results(record.id)
        except PlacetError:
            return []

    @work(thread=True, exclusive=True, group="transfer", exit_on_error=False)
    def run_transfer(self, shown: list[Shown], cancel: threading.Event, warm: WarmDrive) -> None:
        """Accept `shown` through the decision core (``via: "tui"``), then execute each
        approved proposal of this host in turn on `warm`'s drive, posting progress; one
        another host runs is reported as waiting for it. `warm` is closed at the end."""
        with warm:
            self._accept_and_run(shown, cancel, warm)

    def _accept_and_run(self, shown: list[Shown], cancel: threading.Event, warm: WarmDrive) -> None:
        first = shown[0].proposal_id
        try:
            accepted = decisions.accept(
                self.store, self.settings, shown, Proof.tui(_terminal_fd()), now=self.clock()
            )
        except SetRefused as e:
            self.post_message(
                TransferFinished(first, None, [], e.message, e.error_code, again=self._again(e))
            )
            return
        except PlacetError as e:
            self.post_message(TransferFinished(first, None, [], e.message, e.error_code))
            return
        except Exception as e:  # the UI must survive and say what happened
            said = f"{type(e).__name__}: {e}"
            self.post_message(TransferFinished(first, None, [], said, "error"))
            return
        for n, a in enumerate(accepted):
            more = n + 1 < len(accepted)
            pid = a.proposal_id
            if cancel.is_set():  # the owner quit: the rest stay approved for this host
                decisions.leave(a)
                continue
            if not a.runs_here:  # its files are on the host it was made on
                self.post_message(TransferFinished(pid, a.record, [], more=more))
                continue
            self.post_message(TransferStarted(a.record))
            try:
                final = decisions.run(
                    self.store,
                    self.settings,
                    a,
                    progress=self._progress_poster(pid),
                    cancel=cancel,
                    execute=self.executor,
                    drive=warm.drive(),
                )
                results = self.store.op_results(pid)
                self.post_message(TransferFinished(pid, final, results, more=more))
            except PlacetError as e:
                self.post_message(
                    TransferFinished(pid, None, [], e.message, e.error_code, more=more)
                )
            except Exception as e:  # the UI must survive and say what happened
                self.post_message(
                    TransferFinished(pid, None, [], f"{type(e).__name__}: {e}", "error", more=more)
                )

    def _again(self, refused: SetRefused) -> list[ProposalRecord]:
        """A set refused whole: its proposals still pending, read again, to show again."""
        again = []
        for pid in self.shown_views:
            try:
                record = self.store.get(pid)
            except PlacetError:
                continue
            if record.status == PENDING and not record.is_expired(self.clock()):
                again.append(record)
        return again

    def _progress_poster(self, proposal_id: int) -> Callable[[Any], None]:
        """The executor's progress callback: every event that ends an op or changes the
        ops ended or in flight, and byte-only events at most every `PROGRESS_EVERY` s."""
        last = 0.0
        shown: tuple[int | None, tuple[int, ...] | None] = (None, None)

        def progress(event: Any) -> None:
            nonlocal last, shown
            t = time.monotonic()
            result = getattr(event, "op_result", None)
            ops_done = getattr(event, "ops_done", None)
            flying = getattr(event, "in_flight", None)
            state = (ops_done, None if flying is None else tuple(flying))
            if result is None and state == shown and t - last < PROGRESS_EVERY:
                return  # bytes only: coalesced into the next event (bytes are cumulative)
            last, shown = t, state
            self.post_message(
                TransferProgress(
                    proposal_id,
                    event.op_index,
                    event.op_count,
                    event.bytes_done,
                    event.bytes_total,
                    result,
                    ops_done=state[0],
                    in_flight=state[1],
                    current=getattr(event, "current", None),
                )
            )

        return progress

    def on_transfer_started(self, msg: TransferStarted) -> None:
        if self.transfer is not None:
            self.transfer = (msg.record.id, self.transfer[1])
        panel = self.query_one(TransferPanel)
        if panel.proposal_id != msg.record.id:  # the next one of a set
            record, skip, effect = self.shown_views.get(msg.record.id, (msg.record, [], None))
            panel.start(record, skip, effect)
        self.reload_queue()

    def on_transfer_progress(self, msg: TransferProgress) -> None:
        if not self.query(TransferPanel):
            return  # the app is closing
        panel = self.query_one(TransferPanel)
        if msg.op_result is not None:  # first: the event's in_flight no longer lists it
            panel.op_result(msg.op_result)
        panel.progress(
            msg.op_index,
            msg.op_count,
            msg.bytes_done,
            msg.bytes_total,
            ops_done=msg.ops_done,
            in_flight=msg.in_flight,
            current=msg.current,
            result=msg.op_result,
        )

    def on_transfer_finished(self, msg: TransferFinished) -> None:
        if not self.query(TransferPanel):
            return  # it landed while the app is closing: nothing left to show it
        if not msg.more:
            self.transfer = None
            self.retrying = None
            gc.unfreeze()
        self.query_one(TransferPanel).finish(msg.record, msg.results, msg.error)
        if msg.record is not None and msg.record.status == "approved":
            note = waiting_note("approved", msg.record.host, msg.record.host_id, "")
            self.notify(
                f"#{msg.proposal_id} approved; {inert(note or 'waiting for its host')}, "
                "which runs it",
                title="Approved",
                markup=False,
            )
        elif msg.record is not None:
            ok = msg.record.status == "succeeded"
            done = sum(1 for r in msg.results if r.outcome in ("done", "already_done"))
            skipped = sum(1 for r in msg.results if r.outcome == "skipped")
            ran = len(msg.results) - skipped
            said = f", {skipped} skipped (unticked)" if skipped else ""
            self.notify(
                f"#{msg.proposal_id} {msg.record.status}: {done} of {ran} ops done{said}",
                title="Executed" if ok else "Execution failed",
                severity="information" if ok else "error",
                markup=False,
            )
        else:
            self._refuse(msg.error_title or "error", inert(msg.error or "unknown error"))
        if msg.record is not None and not msg.more and len(self.shown_views) > 1:
            self.queue_table.clear_marks()  # the marked set was decided
        self.reload_all()
        if msg.error_title == "set_refused":
            self.show_set_again(msg.again, msg.error or "")

    def _chosen(self) -> list[ProposalRecord]:
        """The marked proposals (id order), else the one under the cursor."""
        table = self.queue_table
        marked = table.marked_records()
        if marked:
            return marked
        record = table.selected()
        return [] if record is None else [record]

    def action_discard_selected(self) -> None:
        records = self._chosen()
        if not records:
            return
        gone = [r for r in records if r.status != PENDING]
        if gone:
            which = ", ".join(f"#{r.id} is {r.status}" for r in gone)
            self._refuse("not discarded", f"{which}, not pending")
            return

        def decided(reason: str | None) -> None:
            if reason is not None:
                self.store_action("discard", records, reason or None)

        from placet.tui.confirm import DiscardScreen

        self.push_screen(DiscardScreen(records), decided)

    def action_extend_selected(self) -> None:
        records = self._chosen()
        if not records:
            return
        now = self.clock()
        gone = [r for r in records if r.status != PENDING or r.is_expired(now)]
        if gone:
            which = ", ".join(f"#{r.id}" for r in gone)
            self._refuse("not extended", f"{which} no longer pending")
            return
        self.store_action("extend", records)

    def action_verify_audit(self) -> None:
        self.store_action("verify", [])

    @work(thread=True, group="action", exit_on_error=False)
    def store_action(
        self, kind: str, records: list[ProposalRecord], reason: str | None = None
    ) -> None:
        """Discard or extend `records` (all or none, `placet.decisions`) or verify the
        audit chain, in a thread; the outcome comes back as `ActionDone`."""
        now = self.clock()
        ids = ", ".join(f"#{r.id}" for r in records)
        try:
            if kind == "discard":
                shown = [Shown.of(r) for r in records]
                decisions.discard(self.store, shown, reason=reason, now=now)
                said = f": {inert(reason)}" if reason else ""
                msg = ActionDone("Discarded", f"{ids} discarded{said}", marked=True)
            elif kind == "extend":
                done = decisions.extend(
                    self.store, [r.id for r in records], minutes=EXTEND_MINUTES, now=now
                )
                msg = ActionDone(
                    "Extended",
                    "; ".join(
                        f"#{r.id} now expires at {when(r.expires_at)} "
                        f"(in {countdown(r.expires_at, now)})"
                        for r in done
                    ),
                    marked=True,
                )
            else:
                v = verify_audit(self.store)
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
        if msg.marked:
            self.queue_table.clear_marks()
        if msg.reload:
            self.reload_all()

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
