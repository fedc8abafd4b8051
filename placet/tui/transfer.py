"""The transfer panel: progress and per-op results while an accepted proposal runs.

Hidden until the owner accepts a proposal. It is fed only by messages the executor's
thread worker posts (`TransferStarted`, `TransferProgress`, `TransferFinished`), and
keeps showing the last outcome until the next transfer starts.

Its title is the progress line `placet accept` draws (`placet.executor.progress`: ops
ended, bytes, rate, time left, the op running by inert name) and, at the end, the
summary's figures. The ops ended and the ops running come from the executor's events,
which the app never drops (`placet.tui.deciding.PROGRESS_EVERY`), so a row shows
``running`` exactly while the last event lists its op in flight, and ``ending`` once its
worker finished and before its result is journaled. The table gets its first rows when
the transfer starts and the rest a chunk per turn of the event loop, so a sync of
thousands of ops does not hold up its first op.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, ProgressBar, Static

from placet.display import failure_line, plain_pairs
from placet.errors import PlacetError
from placet.executor.progress import ProgressEvent, Tracker
from placet.store import OpResultRecord, ProposalRecord
from placet.tui.facts import Effect, EffectOp, effect_of, effect_op
from placet.tui.render import lit, name, outcome_detail

ROWS = 2000
"""Ops listed in the transfer panel (a sync may hold many more; the counts cover all)."""
FILL = 100
"""Rows added to the table at a time: when the transfer starts, then once per loop turn."""

_OUTCOME_STYLE = {"done": "green", "already_done": "green", "failed": "red", "stale": "red"}


class TransferPanel(Vertical):
    """Progress bar (bytes) and a table of op results, one row per op."""

    DEFAULT_CSS = """
    TransferPanel { height: auto; max-height: 20; border: round $accent; display: none; }
    TransferPanel.-active { display: block; }
    TransferPanel > #transfer-title { height: 1; }
    TransferPanel > ProgressBar { height: 1; }
    TransferPanel > DataTable { height: auto; max-height: 8; }
    TransferPanel > #transfer-why { height: auto; max-height: 6; overflow-y: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.tracker = Tracker()  # the figures of the run shown
        self.proposal_id: int | None = None
        self.op_count = 0
        self.failures: dict[int, Text] = {}
        self.ended: set[int] = set()  # op indexes whose result arrived
        self.running: set[int] = set()  # rows marked running, not ended yet
        self.ops_done = 0  # ops ended, as the executor last said
        self.bytes: tuple[int, int] | None = None  # (done, total) of the last progress
        self.skip: set[int] = set()  # ops the owner unticked
        self.unfilled: list[EffectOp] = []  # rows still to add, in reverse order
        self.pending: set[int] = set()  # their op indexes
        self.ended_cells: dict[int, tuple[Text, Text]] = {}  # results of rows not added yet

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="transfer-title")
        yield ProgressBar(total=None, show_eta=False, id="transfer-bar")
        yield DataTable(id="transfer-ops", cursor_type="none", show_cursor=False)
        yield Static(Text(""), id="transfer-why")

    def on_mount(self) -> None:
        ops = self.query_one("#transfer-ops", DataTable)
        ops.add_column(Text("op"), key="op", width=4)
        ops.add_column(Text("kind"), key="kind", width=16)
        ops.add_column(Text("path"), key="path", width=40)
        ops.add_column(Text("outcome"), key="outcome", width=13)
        ops.add_column(Text("detail"), key="detail", width=50)

    def _title(self, text: Text) -> None:
        self.query_one("#transfer-title", Static).update(text)

    def start(
        self,
        record: ProposalRecord,
        skip_ops: list[int] | None = None,
        effect: Effect | None = None,
    ) -> None:
        """Show the ops of `record` as waiting (those in `skip_ops` as unticked); the
        bar empty. `effect`: the one the confirmation showed (a large sync's ops were
        read for it), else `effect_of(record)`."""
        self.add_class("-active")
        self.proposal_id = record.id
        effect = effect or effect_of(record)
        self.op_count = effect.total_ops
        self._title(Text(f"Executing #{record.id} {record.kind}: starting...", style="bold"))
        bar = self.query_one(ProgressBar)
        skip = self.skip = set(skip_ops or [])
        moving = (
            sum(op.size or 0 for op in effect.ops if op.index not in skip)
            if effect.complete
            else effect.total_bytes
        )
        bar.update(total=max(moving, 1), progress=0)
        ops = self.query_one("#transfer-ops", DataTable)
        ops.clear()
        self.failures = {}
        self.ended = set()
        self.running = set()
        self.ops_done = 0
        self.bytes = None
        self.tracker = Tracker()
        self.ended_cells = {}
        self.query_one("#transfer-why", Static).update(Text(""))
        self.unfilled = self._rows(record, effect)[::-1]
        self.pending = {op.index for op in self.unfilled}
        self._fill()

    def _fill(self, rows: int = FILL) -> None:
        """Add the next `rows` rows of the op table; the rest on a later turn."""
        ops = self.query_one("#transfer-ops", DataTable)
        for _ in range(min(rows, len(self.unfilled))):
            op = self.unfilled.pop()
            i = op.index
            self.pending.discard(i)
            if str(i) in ops.rows:
                continue
            if i in self.ended_cells:
                outcome, detail = self.ended_cells.pop(i)
            elif i in self.running:
                outcome, detail = Text("running", style="yellow"), Text("")
            else:
                said = "unticked" if i in self.skip else "waiting"
                outcome, detail = Text(said, style="dim"), Text("")
            path = name(op.remote_path or op.local_path or "")
            ops.add_row(Text(str(i)), lit(op.kind), path, outcome, detail, key=str(i))
        if self.unfilled:
            self.call_later(self._fill)

    def _rows(self, record: ProposalRecord, effect: Effect) -> list[EffectOp]:
        """The first `ROWS` ops: the effect's, or a by-reference sync's first page
        (`Store.ops`, one short indexed read) when the effect holds only its summary."""
        store = getattr(self.app, "store", None)
        if effect.complete or store is None:
            return effect.ops[:ROWS]
        try:
            raw = store.ops(record.id, limit=ROWS)
        except PlacetError:
            return []
        root = record.request.get("root")
        base = root if isinstance(root, dict) else None
        return [effect_op(o, base, i) for i, o in enumerate(raw)]

    def progress(
        self,
        op_index: int,
        op_count: int,
        bytes_done: int,
        bytes_total: int,
        *,
        ops_done: int | None = None,
        in_flight: tuple[int, ...] | None = None,
        current: str | None = None,
        result: OpResultRecord | None = None,
    ) -> None:
        """Bytes of the whole proposal, the ops ended (`ops_done`), the ops running
        (`in_flight`: exactly these rows show ``running``), the name of the lowest of
        them (`current`, agent text) and the result the event brought (`result`, shown
        by `op_result`; counted here). Without `in_flight`, the op `op_index` is marked
        running until its result arrives."""
        flying = (op_index,) if in_flight is None else in_flight
        done = max(len(self.ended), ops_done or 0)
        self.tracker(
            ProgressEvent(
                op_index,
                op_count,
                bytes_done,
                bytes_total,
                op_result=result,
                ops_done=done,
                in_flight=flying,
                current=current,
            )
        )
        bar = self.query_one(ProgressBar)
        bar.update(total=max(bytes_total, 1), progress=min(bytes_done, max(bytes_total, 1)))
        ops = self.query_one("#transfer-ops", DataTable)
        now = (self.running | {op_index} if in_flight is None else set(in_flight)) - self.ended
        for i in sorted(self.running - now):  # its worker is done; the result is coming
            if str(i) in ops.rows:
                ops.update_cell(str(i), "outcome", Text("ending", style="dim yellow"))
        for i in sorted(now - self.running):
            if str(i) in ops.rows:
                ops.update_cell(str(i), "outcome", Text("running", style="yellow"))
        self.running = now
        self.op_count, self.bytes = op_count, (bytes_done, bytes_total)
        self.ops_done = max(len(self.ended), ops_done or 0)
        self._progress_title()

    def _progress_title(self) -> None:
        """``Executing #7: `` and the line `placet accept` draws (`Figures.line`)."""
        figures = self.tracker.figures()
        if figures is None:
            return
        head = f"Executing #{self.proposal_id}: "
        width = self.content_size.width or 160
        self._title(Text(head + figures.line(max(40, width - len(head))), style="bold"))

    def op_result(self, result: OpResultRecord) -> None:
        ops = self.query_one("#transfer-ops", DataTable)
        key = str(result.op_index)
        self.ended.add(result.op_index)
        self.running.discard(result.op_index)
        self.ops_done = max(self.ops_done, len(self.ended))
        if self.bytes is not None:
            self._progress_title()
        head, rest = failure_line(result.detail)
        cells = (
            Text(result.outcome, style=_OUTCOME_STYLE.get(result.outcome, "yellow")),
            Text(head if head is not None else plain_pairs(rest)),
        )
        if head is not None and result.outcome not in ("done", "already_done"):
            # The table cell is cut at its width; the whole reason, wrapped, goes below.
            line = Text(f"op {result.op_index}: ", style="bold red")
            line.append_text(outcome_detail(result.detail, indent="\n  "))
            self.failures[result.op_index] = line
        else:
            self.failures.pop(result.op_index, None)
        why = Text("\n", end="").join(self.failures[k] for k in sorted(self.failures))
        self.query_one("#transfer-why", Static).update(why)
        if key in ops.rows:
            ops.update_cell(key, "outcome", cells[0])
            ops.update_cell(key, "detail", cells[1])
        elif result.op_index in self.pending:
            self.ended_cells[result.op_index] = cells  # shown when its row is added
        else:
            path = result.op.get("remote_path") or result.op.get("local_path") or ""
            ops.add_row(Text(key), lit(result.op.get("kind", "?")), name(path), *cells, key=key)

    def finish(
        self, record: ProposalRecord | None, results: list[OpResultRecord], error: str | None
    ) -> None:
        self._fill(len(self.unfilled))
        for r in results:
            self.op_result(r)
        ops = self.query_one("#transfer-ops", DataTable)
        for i in sorted(self.running):  # the executor returned: nothing runs any more
            if str(i) in ops.rows:
                ops.update_cell(str(i), "outcome", Text("no result", style="dim"))
        never = 0
        for key in list(ops.rows):  # still "waiting": the execution ended without them
            i = int(str(key.value))
            if i not in self.ended and i not in self.running and i not in self.skip:
                never += 1
                ops.update_cell(key, "outcome", Text("not run", style="dim red"))
        self.running = set()
        bar = self.query_one(ProgressBar)
        figures = self.tracker.figures(final=True)
        moved = "" if figures is None else f" ({figures.moved()})"
        ended = f": {len(self.ended)}/{self.op_count} ops ended{moved}"
        if record is not None and record.status == "succeeded":
            bar.update(progress=bar.total or 1)
            self._title(Text(f"#{record.id} succeeded{ended}", style="bold green"))
        elif record is not None:
            self._title(Text(f"#{record.id} {record.status}{ended}", style="bold red"))
        else:
            said = "no op ran" if not self.ended else f"{never} op(s) not run"
            title = Text(f"#{self.proposal_id} not executed ({said}): ", style="bold red")
            title.append_text(lit(error or "unknown error"))
            self._title(title)
        if never and record is not None:
            title = Text(f"#{record.id} {record.status}{ended}; {never} not run", style="bold red")
            self._title(title)
