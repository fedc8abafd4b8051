"""The confirmation of a marked set: several proposals accepted with one decision.

It lists each proposal with its id, kind, request hash (first 12 characters), size and
target, exactly the records the app then hands to `placet.decisions` (all of them or
none). It has the guard of every accept modal (`GuardedConfirm`); when any proposal of
the set carries placet's risk flags (marked ``!``), the owner types the number of
proposals in the set. A sync in a set is accepted whole: accept it alone to untick
ops. When the set was refused because one changed, expired or was decided since it was
shown, the set still pending is shown again with the refusal above it (`note`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from placet.store import ProposalRecord
from placet.tui.confirm import GuardedConfirm, _Scrolling
from placet.tui.facts import Effect
from placet.tui.render import lit, set_lines

__all__ = ["AcceptSetScreen"]


class AcceptSetScreen(GuardedConfirm):
    """Confirm the acceptance of the marked proposals `records`; dismisses True to
    accept all of them, False to cancel."""

    DEFAULT_CSS = """
    AcceptSetScreen #set-list { height: auto; border: round $primary; }
    AcceptSetScreen #again { height: auto; border: round $error; }
    AcceptSetScreen #sync-note { height: auto; color: $text-muted; }
    """

    def __init__(
        self,
        records: Sequence[ProposalRecord],
        effects: dict[int, Effect],
        now: datetime,
        *,
        guard_seconds: float = 0.5,
        note: str | None = None,
    ) -> None:
        self.records = list(records)
        self.effects = effects
        self.now = now
        self.note = note
        """Why the set is shown again (a refusal's message), or None."""
        flagged = any(e.needs_typed_confirmation for e in effects.values())
        super().__init__(
            guard_seconds=guard_seconds, typed_required=flagged, word=str(len(self.records))
        )
        self.body = set_lines(self.records, effects)
        """The set as listed (a Rich Text; tests render it to text)."""

    def compose(self) -> ComposeResult:
        n = len(self.records)
        with _Scrolling(id="dialog"):
            with Vertical(id="decide"):
                top = Text(
                    f"{n} request hashes are recorded with your approval, one per proposal; "
                    "if any changed, expired or was decided since, none is accepted.",
                    end="",
                )
                yield from self.decide_controls(top, "a proposal of this set")
            title = Text(f"Accept these {n} proposals? ", style="bold", end="")
            title.append("placet runs exactly these, in this order (id, kind, request hash):")
            yield Static(title, id="title")
            if self.note is not None:
                again = Text("Shown again, nothing was accepted: ", style="bold red", end="")
                again.append_text(lit(self.note))
                yield Static(again, id="again")
            with VerticalScroll(id="set-scroll"):
                yield Static(self.body, id="set-list")

            if any(r.kind == "sync" for r in self.records):
                said = "A sync here is accepted with all its ops: accept it alone to untick ops."
                yield Static(Text(said), id="sync-note")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#set-list", Static).update(self._lines())

    def on_resize(self) -> None:
        self.query_one("#set-list", Static).update(self._lines())

    def _lines(self) -> Text:
        """The list fitted to the dialog (90 % of the screen, at most 130 cells, less its
        borders, padding and a scrollbar)."""
        width = min(self.app.size.width * 9 // 10, 130) - 8
        self.body = set_lines(self.records, self.effects, width=width)
        return self.body
