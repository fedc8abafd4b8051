"""The review UI's keyed tables: their columns (every table's); the selected row and a
refill (the history and audit panes').

Each row's key is its id (a proposal's or an audit event's) as text; a refill keeps the
cursor on the row it was on when that row is still there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

Columns = tuple[tuple[str, str, int | None], ...]
"""(key, label, width) of each column, left to right, in cells; None: a flexible column
(the caller sizes it to the screen)."""


def add_columns(table: DataTable[Any], columns: Columns, flexible: int | None = None) -> None:
    """Add `columns` to `table`, each keyed by its key; a flexible one starts `flexible`
    cells wide (None: as wide as its content)."""
    for key, label, width in columns:
        table.add_column(Text(label), key=key, width=width or flexible)


def selected_id(table: DataTable[Any]) -> int | None:
    """The id of the row under the cursor; None in an empty table."""
    if not table.row_count:
        return None
    key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    return int(key) if key is not None else None


def refill(table: DataTable[Text], rows: Iterable[tuple[int, Sequence[Text]]]) -> None:
    """Replace every row with `rows` ((id, cells) each), the cursor kept on the row it
    was on when that id is among them."""
    selected = selected_id(table)
    table.clear()
    ids: set[int] = set()
    for rid, cells in rows:
        table.add_row(*cells, key=str(rid))
        ids.add(rid)
    if selected is not None and selected in ids:
        table.move_cursor(row=table.get_row_index(str(selected)), animate=False)
