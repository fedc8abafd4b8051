"""Signed mode in the review UI: accepting is refused before the confirmation opens,
naming `placet web` (the store refuses it too). Apart from the browser tests: sync
Playwright and pytest-asyncio cannot share a module's event loop."""

from __future__ import annotations

import pytest

from placet.config import Settings
from placet.store import open_store


@pytest.mark.asyncio
async def test_the_review_ui_refuses_in_signed_mode_before_its_confirmation(
    settings: Settings,
) -> None:
    from placet.tui import make_app
    from placet.tui.confirm import AcceptScreen
    from tests.support.review import Clock, Recorder, add_upload, quiet, settle

    signed = quiet(settings, approvals="signed")
    with open_store(signed) as store:
        rec = add_upload(store)
        events = Recorder()
        app = make_app(signed, store, clock=Clock(), confirm_guard_seconds=0)
        async with app.run_test(size=(160, 48), message_hook=events) as pilot:
            await settle(pilot)
            await pilot.press("a")
            await settle(pilot)
            assert not isinstance(app.screen, AcceptScreen)
            said = events.text()
            assert "signature_required" in said and "placet web" in said
        assert store.get(rec.id).status == "pending"
