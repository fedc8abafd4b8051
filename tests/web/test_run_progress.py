"""The proposal page shows the progress line `placet accept` draws while the run it
started goes (ops ended, bytes, rate, time left, the op running), read from the page's
status endpoint and written as text: a name that carries HTML shows as typed, never as
elements. At the end the page shows how the run ended, with the summary's figures.

A real sync of 41 files (one too big to batch) under names that carry HTML, accepted
with a virtual passkey in a real Chromium, run by the real executor held mid-run at its
first event naming an op in flight (`tests.support.held_run`) while the page is read.
"""

from __future__ import annotations

import json

import pytest

from placet.executor.progress import Figures
from tests.support.held_run import HeldRun
from tests.support.rig import Rig
from tests.support.web import Served, Tab, browser, get, pair, session_token, tab, visit

__all__ = ["browser", "tab"]  # fixtures imported for this module


BIG = 48 << 20  # above a batch's file size: an op of its own, hashed and checked twice


def _sync(rig: Rig) -> int:
    from placet.sync.propose import propose_sync
    from placet.sync.service import SyncService

    for d in range(4):  # names that are elements, were they read as HTML
        for f in range(10):
            rig.write(f"<i>d{d}/<b>f{f}.bin", bytes(1000 + f))
    # the small files go in one batch, which may start and end between two progress
    # ticks (`executor.pool.TICK`); a file too big to batch is in flight across several
    rig.write("<i>d0/<b>big.bin", bytes(BIG))
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, created = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="mirror")
    assert created
    return rec.id


@pytest.mark.transfers
def test_the_page_shows_the_cli_progress_line_with_the_running_name_as_text(
    tab: Tab, rig: Rig, served_rig: Served
) -> None:
    served = served_rig
    pid = _sync(rig)
    n = rig.store.op_count(pid)
    assert n == 45  # 4 folders, 41 uploads
    held = HeldRun()
    served.runs.executor = held
    pair(tab, served)
    visit(tab, served.url(f"/p/{pid}"))
    tab.page.click("#accept")
    try:
        assert held.held.wait(60)
        assert held.event is not None and held.event.current is not None
        running = held.event.current
        assert "<b>" in running
        line = tab.page.locator("#progress-line")
        line.wait_for()
        tab.page.wait_for_function(
            "name => document.getElementById('progress-line').textContent.includes(name)",
            arg=f"now {running}",
        )
        shown = line.text_content() or ""
        assert f"/{n} ops · " in shown and "B/" in shown
        assert tab.page.locator("#progress-line b, #progress-line i").count() == 0
        status, body = get(served.url(f"/p/{pid}/status"), session_token(tab))
        assert status == 200
        progress = json.loads(body)["progress"]
        figures = served.runs.figures(pid)
        assert isinstance(figures, Figures) and progress["current"] == running
        ops_bytes = " · ".join(figures.line().split(" · ")[:2])  # (the rate moves on)
        assert progress["line"].startswith(ops_bytes) and shown.startswith(ops_bytes)
        visit(tab, served.url(f"/p/{pid}"))  # the page as the server draws it mid-run
        assert f"now {running}" in (tab.page.locator("#progress-line").text_content() or "")
        assert tab.page.locator("#progress-line b, #progress-line i").count() == 0
    finally:
        held.release()
    tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")
    end = tab.page.locator("#progress-line").text_content() or ""
    assert end.startswith(f"{n}/{n} ops ended (") and " in " in end, end
