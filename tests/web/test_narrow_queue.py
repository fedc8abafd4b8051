"""The queue page at 390 pixels (a phone): two uploads into one deep folder are told
apart by their file names, which are never cut; the path before them is cut in front;
the agent's reason comes last, on one line; nothing scrolls sideways."""

from __future__ import annotations

from placet.store import Store
from tests.support.review import add_upload
from tests.support.web import Tab, browser, pair, serve, tab, visit

__all__ = ["browser", "tab"]

FOLDER = "team/reports/quarterly/archive/2026/backup"


def test_two_uploads_into_one_folder_differ_at_390_pixels(tab: Tab, quiet_store: Store) -> None:
    with serve(quiet_store, quiet_store.settings) as served:
        now = served.clock()
        reason = "share the backup files with the whole team before the meeting " * 3
        for name in ("todo.txt", "notes.txt"):
            add_upload(
                quiet_store, local_path=f"{FOLDER}/{name}", remote_parent=FOLDER,
                reason=reason, now=now,
            )  # fmt: skip
        pair(tab, served)
        page = tab.page
        page.set_viewport_size({"width": 390, "height": 844})
        visit(tab, served.url("/"))
        rows = page.locator("li.row")
        assert rows.count() == 2
        width = page.evaluate("document.documentElement.clientWidth")
        tails = []
        for i in range(2):
            row = rows.nth(i)
            tail = row.locator(".pathend .tail")
            box = tail.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
            # the file name is drawn whole: its box is as wide as its text needs
            assert tail.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
            tails.append(tail.inner_text())
            head = row.locator(".pathend .head")
            assert head.evaluate("e => e.scrollWidth > e.clientWidth")  # cut, in front
            # one line each: the path, the meta line, the reason
            line = row.locator(".pathend").bounding_box()
            assert line is not None and line["height"] < 40
            reason_box = row.locator(".reason").bounding_box()
            assert reason_box is not None and reason_box["y"] > line["y"]
        assert tails == ["todo.txt", "notes.txt"]
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
