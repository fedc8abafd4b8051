"""What `placet web` shows, in a real Chromium at phone (390x844) and desktop (1280x900)
size: the queue with countdowns, and a proposal with placet's risk flags above the
agent's reason, boxed as its claim, and the request hash. Agent strings with markup,
terminal escapes and bidi controls are shown literally (inert, escaped), never parsed.
Screenshots go to docs/screenshots/ with PLACET_SCREENSHOTS=1 (looked at by hand;
nothing compares pixels)."""

from __future__ import annotations

from pathlib import Path

from placet.store import Store
from tests.support.review import add_download, add_mkdir, add_upload
from tests.support.web import Tab, browser, pair, screenshots_dir, serve, shown, tab, visit

__all__ = ["browser", "tab"]

HOSTILE_REASON = (
    "<script>window.pwned=1</script><b>trust me</b> \x1b[31mred\x1b[0m "
    "safe\u202egnp.exe [link](http://evil.example)"
)


def test_queue_and_proposal_at_phone_and_desktop_size(
    tab: Tab, quiet_store: Store, tmp_path: Path
) -> None:
    with serve(quiet_store, quiet_store.settings) as served:
        now = served.clock()
        hooked = add_upload(
            quiet_store,
            local_path="hooks/<img src=x onerror=pwned=1>.sh",
            remote_parent=".git/hooks",
            name="pre-commit",
            reason=HOSTILE_REASON,
            client_name="<i>claude-code</i>",
            exists=True,
            now=now,
        )
        add_upload(quiet_store, local_path="notes/report.md", now=now, ttl=90)
        add_mkdir(quiet_store, now=now)
        add_download(quiet_store, now=now)
        pair(tab, served)
        out = screenshots_dir(tmp_path)
        page = tab.page
        for name, size in (("phone", (390, 844)), ("desktop", (1280, 900))):
            page.set_viewport_size({"width": size[0], "height": size[1]})
            visit(tab, served.url("/"))
            rows = page.locator("li.row")
            assert rows.count() == 4
            assert "<img src=x onerror=pwned=1>" in rows.first.inner_text()
            assert page.locator("li.row img").count() == 0
            assert "3 risk flags" in rows.first.inner_text()
            assert "risk flag" not in rows.nth(2).inner_text()  # the mkdir has none
            page.screenshot(path=str(out / f"web-queue-{name}.png"), full_page=True)

            visit(tab, served.url(f"/p/{hooked.id}"))
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
        visit(tab, served.url(f"/p/{hooked.id}"))
        assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_large_sync_is_paged_and_every_flag_is_shown_on_every_page(
    tab: Tab, quiet_store: Store, tmp_path: Path
) -> None:
    from tests.support.review import DRIVE

    ops = [
        {"index": i, "kind": "upload", "local_path": f"src/f{i:03d}.txt",
         "remote_path": f"src/f{i:03d}.txt", "size": 10, "reason": "new"}
        for i in range(150)
    ]  # fmt: skip
    ops[140]["local_path"] = ops[140]["remote_path"] = ".git/hooks/pre-commit"
    request = {
        "kind": "sync", "plan_id": 1, "local_path": "", "remote_path": "", "decisions": {},
        "root": {"name": "proj", "path": "/tmp/proj", "device": 1, "inode": 2}, "ops": ops,
    }  # fmt: skip
    with serve(quiet_store, quiet_store.settings) as served:
        rec, _ = quiet_store.create_proposal(
            kind="sync", request=request, evidence={}, reason="mirror", drive_spec=DRIVE,
            run_id="run-web", ttl_seconds=600, now=served.clock(),
        )  # fmt: skip
        pair(tab, served)
        page = tab.page
        visit(tab, served.url(f"/p/{rec.id}"))
        assert page.locator(".op").count() == 100 and page.locator(".op-tick").count() == 100
        assert "ops 1-100 of 150" in page.locator(".pager").first.inner_text()
        assert "runs_code" in page.locator("section.flags").inner_text()  # op 140's flag
        assert page.locator("#op-140").count() == 0
        page.uncheck(".op-tick[data-index='3']")
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(screenshots_dir(tmp_path) / "web-sync-phone.png"))
        with page.expect_navigation():
            page.click("text=next")
        shown(tab)
        assert page.locator(".op").count() == 50
        assert ".git/hooks/pre-commit" in page.locator("#op-140").inner_text()
        assert "runs_code" in page.locator("section.flags").inner_text()
