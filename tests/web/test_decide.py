"""`placet web` in a real Chromium with a virtual passkey: pair, sign in, accept with the
passkey (the upload runs), discard with a reason, extend, untick ops of a sync; the
approval's audit event holds the assertion and `audit --verify` re-verifies it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from placet.config import Settings
from placet.store import Store, open_store
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.review import add_upload, quiet
from tests.support.rig import Rig
from tests.support.web import Served, Tab, browser, pair, serve, tab, visit

__all__ = ["browser", "tab"]  # fixtures imported for this module


@pytest.fixture
def display_store(settings: Settings) -> Iterator[Store]:
    s = open_store(quiet(settings))
    yield s
    s.close()


def _approval(store: Store, pid: int) -> dict[str, Any]:
    events = [e for e in store.audit_events(proposal_id=pid) if e.to_status == "approved"]
    assert len(events) == 1
    return events[0].detail


def test_pair_then_sign_in_again_with_the_passkey(tab: Tab, display_store: Store) -> None:
    with serve(display_store, display_store.settings) as served:
        tab.page.goto(served.url("/"))
        assert "placet web pair" in tab.page.content()  # no passkey yet: how to pair
        pair(tab, served)
        assert tab.page.locator("h1").inner_text().startswith("Queue")
        keys = display_store.passkeys()
        assert len(keys) == 1 and keys[0].name == "my phone"
        assert len(tab.credentials()) == 1

        # The session placet's script keeps is forgotten; the queue's live long-poll,
        # answered 403 then, shows the sign-in page in place.
        tab.page.evaluate("forget()")
        tab.page.goto(served.url("/"))
        assert tab.page.locator("#signin").is_visible()
        tab.page.click("#signin")
        tab.page.wait_for_selector("h1:has-text('Queue')")
        assert display_store.passkeys()[0].sign_count >= 1


def test_accept_with_the_passkey_runs_the_upload_and_audit_verifies_it(
    tab: Tab, rig: Rig, served_rig: Served
) -> None:
    served = served_rig
    rig.write("report.md", b"weekly numbers\n")
    rec = rig.upload("report.md")
    pair(tab, served)
    visit(tab, served.url(f"/p/{rec.id}"))
    assert tab.page.locator("#request-hash").inner_text() == rec.request_hash
    tab.page.click("#accept")
    tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")
    assert rig.store.get(rec.id).status == "succeeded"
    assert rig.remote_dir is not None
    assert (rig.remote_dir / "report.md").read_bytes() == b"weekly numbers\n"
    detail = _approval(rig.store, rec.id)
    assert detail["via"] == "web" and detail["request_hash"] == rec.request_hash
    signed = detail["passkey"]
    for k in ("credential_id", "authenticator_data", "client_data", "signature", "nonce"):
        assert signed[k]
    v = rig.store.verify_audit()
    assert v.ok, v.message
    assert "1 passkey-signed approval(s) re-verified" in v.message


def test_discard_with_a_reason_and_extend(tab: Tab, display_store: Store) -> None:
    with serve(display_store, display_store.settings) as served:
        a = add_upload(display_store, local_path="a.txt", now=served.clock())
        b = add_upload(display_store, local_path="b.txt", now=served.clock())
        pair(tab, served)
        visit(tab, served.url(f"/p/{a.id}"))
        tab.page.fill("input[name=reason]", "not <this> week")
        tab.page.click("#discard")
        tab.page.wait_for_selector("text=Discarded.")
        assert display_store.get(a.id).status == "discarded"
        events = display_store.audit_events(proposal_id=a.id)
        assert events[-1].detail == {"reason": "not <this> week"}

        visit(tab, served.url(f"/p/{b.id}"))
        tab.page.click("#extend")
        tab.page.wait_for_selector("text=Extended by 15 minutes.")
        after = display_store.get(b.id)
        assert (after.expires_at - b.expires_at).total_seconds() == 15 * 60


def _sync(rig: Rig, n: int) -> Any:
    for i in range(n):
        rig.write(f"f{i}.txt", f"file {i}\n".encode())
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, created = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="mirror")
    assert created
    return rec


def test_unticked_ops_of_a_sync_are_skipped(tab: Tab, rig: Rig, served_rig: Served) -> None:
    served = served_rig
    rec = _sync(rig, 3)
    ops = rig.store.ops(rec.id)
    pair(tab, served)
    visit(tab, served.url(f"/p/{rec.id}"))
    left_out = ops[1]["index"]
    tab.page.uncheck(f".op-tick[data-index='{left_out}']")
    tab.page.click("#accept")
    tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")
    outcomes = {r.op_index: r.outcome for r in rig.store.op_results(rec.id)}
    assert outcomes[left_out] == "skipped"
    assert sorted(o for i, o in outcomes.items() if i != left_out) == ["done", "done"]
    assert _approval(rig.store, rec.id)["skip_ops"] == [left_out]
    assert rig.remote_dir is not None
    assert sorted(p.name for p in rig.remote_dir.iterdir()) == sorted(
        op["remote_path"] for op in ops if op["index"] != left_out
    )
    assert rig.store.verify_audit().ok
