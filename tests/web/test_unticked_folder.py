"""On the proposal page, unticking a sync's `create folder` op while a ticked upload goes
into that folder is refused before the passkey is asked: no assertion is made, nothing is
approved, and the folder is not created."""

from __future__ import annotations

from tests.support.rig import Rig, mkdir_ops
from tests.support.web import Served, Tab, browser, pair, tab, visit

__all__ = ["browser", "tab"]


def test_unticking_a_folder_that_a_ticked_upload_needs_is_refused_before_signing(
    tab: Tab, rig: Rig, served_rig: Served
) -> None:
    assert rig.remote_dir is not None
    ops = [*mkdir_ops(["s", "s/sub"]), rig.upload_op(2, "s/sub/a.txt", b"inside")]
    rec, _ = rig.propose_ops(ops)
    pair(tab, served_rig)
    count = tab.credentials()[0]["signCount"]
    visit(tab, served_rig.url(f"/p/{rec.id}"))
    tab.page.uncheck(".op-tick[data-index='1']")
    tab.page.click("#accept")
    tab.page.wait_for_selector("#status:has-text('folder_unticked')")
    assert tab.credentials()[0]["signCount"] == count  # the passkey was never asked
    assert rig.store.get(rec.id).status == "pending"
    assert not (rig.remote_dir / "s").exists()
