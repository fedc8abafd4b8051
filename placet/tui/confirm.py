"""Modal decisions: accept (with its guard and typed confirmation), discard, quit.

Accept binds to what was shown (docs/design.md section 9): the modal states the exact
effect (remote folders created on the way included) and the request hash, and the app
hands that very record, hash and selection to `placet.decisions`. Every accept modal
(`GuardedConfirm`: one proposal here, a marked set in `placet.tui.set_confirm`) ignores
keys and clicks for `guard_seconds` (0.5 s) after it opens, so a key meant for the queue
cannot land on "Accept"; a proposal carrying placet's risk flags needs a word typed. A
sync gets its ops with a tick box each (`placet.tui.sync_view.SyncPicker`); the unticked
ops are its `skip_ops`. Unticking every op is refused here (discard instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar, TypeVar

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from placet.store import OpResultRecord, ProposalRecord
from placet.tui.detail import with_created_folders
from placet.tui.facts import Effect
from placet.tui.render import header_line, lit, name, proposal_view, set_lines
from placet.tui.sync_view import SyncPicker

ResultT = TypeVar("ResultT")


class ModalDialog(ModalScreen[ResultT]):
    """A centred `#dialog` with its `#buttons` on the right; every modal decision is
    one (Textual gives a subclass its bases' CSS, under its own CSS)."""

    DEFAULT_CSS = """
    ModalDialog { align: center middle; }
    ModalDialog > #dialog {
        width: 90%; max-width: 130; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    ModalDialog #buttons { height: auto; align-horizontal: right; }
    ModalDialog #buttons > Button { margin: 0 1; }
    """


OPS_SHOWN = 200
"""Ops the accept confirmation lists one by one, evidence and all, as `placet accept` does;
the rest are counted (the risk flags of every op are all shown, the counts of every kind
above them). Drawing more kept the owner of a large sync waiting without adding a fact."""
STALE_SHOWN = 5
"""Stale paths a retry confirmation names (the rest are counted)."""


def retry_note(previous: Sequence[OpResultRecord]) -> Text:
    """What accepting a failed or interrupted proposal again will do, from the op results
    of its last attempt: ops that ended done/already_done are re-checked and found
    already done; stale ops (the file changed since the plan) will be stale again unless
    the files are restored, so a new plan from the agent is the better way."""
    done = [r for r in previous if r.outcome in ("done", "already_done")]
    stale = [r for r in previous if r.outcome == "stale"]
    failed = [r for r in previous if r.outcome == "failed"]
    out = Text("Accepting again. Last attempt: ", style="bold", end="")
    out.append(
        f"{len(done)} op{'s' if len(done) != 1 else ''} ended done or already_done "
        "(they will be re-checked and found already done)"
    )
    if failed:
        out.append(f"; {len(failed)} failed (they run again)")
    if not previous:
        out.append("; no op results were recorded")
    if stale:
        out.append(
            f"\n{len(stale)} op{'s were' if len(stale) != 1 else ' was'} stale: the files "
            "changed since the plan, and will be stale again unless they are restored: ",
            style="bold red",
        )
        for n, r in enumerate(stale[:STALE_SHOWN]):
            out.append(", " if n else "")
            out.append_text(name(r.op.get("remote_path") or r.op.get("local_path") or "?"))
        if len(stale) > STALE_SHOWN:
            out.append(f" and {len(stale) - STALE_SHOWN} more")
        out.append("\nBetter: cancel, discard it, and ask the agent for a new plan.", style="bold")
    return out


class _Scrolling(VerticalScroll, can_focus=False):
    """The accept dialog: scrolls (wheel, PageUp/PageDown) but never takes focus, so a
    click on a disabled button cannot pull focus away from the typed-id field."""


class GuardedConfirm(ModalDialog[bool]):
    """An accept confirmation: its controls ignore every key and click for
    `guard_seconds` after it opens, and a flagged decision needs `word` typed (the
    screen's `decide_controls` yields the typed field and the buttons). Dismisses True
    to accept, False to cancel."""

    DEFAULT_CSS = """
    GuardedConfirm > #dialog { height: auto; max-height: 95%; }
    GuardedConfirm #decide { dock: bottom; height: auto; background: $surface; }
    GuardedConfirm #hash { height: auto; }
    GuardedConfirm #typed-label { height: auto; color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Accept"),
        Binding("n,escape", "cancel", "Cancel"),
        Binding("pagedown", "scroll_dialog(1)", "Scroll", show=False),
        Binding("pageup", "scroll_dialog(-1)", "Scroll", show=False),
    ]

    def __init__(self, *, guard_seconds: float, typed_required: bool, word: str) -> None:
        super().__init__()
        self.guard_seconds = guard_seconds
        self.armed = False
        self.typed_required = typed_required
        self.word = word
        """What the owner must type for a flagged decision."""

    def decide_controls(self, top: Text, what: str) -> ComposeResult:
        """The part docked at the dialog's bottom (on screen at 80x24 however long the
        rest is): `top` (the request hash), the typed field when flagged, the buttons."""
        yield Static(top, id="hash")
        if self.typed_required:
            yield Label(
                Text(
                    f"placet flagged {what}. Type {self.word} and press Enter to accept.",
                    style="bold",
                ),
                id="typed-label",
            )
            yield Input(placeholder=f"type {self.word}", id="typed", disabled=True)
        with Horizontal(id="buttons"):
            yield Button(
                "Accept",
                id="accept",
                variant="error" if self.typed_required else "success",
                disabled=True,
            )
            yield Button("Cancel", id="cancel", disabled=True)

    def on_mount(self) -> None:
        self.set_focus(None)
        if self.guard_seconds <= 0:
            self.arm()
        else:
            self.set_timer(self.guard_seconds, self.arm)

    def arm(self) -> None:
        """End of the guard: controls become usable."""
        self.armed = True
        self.query_one("#cancel", Button).disabled = False
        if self.typed_required:
            typed = self.query_one("#typed", Input)
            typed.disabled = False
            typed.focus()
        else:
            accept = self.query_one("#accept", Button)
            accept.disabled = False
            accept.focus()

    def action_scroll_dialog(self, direction: int) -> None:
        dialog = self.query_one("#dialog", VerticalScroll)
        if direction > 0:
            dialog.scroll_page_down(animate=False)
        else:
            dialog.scroll_page_up(animate=False)

    def typed_ok(self) -> bool:
        if not self.typed_required:
            return True
        return self.query_one("#typed", Input).value.strip() == self.word

    def _accept(self) -> None:
        self.dismiss(True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Nothing during the guard; and a single key never accepts a flagged decision.
        return self.armed and not (action == "confirm" and self.typed_required)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "typed":
            self.query_one("#accept", Button).disabled = not (self.armed and self.typed_ok())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.armed and self.typed_ok():
            self._accept()
        else:
            self.notify(
                f"type {self.word} exactly to accept, or press Escape to cancel",
                title="not accepted",
                severity="warning",
                markup=False,
            )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if not self.armed:
            return
        if event.button.id == "accept" and self.typed_ok():
            self._accept()
        elif event.button.id == "cancel":
            self.dismiss(False)

    def action_confirm(self) -> None:
        if self.armed and self.typed_ok():
            self._accept()

    def action_cancel(self) -> None:
        self.dismiss(False)


class AcceptScreen(GuardedConfirm):
    """Confirm acceptance of one proposal; dismisses True to accept, False to cancel."""

    DEFAULT_CSS = """
    AcceptScreen #effect { height: auto; max-height: 30; border: round $primary; }
    AcceptScreen.-sync #effect { max-height: 10; }
    AcceptScreen #retry-note { height: auto; border: round $error; }
    """

    def __init__(
        self,
        record: ProposalRecord,
        effect: Effect,
        now: datetime,
        *,
        guard_seconds: float = 0.5,
        previous: Sequence[OpResultRecord] | None = None,
    ) -> None:
        super().__init__(
            guard_seconds=guard_seconds,
            typed_required=effect.needs_typed_confirmation,
            word=str(record.id),
        )
        self.record = record
        self.previous = previous
        """Accepting again: the op results of the last attempt; None for a first accept."""
        self.note = retry_note(previous) if previous is not None else None
        """What accepting again will do (a Rich Text; tests render it to text)."""
        self.effect = effect
        self.now = now
        self.shown_hash = record.request_hash
        view = proposal_view(record, effect, max_ops=OPS_SHOWN)
        self.body = with_created_folders(record, view)
        """The effect as shown (a Rich renderable; tests render it to text)."""

    def compose(self) -> ComposeResult:
        r = self.record
        # The dialog scrolls; the hash, the typed field and the buttons are docked at its
        # bottom, so they stay on screen at 80x24 however long the effect is.
        with _Scrolling(id="dialog"):
            with Vertical(id="decide"):
                hash_line = Text("request hash (recorded with your approval): ", end="")
                hash_line.append(self.shown_hash, style="bold")
                yield from self.decide_controls(hash_line, "this proposal")
            title = Text(f"Accept proposal #{r.id}? ", style="bold", end="")
            title.append("placet will then execute exactly this:", style="")
            yield Label(title, id="title")
            yield Static(header_line(r, self.now), id="head")
            if self.note is not None:
                yield Static(self.note, id="retry-note")
            if r.kind == "sync":
                done = None
                if self.previous is not None:
                    ended = ("done", "already_done")
                    done = sum(1 for p in self.previous if p.outcome in ended)
                yield SyncPicker(r, self.effect, id="sync-picker", disabled=True, done_before=done)
            with VerticalScroll(id="effect"):
                yield Static(self.body, id="effect-body")

    @property
    def picker(self) -> SyncPicker | None:
        """The op selection of a sync proposal; None for any other kind."""
        found = self.query(SyncPicker)
        return found.first() if found else None

    @property
    def skip_ops(self) -> list[int]:
        """Op indexes the owner unticked (a sync's selection); [] otherwise."""
        picker = self.picker
        return picker.skip_ops if picker is not None else []

    def on_mount(self) -> None:
        if self.record.kind == "sync":
            self.add_class("-sync")
        super().on_mount()

    def arm(self) -> None:
        super().arm()
        if self.picker is not None:
            self.picker.disabled = False

    def _accept(self) -> None:
        """Dismiss True, unless every op of a sync is unticked (nothing would run)."""
        picker = self.picker
        if picker is not None and picker.nothing_selected:
            self.notify(
                "every op is unticked, so nothing would run: tick at least one, or cancel "
                "and discard the proposal",
                title="not accepted",
                severity="warning",
                markup=False,
            )
            return
        self.dismiss(True)


class DiscardScreen(ModalDialog[str | None]):
    """Discard one proposal, or a marked set (each listed with its request hash), with an
    optional reason; dismisses the reason, None to cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, records: Sequence[ProposalRecord]) -> None:
        super().__init__()
        self.records = list(records)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            if len(self.records) == 1:
                r = self.records[0]
                yield Label(Text(f"Discard proposal #{r.id} ({r.kind})?", style="bold", end=""))
                reason = Text("The agent's reason was: ", style="dim", end="")
                reason.append_text(lit(r.reason))
                yield Static(reason)
            else:
                title = f"Discard these {len(self.records)} proposals? (id, kind, request hash)"
                yield Static(Text(title, style="bold", end=""))
                yield Static(set_lines(self.records), id="set-list")
            yield Label(Text("Your reason (optional, the agent will see it):"))
            yield Input(placeholder="reason", id="discard-reason", max_length=200)
            with Horizontal(id="buttons"):
                yield Button("Discard", id="discard", variant="error")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_resize(self) -> None:
        found = self.query("#set-list")
        if found:  # the dialog: 90 % of the screen, at most 130 cells, less its frame
            width = min(self.app.size.width * 9 // 10, 130) - 6
            found.first(Static).update(set_lines(self.records, width=width))

    def _reason(self) -> str:
        return self.query_one(Input).value.strip()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(self._reason())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(self._reason() if event.button.id == "discard" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuitScreen(ModalDialog[bool]):
    """Quitting while a transfer runs: True means stop it and mark it interrupted."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("n,escape", "stay", "Keep running")]

    def __init__(self, proposal_id: int) -> None:
        super().__init__()
        self.proposal_id = proposal_id

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(
                Group(
                    Text(f"Proposal #{self.proposal_id} is executing.", style="bold"),
                    Text(
                        "Quit anyway? The transfer stops and the proposal is marked "
                        "interrupted; accept it again later to finish it (ops already "
                        "done report already_done)."
                    ),
                )
            )
            with Horizontal(id="buttons"):
                yield Button("Quit and interrupt", id="quit", variant="error")
                yield Button("Keep running", id="stay", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#stay", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "quit")

    def action_stay(self) -> None:
        self.dismiss(False)
