"""Standing rules in the review UI: a proposal a rule approved says so in the queue while
it waits to run or runs, and in the history and its detail once it ran; a refused rules
file is announced (no rule applies then)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placet.config import Settings, load_settings
from placet.decisions.standing import approve_by_rule
from placet.rules.approving import RuleApproval
from placet.store import LeaseHolder, Store, open_store
from placet.tui import make_app
from placet.tui.detail import DetailPane
from tests.rules.test_matcher import MINIMAL
from tests.support.review import (
    Clock,
    Recorder,
    add_mkdir,
    plain,
    quiet,
    screen_text,
    settle,
    until,
)
from tests.support.rules import become_owner, write_rules

APPROVAL = RuleApproval("report-folders", "ab" * 32, "/home/o/.config/placet/rules.toml")


@pytest.mark.asyncio
async def test_queue_and_history_show_approved_by_rule(settings: Settings, quiet_store: Store):
    clock = Clock()
    ruled = add_mkdir(quiet_store, remote_parent="reports", name="2026")
    approve_by_rule(quiet_store, quiet_store.settings, ruled, APPROVAL, now=clock())
    waiting = add_mkdir(quiet_store, remote_parent="docs", name="old", reason="tidy up")
    app = make_app(quiet(settings), quiet_store, clock=clock)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert app.queue_table.order == [ruled.id, waiting.id]
        screen = screen_text(app)
        row = next(line for line in screen.splitlines() if "reports/2026" in line)
        assert "approved by rule report-folders" in row
        other = next(line for line in screen.splitlines() if "docs/old" in line)
        assert "approved by rule" not in other

    holder = LeaseHolder.current()
    quiet_store.claim(ruled.id, holder=holder, now=clock())
    quiet_store.finish(ruled.id, holder=holder, now=clock(), expected_ops=1)
    app = make_app(quiet(settings), quiet_store, clock=clock)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        history = app.history_pane
        assert [r.id for r in history.records] == [ruled.id]
        row = next(line for line in screen_text(app).splitlines() if "reports/2026" in line)
        assert "rule report-" in row  # the by column is 12 cells; the detail says it whole
        assert await until(pilot, lambda: history.query_one(DetailPane).results is not None)
        detail = plain(history.query_one(DetailPane).body)
        assert "by rule report-folders" in detail
        assert "approved by rule report-folders" in detail


@pytest.mark.asyncio
async def test_the_review_ui_says_when_the_rules_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    become_owner(tmp_path, monkeypatch)
    settings = quiet(load_settings())
    path = write_rules(settings, MINIMAL)
    for mode, says in ((0o600, None), (0o666, "writable by group or others (mode 666)")):
        path.chmod(mode)
        with open_store(settings) as store:
            events = Recorder()
            app = make_app(settings, store, clock=Clock())
            async with app.run_test(size=(120, 30), message_hook=events) as pilot:
                await settle(pilot)
                if says is None:
                    await settle(pilot, rounds=6)
                    assert "Standing rules are off" not in events.titles()
                    continue
                seen = events
                assert await until(pilot, lambda e=seen: "Standing rules are off" in e.titles())
                assert says in events.text()
                assert "refused, no rule applies" in events.text()
