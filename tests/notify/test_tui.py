"""`placet review` rings the terminal bell and highlights the row of a new proposal."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.text import Text

from placet.config import Settings
from placet.store import Store
from placet.tui import make_app
from placet.tui.queue import QueueTable
from tests.support.review import add_mkdir, quiet, settle, until


def _id_cell(table: QueueTable, pid: int) -> Text:
    value = table.get_cell(str(pid), "id")
    assert isinstance(value, Text)
    return value


@pytest.mark.asyncio
async def test_a_new_proposal_rings_the_bell_and_is_highlighted_until_looked_at(
    settings: Settings, quiet_store: Store
) -> None:
    now = datetime.now(UTC)  # the app's poll reads the real clock's proposals
    old = add_mkdir(quiet_store, name="old", now=now)
    app = make_app(quiet(settings), quiet_store)
    rings: list[int] = []
    async with app.run_test(size=(160, 48)) as pilot:
        app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
        await settle(pilot)
        table = app.queue_table
        assert rings == [] and _id_cell(table, old.id).plain == str(old.id)  # first load

        new = add_mkdir(quiet_store, name="new", now=now)  # committed by another connection
        assert await until(pilot, lambda: new.id in table.order)
        assert rings == [1]
        cell = _id_cell(table, new.id)
        assert cell.plain == f"*{new.id}"
        assert any("bold" in str(span.style) for span in cell.spans) or "bold" in str(cell.style)
        assert _id_cell(table, old.id).plain == str(old.id)

        await pilot.press("down")  # the owner moves onto it: seen
        assert await until(pilot, lambda: _id_cell(table, new.id).plain == str(new.id))
        await settle(pilot)
        assert rings == [1]  # nothing new since
