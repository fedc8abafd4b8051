"""The help screen: every key and what it does, and what the screens show."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

HELP = """\
placet review: agents propose, you decide. Nothing an agent proposes
happens until you accept it here (or with `placet accept`).

Keys 1, 2, 3 switch tabs: the digits in the tab titles are these keys,
not counts.

Queue [1]    pending proposals, oldest first; the detail pane shows the
             exact effect
  up/down    select (the selection follows the proposal, not the row)
  a          accept: a confirmation shows every op and the request
             hash; keys are ignored for half a second; a flagged
             proposal needs its id typed
  d          discard, with an optional reason the agent will see
  e          extend the time to live by 15 minutes (capped at 24 h
             from creation)
  c          content: what the bytes of the selected op say (a new
             file's first lines, a replacement's diff), checked
             against the evidence now; n/p: next/previous op
History [2]  finished proposals; filter by status and agent
  a          accept a failed or interrupted proposal again
Audit [3]    the audit log, newest first
  v          verify the audit chain
?            this help (Escape, q or ? closes it)
q            quit (asks first while a transfer runs)

Risk flags are computed by placet (executable or configuration targets,
secret-like names, replacements, renamed or non-ASCII names). The
agent's reason is shown boxed: it is the agent's claim, not something
placet checked. Text from agents, file names and the remote is shown
escaped: control characters appear as \\x1b, \\u202e, ...
"""


class HelpScreen(ModalScreen[None]):
    """Key reference; any of Escape, q, ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 98%; max-width: 80; height: auto; max-height: 95%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    HelpScreen VerticalScroll { height: auto; max-height: 1fr; }
    HelpScreen #help-text { width: 1fr; }
    HelpScreen Button { dock: bottom; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Button("Close (Esc)", id="close")
            with VerticalScroll(id="help-scroll"):
                yield Static(Text(HELP), id="help-text")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
