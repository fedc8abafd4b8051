"""What `placet web` shows, in a real Chromium at phone (390x844) and desktop (1280x900)
size: the queue with countdowns, and a proposal with placet's risk flags above the
agent's reason, boxed as its claim, and the request hash. Agent strings with markup,
terminal escapes and bidi controls are shown literally (inert, escaped), never parsed.
Screenshots go to docs/screenshots/ (looked at by hand; nothing compares pixels)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tui_fixtures import add_download, add_mkdir, add_upload, quiet
from web_fixtures import Tab, browser, pair, screenshots_dir, serve, tab

from placet.config import Settings
from placet.store import Store, open_store

__all__ = ["browser", "tab"]

HOSTILE_REASON = (
    "<script>window.pwned=1</script><b>trust me</b> \x1b[31mred\x1b[0m "
    "safe\u202egnp.exe [link](http://evil.example)"
)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    s = open_store(quiet(settings))
    yield s
    s.close()


def test_queue_and_proposal_at_phone_and_desktop_size(tab: Tab, store: Store) -> None:
    with serve(store, store.settings) as served:
        now = served.clock()
        hooked = add_upload(
            store,
            local_path="hooks/<img src=x onerror=pwned=1>.sh",
            remote_parent=".git/hooks",
            name="pre-commit",
            reason=HOSTILE_REASON,
            client_name="<i>claude-code</i>",
            exists=True,
            now=now,
        )
        add_upload(store, local_path="notes/report.md", now=now, ttl=90)
        add_mkdir(store, now=now)
        add_download(store, now=now)
        pair(tab, served)
        out = screenshots_dir()
        page = tab.page
        for name, size in (("phone", (390, 844)), ("desktop", (1280, 900))):
            page.set_viewport_size({"width": size[0], "height": size[1]})
            page.goto(served.url("/"))
            rows = page.locator("li.row")
            assert rows.count() == 4
            assert "<img src=x onerror=pwned=1>" in rows.first.inner_text()
            assert page.locator("li.row img").count() == 0
            assert "3 risk flags" in rows.first.inner_text()
            assert "risk flag" not in rows.nth(2).inner_text()  # the mkdir has none
            page.screenshot(path=str(out / f"web-queue-{name}.png"), full_page=True)

            page.goto(served.url(f"/p/{hooked.id}"))
            reason = page.locator("#reason").inner_text()
            assert "<script>window.pwned=1</script><b>trust me</b>" in reason
            assert "\\x1b[31m" in reason and "\\u202e" in reason  # escapes, shown visibly
            assert page.locator("#reason *").count() == 0  # no element was parsed from it
            assert page.evaluate("typeof window.pwned") == "undefined"
            flags = page.locator("section.flags")
            assert "runs_code" in flags.inner_text() and "replaces_existing" in flags.inner_text()
            # placet's flags come before the agent's claim, and the hash is shown whole
            flags_y = flags.bounding_box()["y"]  # type: ignore[index]
            reason_y = page.locator("#reason").bounding_box()["y"]  # type: ignore[index]
            assert flags_y < reason_y
            assert page.locator("#request-hash").inner_text() == hooked.request_hash
            assert page.locator("#ack").count() == 1  # a flagged accept asks for the tick
            page.screenshot(path=str(out / f"web-proposal-{name}.png"), full_page=True)
        # the phone layout never scrolls sideways
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(served.url(f"/p/{hooked.id}"))
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
