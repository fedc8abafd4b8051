"""A 100,000-op sync proposal in the review UI: selected, its op table shows the first
window of ops at once (the request's counts above it), End brings the last op into view,
moving past a window's edge loads the next one, the risk flags arrive from a worker, and
accepting reads and checks every op in a worker before the confirmation opens.

Built fast but real: the ops go through `Store.create_proposal` (one bulk insert into a
real SQLite file); the app reads them only through `Store.ops`, a window at a time.
Times are measured in bench/tui_sync.py, never asserted here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from placet.config import Settings
from placet.store import Store, open_store
from placet.tui import make_app
from placet.tui.confirm import AcceptScreen
from placet.tui.detail import DetailPane
from placet.tui.ops_table import WINDOW, OpsTable
from tests.support.review import BIG_SYNC_OPS as N
from tests.support.review import T0, big_sync, quiet, screen_text, until


@pytest.fixture
def big_settings(settings: Settings) -> Settings:
    return quiet(settings)


@pytest.fixture
def big_store(big_settings: Settings) -> Iterator[Store]:
    s = open_store(big_settings)
    yield s
    s.close()


def _visible(table: OpsTable) -> bool:
    """The cursor row lies inside the table's scrolled viewport."""
    top = int(table.scroll_y)
    height = table.scrollable_content_region.height - table.header_height
    return top <= table.cursor_row < top + height


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_a_100k_op_sync_is_selected_and_scrolled_to_its_last_op(
    big_settings: Settings, big_store: Store
) -> None:
    rec = big_sync(big_store)
    assert big_store.op_count(rec.id) == N and "ops" not in rec.request
    app = make_app(big_settings, big_store, clock=lambda: T0)
    async with app.run_test(size=(160, 60)) as pilot:
        pane = app.query_one("#queue-detail", DetailPane)
        table = pane.ops_table
        assert await until(pilot, lambda: table.loaded >= 1)
        assert pane.record is not None and pane.record.id == rec.id
        assert table.row_count == WINDOW and table.shown_indexes[:2] == [0, 1]
        assert table.border_title == f"ops 1-{WINDOW} of {N:,} (End: last op, Home: first)"
        body = screen_text(app)
        assert "Effect: 100000 ops" in body and "upload: 99,999 ops" in body

        table.focus()
        await pilot.press("end")
        assert await until(pilot, lambda: table.loaded >= 2 and N - 1 in table.shown_indexes)
        await pilot.pause()
        assert table.shown_indexes[-1] == N - 1 and table.cursor_row == table.row_count - 1
        assert _visible(table)
        assert await until(pilot, lambda: f"f{N - 1:06d}.txt" in screen_text(app))
        assert f"ops {N - WINDOW + 1:,}-{N:,} of {N:,}" in str(table.border_title)

        # Up past the window's first row loads the previous window, cursor on the op
        # just above.
        await pilot.press("home")
        assert await until(pilot, lambda: table.loaded >= 3 and table.shown_indexes[0] == 0)
        await pilot.press("end")
        assert await until(pilot, lambda: table.loaded >= 4)
        table.move_cursor(row=0)
        await pilot.press("up")
        assert await until(pilot, lambda: table.loaded >= 5)
        row = table.shown_indexes[table.cursor_row]
        assert row == N - WINDOW - 1 and table.shown_indexes[-1] == N - WINDOW - 1

        # The risk flags were computed over every op, in a worker: `.bashrc` is flagged.
        assert await until(pilot, lambda: pane.effect is not None and pane.effect.flags_checked, 90)
        assert pane.effect is not None
        assert [f.code for f in pane.effect.flags] == ["runs_code"]

        # Accepting reads and checks every op in a worker, then asks for the typed id.
        await pilot.press("a")
        assert await until(pilot, lambda: isinstance(app.screen, AcceptScreen), 90)
        screen = app.screen
        assert isinstance(screen, AcceptScreen)
        assert screen.typed_required and len(screen.effect.ops) == N
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, AcceptScreen))
        assert big_store.get(rec.id).status == "pending"
