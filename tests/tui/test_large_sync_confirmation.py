"""A large sync's accept confirmation: every op read and checked in a worker, then its
flags (over every op), its counts by kind and its first `OPS_SHOWN` ops listed with the
rest counted, as `placet accept` lists them; the detail pane, whose own check of the same
ops stops when the accept begins, shows the flags the accept's checks found.

Times are measured in bench/first_op.py, never asserted here.
"""

from __future__ import annotations

import pytest

from placet.config import Settings
from placet.store import Store
from placet.tui import make_app
from placet.tui.confirm import OPS_SHOWN, AcceptScreen
from placet.tui.detail import DetailPane
from tests.support.review import T0, big_sync, plain, quiet, screen_text, until

N = 6000


@pytest.mark.asyncio
async def test_a_large_syncs_confirmation_lists_its_first_ops_and_counts_the_rest(
    settings: Settings, store: Store
) -> None:
    rec = big_sync(store, N)
    app = make_app(quiet(settings), store, clock=lambda: T0)
    async with app.run_test(size=(160, 60)) as pilot:
        assert await until(pilot, lambda: app.queue_table.selected() is not None)
        await pilot.press("a")  # at once: the detail pane may still be checking the ops
        assert await until(pilot, lambda: isinstance(app.screen, AcceptScreen), 120)
        screen = app.screen
        assert isinstance(screen, AcceptScreen)
        await pilot.pause()
        assert len(screen.effect.ops) == N and screen.typed_required
        body = plain(screen.body, width=200)
        assert f"Effect: {N} ops" in body and "runs_code" in body and ".bashrc" in body
        last = f"big/f{OPS_SHOWN - 1:06d}.txt"
        assert last in body and f"big/f{OPS_SHOWN:06d}.txt" not in body
        assert f"... and {N - OPS_SHOWN} more ops" in body
        assert f"{N - 1} ops" in screen_text(app)  # the uploads, counted in the picker

        pane = app.query_one("#queue-detail", DetailPane)
        assert pane.effect is not None and pane.effect.flags_checked
        assert [f.code for f in pane.effect.flags] == ["runs_code"]
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, AcceptScreen))
    assert store.get(rec.id).status == "pending"
