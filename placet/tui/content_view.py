"""The content view: what the bytes of the selected proposal's op say (key ``c``).

One op at a time, the op that writes a file: the one under the op table's cursor for a
sync, else the first; ``n`` and ``p`` move to the next and previous op that writes a
file. The preview is opened in a thread worker (`placet.preview.opening.open_preview`:
the stored capture or a bounded read, checked against the evidence now, so a file
changed since proposed shows as such, never as the content) and rendered by
`placet.preview.model.render_op`: the title, how each side is bound to its digest, then
the lines, added ones green, removed ones red, hunks cyan, placet's notes dim. Every
line is inert text in a `rich.text.Text`, never markup. A drive is opened only when a
remote file must be read, and closed with the view.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from placet.errors import PlacetError
from placet.executor import op_at, stored_ops
from placet.preview.model import CHANGED, render_op
from placet.preview.opening import writes_file
from placet.preview.render import Line, Rendering
from placet.schema import Op
from placet.store import ProposalRecord
from placet.text import inert

if TYPE_CHECKING:
    from placet.config import Settings
    from placet.drive.base import Drive
    from placet.store import Store

_STYLE = {"add": "green", "del": "red", "hunk": "cyan", "note": "dim italic"}
_MARK = {"add": "+", "del": "-", "context": " ", "hunk": "", "text": "", "note": "# "}


def rendering_text(r: Rendering) -> Text:
    """The lines of `r` as one Rich `Text`: each kind its colour, cut lines marked."""
    out = Text(end="")
    for i, line in enumerate(r.lines):
        if i:
            out.append("\n")
        out.append_text(_line(line))
    return out


def _line(line: Line) -> Text:
    text = Text(_MARK.get(line.kind, "") + line.text, style=_STYLE.get(line.kind, ""), end="")
    if line.cut:
        text.append(f" ... [{line.cut} more characters]", style="dim")
    return text


@dataclass
class ContentLoaded(Message):
    """An op's preview, rendered (or why it could not be opened)."""

    op: Op | None
    rendering: Rendering | None
    error: str = ""


class ContentScreen(ModalScreen[None]):
    """The content of one op of `record`; Escape or q closes it."""

    DEFAULT_CSS = """
    ContentScreen { background: $background; }
    ContentScreen > Vertical { height: 1fr; }
    ContentScreen #content-head { height: auto; padding: 0 1; background: $boost; }
    ContentScreen #content-title { height: auto; padding: 0 1; text-style: bold; }
    ContentScreen VerticalScroll { height: 1fr; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("n", "step(1)", "Next op"),
        Binding("p", "step(-1)", "Previous op"),
    ]

    def __init__(
        self, store: Store, settings: Settings, record: ProposalRecord, op_index: int | None
    ) -> None:
        super().__init__()
        self.store = store
        self.settings = settings
        self.record = record
        self.op_index = op_index
        self.op: Op | None = None
        self.rendering: Rendering | None = None
        self._drive: Drive | None = None
        self._drive_lock = threading.Lock()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"#{self.record.id} {inert(self.record.kind)}"), id="content-head")
            yield Static(Text("reading the content...", style="dim"), id="content-title")
            with VerticalScroll(id="content-scroll"):
                yield Static(Text(""), id="content-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#content-scroll").focus()
        self.load(self.op_index, 0)

    def on_unmount(self) -> None:
        with self._drive_lock:
            drive, self._drive = self._drive, None
        if drive is not None:
            threading.Thread(target=drive.close, name="placet-content-drive", daemon=True).start()

    def drive(self) -> Drive:
        """The configured drive, opened when a remote file is first read."""
        with self._drive_lock:
            if self._drive is None:
                from placet.drive import drive_for

                self._drive = drive_for(self.settings)
            return self._drive

    @work(thread=True, exclusive=True, group="content", exit_on_error=False)
    def load(self, index: int | None, step: int) -> None:
        """Find the op (`index`, or the next/previous op that writes a file from it, or
        the first), open and render its preview; post `ContentLoaded`."""
        from placet.preview.opening import open_preview

        try:
            op = self._find(index, step)
            if op is None:
                self.post_message(ContentLoaded(None, None, "no op of it writes a file"))
                return
            preview = open_preview(self.store, self.settings, self.record, op, self.drive)
            self.post_message(ContentLoaded(op, render_op(preview)))
        except PlacetError as e:
            self.post_message(ContentLoaded(None, None, inert(e.message)))

    def _find(self, index: int | None, step: int) -> Op | None:
        if index is not None and step == 0:
            return op_at(self.store, self.record, index)
        ops = (op for op in stored_ops(self.store, self.record) if writes_file(op))
        if index is None:
            return next(ops, None)
        before: Op | None = None
        for op in ops:
            if step > 0 and op.index > index:
                return op
            if step < 0 and op.index >= index:
                return before
            before = op
        return before if step < 0 else None

    def on_content_loaded(self, msg: ContentLoaded) -> None:
        title = self.query_one("#content-title", Static)
        body = self.query_one("#content-body", Static)
        if msg.op is None or msg.rendering is None:
            if self.op is None:
                title.update(Text(f"no content to show: {msg.error}", style="bold"))
            else:
                self.notify(msg.error or "no other op writes a file", markup=False)
            return
        self.op, self.rendering = msg.op, msg.rendering
        self.query_one("#content-head", Static).update(self._head(msg.op))
        changed = msg.rendering.title == CHANGED
        title.update(Text(msg.rendering.title, style="bold red" if changed else "bold"))
        body.update(rendering_text(msg.rendering))
        self.query_one("#content-scroll", VerticalScroll).scroll_home(animate=False)

    def _head(self, op: Op) -> Text:
        src, dst = op.local_path, op.remote_path
        if op.kind == "download":
            src, dst = dst, src
        head = Text(f"#{self.record.id} op {op.index} ", style="bold", end="")
        head.append(inert(op.kind), style="bold")
        head.append(f": {inert(str(src))} -> {inert(str(dst))}")
        return head

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Only a sync has other ops to move to: the keys are not offered otherwise.
        return action != "step" or self.record.kind == "sync"

    def action_step(self, step: int) -> None:
        if self.op is not None and self.record.kind == "sync":
            self.load(self.op.index, step)

    def action_close(self) -> None:
        self.dismiss(None)
