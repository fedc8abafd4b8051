"""A sync proposal in the accept confirmation: its ops by kind, each with a tick box, and
the conflicts with the agent's decisions.

What the owner unticks is bound into the approval like the request hash: `skip_ops` goes
to `placet.decisions`, into the hash-chained approval event, and the executor journals
those ops `skipped` (docs/design.md section 9, "Op results"; docs/decisions/0018-audit.md).
Groups follow the execution order of kinds. Every path, kind and decision shown came
from the agent: all of it goes through `render.lit` / `render.name`, never markup. A
sync over `MAX_PICKABLE` ops, or with duplicate op indexes, gets no tick boxes (accept it
whole, or `placet accept ID --skip INDEX`). Unticking a `create folder` op unticks the
ops that go into it, and ticking one of those ticks the folder again; the owner is told.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import SelectionList, Static
from textual.widgets.selection_list import Selection

from placet.display import human_bytes
from placet.proposals.selection import settle
from placet.store import ProposalRecord
from placet.tui.facts import Effect, EffectOp
from placet.tui.render import lit, name

KIND_ORDER = ("mkdir", "upload", "upload_revision", "download")
MAX_PICKABLE = 1000
"""Above this many ops the confirmation offers no tick boxes (accept whole, or the CLI)."""


def grouped(ops: Sequence[EffectOp]) -> list[tuple[str, list[EffectOp]]]:
    """The ops by kind, kinds in `KIND_ORDER` (unknown kinds after, by name), each group
    in op order; empty groups left out."""
    groups: dict[str, list[EffectOp]] = {}
    for op in ops:
        groups.setdefault(op.kind, []).append(op)
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    kinds = sorted(groups, key=lambda k: (rank.get(k, len(rank)), k))
    return [(k, groups[k]) for k in kinds]


@dataclass(frozen=True)
class Conflict:
    """One conflict of the plan and what the agent decided for it.

    `path` is relative to the synced folders; `op` is the op the decision produced
    (None for `skip`, or when no op of the request matches).
    """

    path: str
    decision: str
    op: EffectOp | None


def conflicts_of(record: ProposalRecord, effect: Effect) -> list[Conflict]:
    """The request's `decisions` (path -> keep_local | keep_remote | skip), by path, each
    with the op it produced: the op on that remote path whose planner note starts with
    the decision (`placet.sync.ops` writes "keep_local: ..." / "keep_remote: ...")."""
    decisions = record.request.get("decisions")
    if not isinstance(decisions, dict):
        return []
    base = record.request.get("remote_path")
    base = base if isinstance(base, str) else ""
    out: list[Conflict] = []
    for path, decision in sorted(decisions.items(), key=lambda kv: str(kv[0])):
        target = f"{base}/{path}" if base else str(path)
        op = next(
            (
                o
                for o in effect.ops
                if o.remote_path == target and o.note.startswith(f"{decision}:")
            ),
            None,
        )
        out.append(Conflict(str(path), str(decision), op))
    return out


def conflicts_block(conflicts: Sequence[Conflict]) -> Text:
    """The conflicts and the agent's decisions, one per line (says so when none)."""
    if not conflicts:
        return Text("No conflicts in this plan.", style="dim", end="")
    out = Text(f"Conflicts and the agent's decisions ({len(conflicts)}):", style="bold", end="")
    for c in conflicts:
        out.append("\n  ")
        out.append_text(name(c.path))
        out.append(": ")
        out.append_text(lit(c.decision, style="bold"))
        if c.op is not None:
            out.append(f"  -> op {c.op.index} ")
            out.append_text(lit(c.op.kind))
        elif c.decision == "skip":
            out.append("  -> no op: both sides stay as they are", style="dim")
        else:
            out.append("  -> no matching op in the request", style="bold red")
    return out


def _in_root(local_path: str | None, root: object) -> str:
    """`name:relative` for a local path under the request's root, else the path."""
    path = local_path or "?"
    if isinstance(root, dict):
        base = str(root.get("path") or "").rstrip("/")
        if base and path.startswith(base + "/"):
            return f"{root.get('name') or '?'}:{path[len(base) + 1 :]}"
    return path


def op_label(op: EffectOp, root: object = None) -> Text:
    """One tick-box line: op number, the remote path, size, the local target of a
    download (`root:relative`, from the request's `root`), and what it replaces."""
    out = Text(f"op {op.index}  ", style="bold", end="")
    out.append_text(name(op.remote_path or "?"))
    if op.kind != "mkdir":
        out.append(f"  {human_bytes(op.size)}")
    if op.kind == "download":
        out.append("  into ", style="dim")
        out.append_text(name(_in_root(op.local_path, root)))
    if op.replace:
        out.append("  replaces", style="bold yellow")
    decision = op.note.split(":", 1)[0]
    if decision in ("keep_local", "keep_remote"):
        out.append(f"  conflict: {decision}", style="bold")
    return out


def group_header(kind: str, ops: Sequence[EffectOp]) -> Text:
    n = len(ops)
    out = lit(kind, style="bold magenta")
    size = sum(o.size or 0 for o in ops) if kind != "mkdir" else None
    out.append(f"  {n} op{'s' if n != 1 else ''}")
    if size is not None:
        out.append(f", {human_bytes(size)}")
    return out


def selection_line(
    ops: Sequence[EffectOp], skip: Sequence[int], done_before: int | None = None
) -> Text:
    """What accepting now runs: all ops, or N of M with the unticked ones named.
    `done_before`: accepting again, the ops that ended done or already_done last time
    (re-checked, they report already_done)."""
    n = len(ops)
    if not skip:
        if done_before is not None:
            return Text(
                f"Accepting again re-checks all {n} op{'s' if n != 1 else ''}: "
                f"{done_before} ended done last time and will be found already done; "
                f"{n - done_before} run again. Untick an op (space) to skip it.",
                style="bold",
                end="",
            )
        return Text(
            f"Accepting runs all {n} op{'s' if n != 1 else ''}. "
            "Untick an op (space) to skip it; Tab moves between groups.",
            style="bold",
            end="",
        )
    kept = [o for o in ops if o.index not in set(skip)]
    out = Text(f"Accepting runs {len(kept)} of {n} ops", style="bold", end="")
    moved = sum(o.size or 0 for o in kept if o.kind != "mkdir")
    out.append(f" ({human_bytes(moved)})")
    shown = ", ".join(str(i) for i in sorted(skip)[:20])
    more = f" and {len(skip) - 20} more" if len(skip) > 20 else ""
    out.append(f"; unticked, recorded as skipped: op {shown}{more}", style="bold yellow")
    if not kept:
        out = Text(
            "Every op is unticked: nothing would run. Tick one, or cancel and discard it.",
            style="bold red",
            end="",
        )
    return out


def pickable(effect: Effect) -> bool:
    """Whether the owner can untick ops one by one here (see the module doc)."""
    indexes = [o.index for o in effect.ops]
    return 0 < len(indexes) <= MAX_PICKABLE and len(set(indexes)) == len(indexes)


class SyncPicker(VerticalScroll):
    """The selection line, one tick-box list per op kind, then the conflicts.

    Disabled until the confirmation's guard ends (the screen enables it). `skip_ops` is
    what the owner unticked, in op-index order.
    """

    DEFAULT_CSS = """
    SyncPicker { height: auto; max-height: 20; border: round $warning; padding: 0 1; }
    SyncPicker > Static { height: auto; }
    SyncPicker > .sync-group { margin-top: 1; }
    SyncPicker > SelectionList { height: auto; max-height: 8; border: none; padding: 0; }
    """

    def __init__(
        self,
        record: ProposalRecord,
        effect: Effect,
        *,
        id: str | None = None,
        disabled: bool = False,
        done_before: int | None = None,
    ) -> None:
        super().__init__(id=id, disabled=disabled)
        self.done_before = done_before
        self.record = record
        self.effect = effect
        self.groups = grouped(effect.ops)
        self.conflicts = conflicts_of(record, effect)
        self.can_pick = pickable(effect)
        self._skipped: set[int] = set()  # the selection as last settled
        self._settling = False

    def compose(self) -> ComposeResult:
        root = self.record.request.get("root")
        yield Static(selection_line(self.effect.ops, [], self.done_before), id="sync-selection")
        if not self.can_pick:
            yield Static(
                Text(
                    f"{len(self.effect.ops)} ops: too many (or misnumbered) to untick one by "
                    f"one here; accept all of them, or use `placet accept {self.record.id} "
                    "--skip INDEX`.",
                    style="yellow",
                )
            )
        for n, (kind, ops) in enumerate(self.groups):
            yield Static(group_header(kind, ops), classes="sync-group")
            if self.can_pick:
                options: list[Selection[int]] = [
                    Selection(op_label(op, root), op.index, True) for op in ops
                ]
                yield SelectionList[int](*options, id=f"sync-pick-{n}")
            else:
                for op in ops[:20]:
                    yield Static(op_label(op, root))
        yield Static(conflicts_block(self.conflicts), id="sync-conflicts", classes="sync-group")

    @property
    def lists(self) -> list[SelectionList[int]]:
        return list(self.query(SelectionList))

    @property
    def skip_ops(self) -> list[int]:
        """Op indexes the owner unticked (sorted); [] when nothing can be picked."""
        unticked: list[int] = []
        for sl in self.lists:
            chosen = set(sl.selected)
            unticked += [
                sl.get_option_at_index(i).value
                for i in range(sl.option_count)
                if sl.get_option_at_index(i).value not in chosen
            ]
        return sorted(unticked)

    @property
    def nothing_selected(self) -> bool:
        return bool(self.effect.ops) and len(self.skip_ops) >= len(self.effect.ops)

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged[int]) -> None:
        event.stop()
        if self._settling:
            return
        self._settle()
        self.query_one("#sync-selection", Static).update(
            selection_line(self.effect.ops, self.skip_ops, self.done_before)
        )

    def _settle(self) -> None:
        """Keep the selection one the core accepts (`placet.proposals.selection.settle`):
        unticking a folder unticks the ops that go into it; ticking an op inside an
        unticked folder ticks the folder again; the owner is told which, before any
        decision."""
        now = set(self.skip_ops)
        off, on = settle(self.effect.ops, now, now - self._skipped)
        if off or on:
            self._settling = True
            try:
                for sl in self.lists:
                    values = {sl.get_option_at_index(i).value for i in range(sl.option_count)}
                    for v in off & values:
                        sl.deselect(v)
                    for v in on & values:
                        sl.select(v)
            finally:
                self._settling = False
            said = []
            if off:
                said.append(f"unticked {_ids(off)} too: they go into a folder you unticked")
            if on:
                said.append(f"ticked {_ids(on)} again: ticked ops go into that folder")
            self.app.notify("; ".join(said), title="selection", markup=False)
        self._skipped = set(self.skip_ops)


def _ids(indexes: set[int]) -> str:
    shown = ", ".join(f"#{i}" for i in sorted(indexes)[:10])
    return shown + (f" and {len(indexes) - 10} more" if len(indexes) > 10 else "")
