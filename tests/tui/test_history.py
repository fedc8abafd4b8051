"""History (finished proposals, filters, per-op results, accept again) and the audit view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Select

from placet.config import Settings
from placet.schema import LocalFileEvidence, Op, RemoteEvidence, RootRef, SyncRequest
from placet.store import LeaseHolder, ProposalRecord, Store
from placet.tui import make_app
from placet.tui.audit import AuditPane
from placet.tui.confirm import AcceptScreen
from placet.tui.detail import DetailPane
from tests.support.review import (
    Clock,
    Recorder,
    add_mkdir,
    add_upload,
    plain,
    quiet,
    screen_text,
    settle,
    until,
)


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
            now=now,
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
async def test_history_lists_finished_filters_and_shows_results(
    settings: Settings, quiet_store: Store
):
    clock = Clock()
    ids = finished(quiet_store, clock)
    clock.now = clock.now.replace(hour=13)
    app = make_app(quiet(settings), quiet_store, clock=clock)
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
async def test_accept_again_only_for_failed_or_interrupted(settings: Settings, quiet_store: Store):
    clock = Clock()
    ids = finished(quiet_store, clock)
    events = Recorder()
    app = make_app(quiet(settings), quiet_store, clock=clock, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.history_pane.query_one("#history-table")
        table.move_cursor(row=table.get_row_index(str(ids["discarded"])))
        await pilot.press("a")  # not offered for a discarded one: the key does nothing
        await settle(pilot)
        assert not isinstance(app.screen, AcceptScreen)
        assert quiet_store.get(ids["discarded"]).status == "discarded"

        table.move_cursor(row=table.get_row_index(str(ids["failed"])))
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AcceptScreen)
        assert app.screen.record.id == ids["failed"]
        await pilot.press("escape")
        await pilot.pause()
        assert quiet_store.get(ids["failed"]).status == "failed"


@pytest.mark.asyncio
async def test_audit_view_lists_events_newest_first_and_verifies(
    settings: Settings, quiet_store: Store
):
    clock = Clock()
    finished(quiet_store, clock)
    events = Recorder()
    app = make_app(quiet(settings), quiet_store, clock=clock)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        pane = app.query_one(AuditPane)
        all_events = quiet_store.audit_events()
        assert list(pane.events) == [e.id for e in reversed(all_events)]
        await pilot.press("v")
        await settle(pilot)
        assert "Audit chain intact" in events.titles(), events.text()


def failed_sync(store: Store, root: Path, drive_spec: str, clock: Clock) -> ProposalRecord:
    """A sync of 9 uploads whose last attempt ended 2 done, 1 already_done, 6 stale
    (results journaled through the store's API, as the executor journals them)."""
    st = root.stat()
    ref = RootRef(name="proj", path=str(root), device=st.st_dev, inode=st.st_ino)
    local = LocalFileEvidence(size=3, mtime_ns=1, sha256="ab" * 32)
    ops = [
        Op(index=i, kind="upload", local_path=f"site/f{i}.txt", remote_path=f"site/f{i}.txt",
           size=3, expected_local=local, expected_remote=RemoteEvidence(exists=False))
        for i in range(9)
    ]  # fmt: skip
    req = SyncRequest(plan_id=7, root=ref, local_path="site", remote_path="site", ops=ops)
    plan = {"id": 7, "created_at": "2026-11-30T09:58:16.5+00:00", "summary": {"upload": 9}}
    rec, _ = store.create_proposal(
        kind="sync", request=req.model_dump(mode="json"), evidence={"plan": plan},
        reason="sync the site", drive_spec=drive_spec, run_id="r", ttl_seconds=600,
        now=clock(),
    )  # fmt: skip
    store.accept(rec.id, actor="owner", now=clock(), detail={"request_hash": rec.request_hash})
    holder = LeaseHolder.current()
    store.claim(rec.id, holder=holder, now=clock())
    for op in ops:
        outcome = "done" if op.index < 2 else "already_done" if op.index == 2 else "stale"
        detail: dict[str, Any] = {"bytes": 3}
        if outcome == "stale":
            detail = {"code": "stale", "message": "the local file changed",
                      "details": {"path": op.local_path, "expected": {"size": 3}}}  # fmt: skip
        store.record_op_result(
            rec.id, op_index=op.index, op=op.model_dump(mode="json"), outcome=outcome,
            detail=detail, holder=holder, now=clock(),
        )  # fmt: skip
    return store.finish(rec.id, holder=holder, now=clock(), summary={"ops": 9, "stale": 6})


@pytest.mark.transfers
@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_accept_again_names_stale_paths_and_keeps_the_selection(
    settings: Settings, quiet_store: Store, tmp_path: Path
):
    clock = Clock()
    ids = finished(quiet_store, clock)
    root, drive = tmp_path / "proj", tmp_path / "drive"
    (root / "site").mkdir(parents=True)
    drive.mkdir()
    rec = failed_sync(quiet_store, root, str(drive), clock)
    assert rec.status == "failed"
    newer = add_upload(quiet_store, local_path="newer.txt", drive_spec=str(drive))
    quiet_store.discard(newer.id, actor="owner", now=clock())  # a row above it in History
    events = Recorder()
    app = make_app(
        quiet(settings, drive=str(drive)), quiet_store, clock=clock, confirm_guard_seconds=0
    )
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        history = app.history_pane
        table = history.query_one("#history-table", DataTable)
        table.move_cursor(row=table.get_row_index(str(rec.id)))
        await settle(pilot)
        # the detail of a sync: readable text, the plan's time, no raw JSON
        body = plain(history.query_one(DetailPane).body)
        assert '{"' not in body and "details={" not in body and "summary: {" not in body
        assert "at plan time (2026-11-30 09:58:16Z)" in body
        assert "plan summary: upload: 9" in body and "details.path: site/f3.txt" in body
        assert "Accept again" in screen_text(app)

        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AcceptScreen)
        note = " ".join(plain(app.screen.note).split())
        assert "3 ops ended done or already_done" in note
        assert "6 ops were stale" in note and "will be stale again" in note
        assert all(f"site/f{i}.txt" in note for i in range(3, 8)), note
        assert "site/f8.txt" not in note and "and 1 more" in note
        assert "ask the agent for a new plan" in note
        line = " ".join(screen_text(app).split())
        assert "Accepting runs all" not in line and "3 ended done last time" in line, line

        await pilot.press("y")
        assert await until(pilot, lambda: app.transfer is None, timeout=60)
        await settle(pilot)
        assert quiet_store.get(rec.id).attempt == 2  # it ran again
        assert await until(pilot, lambda: history.selected_id() == rec.id)
        await settle(pilot)
        assert history.selected_id() == rec.id  # the selection followed the proposal
    assert ids["failed"] != rec.id


@pytest.mark.asyncio
async def test_accept_again_is_offered_only_for_failed_or_interrupted(
    settings: Settings, quiet_store: Store
):
    clock = Clock()
    ids = finished(quiet_store, clock)
    app = make_app(quiet(settings), quiet_store, clock=clock, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.history_pane.query_one("#history-table", DataTable)
        for status in ("discarded", "succeeded", "expired", "failed"):
            table.move_cursor(row=table.get_row_index(str(ids[status])))
            await settle(pilot)
            footer = screen_text(app).splitlines()[-1]
            assert ("Accept again" in footer) is (status == "failed"), (status, footer)
