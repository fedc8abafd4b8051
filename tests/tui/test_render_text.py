"""Text the review UI renders from stored values: each string escaped exactly once,
failures as their `code: message` line, uniform durations. Real store records."""

from __future__ import annotations

import pytest

from placet.config import Settings
from placet.display import duration, failure_line, plain_pairs
from placet.store import LeaseHolder, Store
from placet.tui.facts import EffectOp, effect_of
from placet.tui.render import (
    audit_view,
    flags_block,
    header_line,
    op_block,
    queue_cells,
    results_block,
    trail_block,
)
from tests.support.review import T0, add_mkdir, add_upload, plain, quiet


def test_durations_are_uniform() -> None:
    assert [duration(s) for s in (0, 45, 60, 28 * 60 + 32, 23 * 3600 + 51 * 60 + 30)] == [
        "0s",
        "45s",
        "1m00s",
        "28m32s",
        "23h51m",
    ]
    assert duration(3 * 86400 + 4 * 3600) == "3d04h"


def test_risk_flag_messages_are_not_escaped_twice(quiet_store: Store) -> None:
    rec = add_upload(quiet_store, name="evil\u202etxt.exe")
    text = plain(flags_block(effect_of(rec).flags))
    assert "evil\\u202etxt.exe" in text  # one backslash
    assert "\\\\" not in text and "\u202e" not in text


def test_owner_reason_in_history_and_audit_keeps_letters_and_escapes_once(
    quiet_store: Store,
) -> None:
    rec = add_mkdir(quiet_store)
    quiet_store.discard(rec.id, reason="wiki \u2014 \u00fcn\u00efcode ok \u202e")
    events = quiet_store.audit_events(proposal_id=rec.id)
    expected = (
        "wiki \u2014 \u00fcn\u00efcode ok \\u202e (ASCII: wiki \\u2014 \\xfcn\\xefcode ok \\u202e)"
    )
    trail = plain(trail_block(events))
    assert expected in trail
    view = plain(audit_view(events[-1]))
    assert expected in view
    for text in (trail, view):
        assert "\\\\" not in text and "\u202e" not in text


def test_failed_op_shows_code_and_message_first_then_details(quiet_store: Store) -> None:
    rec = add_mkdir(quiet_store)
    quiet_store.accept(rec.id, now=T0)
    holder = LeaseHolder.current()
    quiet_store.claim(rec.id, holder=holder, now=T0)
    message = "the drive refused the write: " + "a long explanation " * 20
    detail = {
        "code": "refused",
        "message": message,
        "retryable": False,
        "details": {"path": "syncme/sub\u00e9"},
    }
    quiet_store.record_op_result(
        rec.id,
        op_index=0,
        op={"kind": "mkdir"},
        outcome="failed",
        detail=detail,
        holder=holder,
        now=T0,
    )
    text = plain(results_block(quiet_store.op_results(rec.id)))
    flat = " ".join(text.split())  # the pane wraps long lines at word boundaries
    head = " ".join(f"refused: {message}".split())
    details = "details.path: syncme/sub\u00e9 (ASCII: syncme/sub\\xe9)"
    assert head in flat  # whole, not cut
    assert flat.index(head) < flat.index(details)
    assert '{"code"' not in text and "details={" not in text
    assert failure_line({"bytes": 3}) == (None, {"bytes": 3})
    assert plain_pairs({}) == ""


def test_queue_target_cell_has_no_ascii_suffix(quiet_store: Store) -> None:
    rec = add_upload(quiet_store, name="r\u00e9sum\u00e9.md")
    cells = queue_cells(rec, effect_of(rec), rec.created_at)
    assert cells[2].plain == "docs/r\u00e9sum\u00e9.md"
    assert cells[5].plain == "30m00s" and cells[6].plain == rec.reason


@pytest.mark.asyncio
async def test_transfer_panel_shows_the_failure_reason_whole(
    settings: Settings, quiet_store: Store
) -> None:
    from textual.widgets import Static

    from placet.tui import make_app
    from placet.tui.transfer import TransferPanel
    from tests.support.review import Clock, settle

    rec = add_mkdir(quiet_store)
    quiet_store.accept(rec.id, now=T0)
    holder = LeaseHolder.current()
    quiet_store.claim(rec.id, holder=holder, now=T0)
    message = "the drive refused to create docs/archive: the parent folder is read-only"
    quiet_store.record_op_result(
        rec.id,
        op_index=0,
        op={"kind": "mkdir", "remote_path": "docs/archive"},
        outcome="failed",
        detail={"code": "refused", "message": message, "details": {"path": "syncme/sub"}},
        holder=holder,
        now=T0,
    )
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.query_one(TransferPanel)
        panel.start(quiet_store.get(rec.id))
        panel.finish(quiet_store.get(rec.id), quiet_store.op_results(rec.id), None)
        await pilot.pause()
        why = str(app.query_one("#transfer-why", Static).render())
        assert " ".join(why.split()).startswith(f"op 0: refused: {message}")
        assert "details.path: syncme/sub" in why and '{"code"' not in why
        cell = panel.query_one("#transfer-ops").get_cell("0", "detail")  # type: ignore[attr-defined]
        assert cell.plain.startswith("refused: the drive refused")


@pytest.mark.asyncio
async def test_transfer_refused_at_bind_says_no_op_ran(
    settings: Settings, quiet_store: Store
) -> None:
    """An execution that ends before any op (refused when binding) leaves no op
    "waiting": each says "not run" and the title says no op ran, with the reason."""
    from textual.widgets import Static

    from placet.tui import make_app
    from placet.tui.transfer import TransferPanel
    from tests.support.review import Clock, settle

    rec = add_mkdir(quiet_store)
    app = make_app(quiet(settings), quiet_store, clock=Clock())
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        panel = app.query_one(TransferPanel)
        panel.start(quiet_store.get(rec.id))
        panel.finish(None, [], "refusing to execute proposal 1: it was made against the drive")
        await pilot.pause()
        title = str(app.query_one("#transfer-title", Static).render())
        assert title.startswith(f"#{rec.id} not executed (no op ran): refusing to execute")
        cell = panel.query_one("#transfer-ops").get_cell("0", "outcome")  # type: ignore[attr-defined]
        assert cell.plain == "not run"


def test_evidence_read_by_placet_says_so() -> None:
    """A remote file bound by the bytes placet read (no remote digest) is shown as such,
    never as a digest of the remote's."""
    before = {"exists": True, "is_dir": False, "size": 3, "mtime": None,
              "digest_type": "sha256", "digest": "ab" * 32, "read_by_placet": True}  # fmt: skip
    op = EffectOp(index=0, kind="download", remote_path="r.txt", size=3, remote_before=before)
    text = plain(op_block(op, "webdav:"), width=400)
    assert f"sha256 {'ab' * 32} (of the bytes placet read; no remote digest)" in text


def test_the_detail_head_names_the_host_an_approved_proposal_waits_for(
    quiet_store: Store,
) -> None:
    """Approved, made on another host (another host id) -> the head says
    which host runs it; on its own host, or still pending, nothing is added."""
    rec = quiet_store.accept(add_mkdir(quiet_store).id, now=T0)
    assert rec.host_id is not None
    mine = plain(header_line(rec, T0, quiet_store.host_id))
    assert "waiting" not in mine
    elsewhere = plain(header_line(rec, T0, "00000000-0000-4000-8000-000000000000"))
    assert elsewhere.rstrip().endswith(f"waiting for host {rec.host} ({rec.host_id[:8]})")
