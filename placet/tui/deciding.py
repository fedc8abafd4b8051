"""Deciding in the review app: accept (and execute), discard, extend, verify, quit.

Accept binds to what was shown (docs/design.md section 9): the record is re-read and
refused if its hash changed, then accepted with the hash shown and the unticked ops,
which the approval event records. A proposal past its expiry, or one `placet accept`
would refuse before its code (`placet.executor.refusal_before_accept`), is refused before
the modal opens and again in the worker before an approval is recorded. One transfer at
a time: the executor runs in a thread worker and reports through dataclass messages
(byte-only progress rate-limited). Quitting during a transfer asks first, then marks the
proposal `interrupted` and stops the executor. `DecidingApp` is the base of `ReviewApp`
(`app.py`), which supplies the loading side."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from textual import work
from textual.app import App
from textual.screen import ModalScreen

from placet.config import Settings
from placet.errors import PlacetError, StaleEvidence
from placet.executor import check_before_accept
from placet.executor.audit import verify_audit
from placet.executor.service import release, reserve
from placet.proposals.approval import origin
from placet.schema import is_by_reference
from placet.store import OpResultRecord, ProposalRecord, Store
from placet.store.decisions import signature_required
from placet.store.host import runs_elsewhere, waiting_note
from placet.text import inert
from placet.tui.facts import Effect, countdown, effect_of
from placet.tui.messages import (
    ActionDone,
    TransferFinished,
    TransferProgress,
    TransferStarted,
)
from placet.tui.queue import QueueTable
from placet.tui.render import when
from placet.tui.transfer import TransferPanel

if TYPE_CHECKING:  # imported where used: not needed for the first paint
    from placet.tui.history import HistoryPane

Clock = Callable[[], datetime]
Executor = Callable[..., ProposalRecord]
"""`execute(store, settings, proposal_id, *, progress=None, cancel=None) -> ProposalRecord`."""

EXTEND_MINUTES = 15
ACCEPT_IN_WORKER = 5000
"""A by-reference sync with more ops is read and checked for its confirmation in a thread
worker (a smaller one on the event loop: a few tens of milliseconds)."""
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
    retrying: int | None
    """The proposal being accepted again from History, while its transfer runs."""

    @property
    def queue_table(self) -> QueueTable:
        return self.query_one(QueueTable)

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
        if self.settings.approvals == "signed":  # the store refuses it too
            refusal = signature_required(record.id, self.settings.config_file)
            self._refuse(f"not accepted: {refusal.error_code}", inert(refusal.message))
            return
        if not retry and record.is_expired(now):
            self._refuse(
                "expired",
                f"#{record.id} expired at {when(record.expires_at)} and can no longer be "
                "accepted; the agent must propose it again",
            )
            return

        count = record.request.get("op_count")
        large = isinstance(count, int) and count > ACCEPT_IN_WORKER
        if large and is_by_reference(record.kind, record.request):
            self.notify(f"reading and checking the {count:,} ops of #{record.id}...", markup=False)
            self.prepare_accept(record, retry, now)
            return
        self._confirm(record, retry, now, *check_before_accept(self.store, self.settings, record))

    @work(thread=True, exclusive=True, group="prepare-accept", exit_on_error=False)
    def prepare_accept(self, record: ProposalRecord, retry: bool, now: datetime) -> None:
        """`check_before_accept` for a large sync (every op read, verified and flagged:
        seconds for 100,000 ops), off the event loop; the confirmation opens when done."""
        refusal, ops = check_before_accept(self.store, self.settings, record)
        self.call_from_thread(self._confirm, record, retry, now, refusal, ops)

    def _confirm(
        self,
        record: ProposalRecord,
        retry: bool,
        now: datetime,
        refusal: PlacetError | None,
        ops: list[dict[str, Any]] | None,
    ) -> None:
        """Open the accept confirmation, unless `refusal` (see `check_before_accept`)."""
        if refusal is not None:
            self._refuse(f"not accepted: {refusal.error_code}", inert(refusal.message))
            return
        if self.transfer is not None or isinstance(self.screen, ModalScreen):
            return  # something else began while a large sync's ops were read

        from placet.tui.confirm import AcceptScreen

        previous = self._previous_results(record) if retry else None
        effect = effect_of(record, ops)
        screen = AcceptScreen(
            record,
            effect,
            now,
            guard_seconds=self.confirm_guard_seconds,
            previous=previous,
        )

        def decided(accept: bool | None) -> None:
            if accept:
                self.retrying = record.id if retry else None
                self._start_transfer(record, screen.skip_ops, effect)

        self.push_screen(screen, decided)

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

    def _start_transfer(
        self, record: ProposalRecord, skip_ops: list[int], effect: Effect | None = None
    ) -> None:
        cancel = threading.Event()
        self.transfer = (record.id, cancel)
        self.query_one(TransferPanel).start(record, skip_ops, effect)
        self.run_transfer(record.id, record.request_hash, cancel, skip_ops)

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
    def run_transfer(
        self,
        proposal_id: int,
        shown_hash: str,
        cancel: threading.Event,
        skip_ops: list[int] | None = None,
    ) -> None:
        """Accept with the hash that was shown and the ops the owner unticked (a sync's
        `skip_ops`, recorded in the approval event), then execute, posting progress."""
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
                )
            )

        reserve(proposal_id)  # this process runs it: its host loop leaves it alone
        try:
            current = self.store.get(proposal_id)
            if current.request_hash != shown_hash:
                raise StaleEvidence(
                    f"proposal #{proposal_id} changed after it was shown (request hash "
                    f"{current.request_hash[:12]}, shown {shown_hash[:12]}); review it again",
                    details={"shown": shown_hash, "stored": current.request_hash},
                )
            refusal, _ = check_before_accept(self.store, self.settings, current)
            if refusal is not None:  # checked again: nothing is accepted or run
                raise refusal
            detail: dict[str, Any] = {
                "request_hash": shown_hash,
                "via": "review",
                "tty": True,
                "origin": origin(_terminal_fd()),
            }
            if current.kind == "sync":
                detail["skip_ops"] = sorted(skip_ops or [])
            accepted = self.store.accept(
                proposal_id, actor="owner", now=self.clock(), detail=detail
            )
            if runs_elsewhere(accepted.host_id, self.store.host_id):
                # Its files are on the host it was made on: that host's placet runs it.
                self.post_message(TransferFinished(proposal_id, accepted, []))
                return
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
        finally:
            release(proposal_id)

    def on_transfer_started(self, msg: TransferStarted) -> None:
        self.reload_queue()

    def on_transfer_progress(self, msg: TransferProgress) -> None:
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
        )

    def on_transfer_finished(self, msg: TransferFinished) -> None:
        self.transfer = None
        self.retrying = None
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
