"""History (finished proposals, filters, per-op results, accept again) and the audit view."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.widgets import Select
from tui_fixtures import Clock, Recorder, add_mkdir, add_upload, plain, quiet, settle, until

from placet.config import Settings
from placet.store import LeaseHolder, Store, open_store
from placet.tui import make_app
from placet.tui.audit import AuditPane
from placet.tui.confirm import AcceptScreen
from placet.tui.detail import DetailPane


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    s = open_store(quiet(settings))
    yield s
    s.close()


def finished(store: Store, clock: Clock) -> dict[str, int]:
    """One proposal in each of several terminal states, made through the store's API."""
    now = clock()
    ids: dict[str, int] = {}
    ok = add_upload(store, local_path="ok.txt", label="alice")
    bad = add_upload(store, local_path="bad.txt", label="alice")
    for rec, outcome in ((ok, "done"), (bad, "failed")):
        store.accept(rec.id, actor="owner", now=now)
        holder = LeaseHolder.current()
        store.claim(rec.id, holder=holder, now=now)
        store.record_op_result(
            rec.id,
            op_index=0,
            op={"kind": "upload", "remote_path": f"docs/{rec.id}.txt"},
            outcome=outcome,
            detail={"error": "disk full"} if outcome == "failed" else {"bytes": 12345},
            holder=holder,
        )
        store.finish(rec.id, holder=holder, now=now)
    ids["succeeded"], ids["failed"] = ok.id, bad.id
    gone = add_upload(store, local_path="gone.txt", client_name="codex")
    store.discard(gone.id, actor="owner", reason="no", now=now)
    ids["discarded"] = gone.id
    late = add_mkdir(store, ttl=60)
    store.sweep(now=clock.now.replace(hour=13))
    ids["expired"] = late.id
    ids["pending"] = add_upload(
        store, local_path="still-pending.txt", now=clock.now.replace(hour=13)
    ).id
    return ids


@pytest.mark.asyncio
async def test_history_lists_finished_filters_and_shows_results(settings: Settings, store: Store):
    clock = Clock()
    ids = finished(store, clock)
    clock.now = clock.now.replace(hour=13)
    app = make_app(quiet(settings), store, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.queue_table.order == [ids["pending"]]
        await pilot.press("2")
        await settle(pilot)
        history = app.history_pane
        shown = [r.id for r in history.records]
        assert shown == sorted(
            [ids["succeeded"], ids["failed"], ids["discarded"], ids["expired"]], reverse=True
        )

        status: Select[str] = history.query_one("#history-status", Select)
        status.value = "failed"
        await settle(pilot)
        assert [r.id for r in history.records] == [ids["failed"]]
        assert await until(pilot, lambda: history.query_one(DetailPane).results is not None)
        detail = plain(history.query_one(DetailPane).body)
        assert "op 0  failed" in detail and "disk full" in detail

        status.value = Select.NULL
        await settle(pilot)
        agent: Select[str] = history.query_one("#history-agent", Select)
        agent.value = "alice"
        await settle(pilot)
        assert sorted(history.shown) == sorted([ids["succeeded"], ids["failed"]])
        agent.value = "codex"
        await settle(pilot)
        assert list(history.shown) == [ids["expired"], ids["discarded"]]  # newest first


@pytest.mark.asyncio
async def test_accept_again_only_for_failed_or_interrupted(settings: Settings, store: Store):
    clock = Clock()
    ids = finished(store, clock)
    events = Recorder()
    app = make_app(quiet(settings), store, clock=clock, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.history_pane.query_one("#history-table")
        table.move_cursor(row=table.get_row_index(str(ids["discarded"])))
        await pilot.press("a")
        await settle(pilot)
        assert not isinstance(app.screen, AcceptScreen)
        assert "not accepted" in events.titles()

        table.move_cursor(row=table.get_row_index(str(ids["failed"])))
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AcceptScreen)
        assert app.screen.record.id == ids["failed"]
        await pilot.press("escape")
        await pilot.pause()
        assert store.get(ids["failed"]).status == "failed"


@pytest.mark.asyncio
async def test_audit_view_lists_events_newest_first_and_verifies(settings: Settings, store: Store):
    clock = Clock()
    finished(store, clock)
    events = Recorder()
    app = make_app(quiet(settings), store, clock=clock)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        pane = app.query_one(AuditPane)
        all_events = store.audit_events()
        assert list(pane.events) == [e.id for e in reversed(all_events)]
        await pilot.press("v")
        await settle(pilot)
        assert "Audit chain intact" in events.titles(), events.text()
