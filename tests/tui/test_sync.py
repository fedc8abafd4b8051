"""A sync proposal in the review UI: its ops grouped by kind with tick boxes, the
conflicts with the agent's decisions, and an unticked op that ends `skipped`.

Everything is real: the proposal is planned and proposed by `placet.sync` over a real
root and the default local-folder drive in PLACET_HOME, accepted through the review
app (Pilot), executed by `placet.executor`, and checked in the store, the audit chain
and on disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Input, SelectionList

from placet.config import Settings
from placet.drive import configured_spec, drive_for
from placet.drive.routes import RCD_UPLOAD_MAX
from placet.paths.roots import parse_root_spec
from placet.proposals.context import ProposeContext
from placet.store import ProposalRecord, Store, open_store
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from placet.tui import make_app
from placet.tui.confirm import AcceptScreen
from placet.tui.facts import EffectOp
from placet.tui.messages import TransferProgress
from placet.tui.sync_view import SyncPicker, grouped, op_label
from placet.tui.transfer import TransferPanel
from tests.support.review import Recorder, plain, quiet, screen_text, settle, until


@pytest.fixture
def sync_settings(settings: Settings) -> Settings:
    return quiet(settings, drive=None)  # the default local folder in PLACET_HOME


@pytest.fixture
def sync_store(sync_settings: Settings) -> Iterator[Store]:
    s = open_store(sync_settings)
    yield s
    s.close()


def propose(
    settings: Settings, store: Store, root: Path, decisions: dict[str, str] | None = None
) -> ProposalRecord:
    """Plan `root` against the drive root and propose it, deciding the one conflict
    (notes.md kept local) unless `decisions` says otherwise."""
    drive = drive_for(settings)
    try:
        ctx = ProposeContext(
            settings=settings,
            store=store,
            drive=drive,
            roots=(parse_root_spec(f"proj={root}", settings.data_dir),),
            run_id="run-test",
            drive_spec=configured_spec(settings),
            client_name="pytest",
        )
        svc = SyncService(store, settings)
        stored = svc.make_plan(
            ctx, svc.folder(ctx, "", None), "", include_hidden=False, allow_empty_side=False
        )
        chosen = {"notes.md": "keep_local"} if decisions is None else decisions
        rec, created = propose_sync(svc, ctx, plan_id=stored.id, decisions=chosen, reason="sync")
    finally:
        drive.close()
    assert created
    return rec


def _sides(settings: Settings, tmp_path: Path, remote_only: bytes | None = None) -> Path:
    """A root `proj` with `a.txt` (an upload) and `notes.md`, which differs from the drive's
    (a conflict); with `remote_only`, `c.txt` on the drive only (a download). The root."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_bytes(b"alpha\n")
    (root / "notes.md").write_bytes(b"local notes\n")
    remote = settings.default_drive_dir
    remote.mkdir(parents=True, mode=0o700)
    if remote_only is not None:
        (remote / "c.txt").write_bytes(remote_only)
    (remote / "notes.md").write_bytes(b"remote notes\n")
    return root


@pytest.mark.transfers
@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_unticked_op_is_skipped_bound_and_audited(
    sync_settings: Settings, sync_store: Store, tmp_path: Path
) -> None:
    root, remote = _sides(sync_settings, tmp_path, b"charlie\n"), sync_settings.default_drive_dir
    rec = propose(sync_settings, sync_store, root)
    by_kind = {op["kind"]: op for op in sync_store.ops(rec.id)}
    assert sorted(by_kind) == ["download", "upload", "upload_revision"]
    unticked = by_kind["upload"]["index"]

    events = Recorder()
    app = make_app(sync_settings, sync_store, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AcceptScreen)
        picker = screen.query_one(SyncPicker)
        # Grouped by kind, in execution order of kinds; the conflict with its decision.
        assert [k for k, _ in picker.groups] == ["upload", "upload_revision", "download"]
        shown = screen_text(app)
        assert shown.index("upload  1 op") < shown.index("upload_revision  1 op")
        assert shown.index("upload_revision  1 op") < shown.index("download  1 op")
        revision = by_kind["upload_revision"]["index"]
        conflicts = plain(screen.query_one("#sync-conflicts").render())
        assert f"notes.md: keep_local  -> op {revision} upload_revision" in conflicts
        assert "Accepting runs all 3 ops" in shown
        assert screen.skip_ops == []

        uploads = screen.query_one("#sync-pick-0", SelectionList)
        uploads.focus()
        await pilot.pause()
        uploads.highlighted = 0
        await pilot.press("space")  # untick a.txt
        await pilot.pause()
        assert screen.skip_ops == [unticked]
        assert "Accepting runs 2 of 3 ops" in screen_text(app)
        assert f"unticked, recorded as skipped: op {unticked}" in screen_text(app)

        assert screen.typed_required  # notes.md is replaced: placet flags it
        screen.query_one("#typed", Input).focus()
        await pilot.press(*str(rec.id), "enter")
        ok = await until(
            pilot, lambda: sync_store.get(rec.id).status in ("succeeded", "failed"), 90
        )
        assert ok and sync_store.get(rec.id).status == "succeeded", (
            sync_store.get(rec.id),
            sync_store.op_results(rec.id),
            events.text(),
        )
        await settle(pilot)
        assert "Executed" in events.titles(), events.text()
        assert "2 of 2 ops done, 1 skipped (unticked)" in events.text()

    outcomes = {r.op_index: r.outcome for r in sync_store.op_results(rec.id)}
    assert outcomes == {
        unticked: "skipped",
        revision: "done",
        by_kind["download"]["index"]: "done",
    }
    skipped = next(r for r in sync_store.op_results(rec.id) if r.op_index == unticked)
    assert skipped.detail["code"] == "skipped_by_owner"
    assert not (remote / "a.txt").exists()  # the unticked upload never ran
    assert (remote / "notes.md").read_bytes() == b"local notes\n"
    assert (root / "c.txt").read_bytes() == b"charlie\n"
    assert sorted(p.name for p in remote.iterdir()) == ["c.txt", "notes.md"]  # no temps

    trail = sync_store.audit_events(proposal_id=rec.id)
    approval = [e for e in trail if e.to_status == "approved"][-1]
    assert approval.detail["skip_ops"] == [unticked]
    assert approval.detail["request_hash"] == rec.request_hash
    assert approval.detail["via"] == "tui"
    finish = [e for e in trail if e.to_status == "succeeded"][-1]
    assert finish.detail["skip_ops"] == [unticked]
    summary = sync_store.get(rec.id).summary
    assert summary is not None and summary["skipped_by_owner"] == [unticked]
    assert sync_store.verify_audit().ok


@pytest.mark.asyncio
async def test_unticking_every_op_is_refused(
    sync_settings: Settings, sync_store: Store, tmp_path: Path
) -> None:
    rec = propose(sync_settings, sync_store, _sides(sync_settings, tmp_path))

    events = Recorder()
    app = make_app(sync_settings, sync_store, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AcceptScreen)
        for sl in screen.query(SelectionList):
            sl.deselect_all()
        await pilot.pause()
        assert "Every op is unticked" in screen_text(app)
        screen.query_one("#typed", Input).focus()
        await pilot.press(*str(rec.id), "enter")
        await pilot.pause()
        assert app.screen is screen  # still asking
        assert "not accepted" in events.titles()
        assert sync_store.get(rec.id).status == "pending"


def test_picker_groups_in_kind_order_and_renders_names_inert() -> None:
    ops = [
        EffectOp(index=0, kind="download", remote_path="d", local_path="/r/d"),
        EffectOp(index=1, kind="upload", remote_path="[red]x[/]\x1b[2J"),
        EffectOp(index=2, kind="mkdir", remote_path="m"),
        EffectOp(index=3, kind="upload_revision", remote_path="n", replace=True,
                 note="keep_local: content differs"),
    ]  # fmt: skip
    assert [k for k, _ in grouped(ops)] == ["mkdir", "upload", "upload_revision", "download"]
    label = op_label(ops[1])
    assert isinstance(label, Text) and "\x1b" not in label.plain
    assert "[red]x[/]\\x1b[2J" in plain(label)  # literal, never markup
    assert "conflict: keep_local" in op_label(ops[3]).plain
    assert "into r:d" in op_label(ops[0], {"name": "r", "path": "/r"}).plain


@pytest.mark.transfers
@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_pooled_sync_panel_counts_ops_ended_and_shows_ops_in_flight(
    sync_settings: Settings, sync_store: Store, tmp_path: Path
) -> None:
    """A real sync of 24 uploads, accepted in the review app, runs 4 at a time: every
    progress message carries the executor's `ops_done`/`in_flight`, the panel's running
    rows are exactly the ops in flight, it showed more than one at once, and it ends at
    N/N ops ended with nothing running. The files are above the drive's small-file size
    (`RCD_UPLOAD_MAX`), so each upload is a unit of its own and four overlap: small files
    go in one batch per folder, and batches of 64 KiB files could all end before the
    first one's results were journaled, leaving no message with an op in flight (seen
    once in a quiet CI run)."""
    root = tmp_path / "proj"
    for i in range(24):
        (root / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 3}/f{i:02d}.bin").write_bytes(os.urandom(RCD_UPLOAD_MAX + 4096))
    sync_settings.default_drive_dir.mkdir(parents=True, mode=0o700)
    rec = propose(sync_settings, sync_store, root, decisions={})
    n = sync_store.op_count(rec.id)
    assert sync_settings.transfers == 4 and n == 27  # 3 folders, 24 uploads

    seen: list[TransferProgress] = []
    shown_running: list[int] = []  # rows showing "running" before each progress message
    app = make_app(sync_settings, sync_store, confirm_guard_seconds=0)

    def hook(message: Any) -> None:
        if isinstance(message, TransferProgress):
            seen.append(message)
            panel = app.query_one(TransferPanel)
            table = panel.query_one("#transfer-ops")
            rows = [
                i
                for i in range(n)
                if table.get_cell(str(i), "outcome").plain == "running"  # type: ignore[attr-defined]
            ]
            assert set(rows) == panel.running
            shown_running.append(len(rows))

    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AcceptScreen)
        if screen.typed_required:
            screen.query_one("#typed", Input).focus()
            await pilot.press(*str(rec.id), "enter")
        else:
            await pilot.press("y")
        ok = await until(pilot, lambda: app.transfer is None and bool(seen), 120)
        # Let the queue reload that the last commits trigger (poll_changes) land before
        # the app is torn down: a QueueLoaded handled mid-teardown finds no QueuePane.
        await until(pilot, lambda: app._data_version == sync_store.data_version(), 10)
        await settle(pilot)
        assert ok and sync_store.get(rec.id).status == "succeeded", sync_store.op_results(rec.id)
        panel = app.query_one(TransferPanel)
        title = plain(panel.query_one("#transfer-title").render())
        assert f"#{rec.id} succeeded: {n}/{n} ops ended" in title, title
        assert panel.ops_done == n and panel.running == set()
        table = panel.query_one("#transfer-ops")
        cells = {table.get_cell(str(i), "outcome").plain for i in range(n)}  # type: ignore[attr-defined]
        assert cells == {"done"}

    assert all(m.ops_done is not None and m.in_flight is not None for m in seen)
    results = [m for m in seen if m.op_result is not None]
    assert len(results) == n  # no op's end was dropped
    assert [m.ops_done for m in results] == list(range(1, n + 1))
    assert seen[-1].ops_done == n and seen[-1].in_flight == ()
    assert max(len(m.in_flight or ()) for m in seen) > 1
    assert max(shown_running) > 1, shown_running
    summary = sync_store.get(rec.id).summary
    assert summary is not None and summary["transfers"]["max_in_flight"] > 1
