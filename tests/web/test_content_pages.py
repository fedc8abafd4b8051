"""`placet web` shows what the bytes say: a replacement's diff on the proposal's page, a
sync op's content on its own page, and PNG/JPEG/GIF/WebP thumbnails told by their magic
number, served with `nosniff` under the page's CSP; file bytes never become markup.

Real parts: the proposing core over a real root and a local-folder drive (rclone), the
SQLite store, `placet web` served on 127.0.0.1 and Debian's Chromium with a virtual
authenticator.
"""

from __future__ import annotations

import struct
import urllib.request
import zlib
from pathlib import Path

from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.clocks import ScanClock
from tests.support.rig import Rig
from tests.support.web import (
    SESSION_HEADER,
    Tab,
    browser,
    pair,
    screenshots_dir,
    serve,
    session_token,
    shown,
    tab,
    visit,
)

__all__ = ["browser", "tab"]


def png(width: int = 3, height: int = 2) -> bytes:
    """A valid RGB PNG of `width` x `height` red pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))  # fmt: skip


def _get(url: str, session: str | None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers={SESSION_HEADER: session} if session else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def test_a_replacement_s_diff_is_on_the_page(tab: Tab, rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "report.md").write_bytes(b"# Report\nTotal: 3\nend\n")
    rig.write(
        "report.md",
        b"# Report\nTotal: 4 <script>window.pwned=1</script><b>bold</b> \x1b[31m\xe2\x80\xae\n"
        b"end\n",
    )
    rec = rig.upload("report.md", replace_existing=True)
    with serve(rig.store, rig.settings) as served:
        pair(tab, served)
        page = tab.page
        visit(tab, served.url(f"/p/{rec.id}"))
        preview = page.locator("#preview")
        assert page.locator("#preview .del").all_inner_texts() == ["-Total: 3"]
        [added] = page.locator("#preview .add").all_inner_texts()
        assert added == "+Total: 4 <script>window.pwned=1</script><b>bold</b> \\x1b[31m\\u202e"
        assert preview.locator("script, b").count() == 0
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert "+1" in page.locator("section.content h2").inner_text()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.screenshot(path=str(screenshots_dir(tmp_path) / "web-diff-phone.png"), full_page=True)
        page.click("text=check it against the drive now")
        assert "read whole; its digest matches" in page.locator("section.content").inner_text()


def test_an_image_is_a_thumbnail_and_a_png_that_is_html_is_text(tab: Tab, rig: Rig) -> None:
    rig.write("red.png", png())
    real = rig.upload("red.png")
    rig.write("evil.png", b"<html><body><script>window.pwned=1</script>hi</body></html>\n")
    fake = rig.upload("evil.png")
    with serve(rig.store, rig.settings) as served:
        pair(tab, served)
        page = tab.page
        visit(tab, served.url(f"/p/{real.id}"))
        thumb = page.locator("img.thumb")
        thumb.wait_for()
        assert page.evaluate("document.querySelector('img.thumb').naturalWidth") == 3
        status, headers, body = _get(served.url(f"/p/{real.id}/op/0/image"), session_token(tab))
        assert (status, headers["content-type"], body) == (200, "image/png", png())
        assert headers["x-content-type-options"] == "nosniff"
        assert "img-src 'self'" in headers["content-security-policy"]

        visit(tab, served.url(f"/p/{fake.id}"))
        assert page.locator("img").count() == 0
        assert "<script>window.pwned=1</script>" in page.locator("#preview").inner_text()
        assert page.evaluate("typeof window.pwned") == "undefined"
        status, headers, _ = _get(served.url(f"/p/{fake.id}/op/0/image"), session_token(tab))
        assert status == 404 and not headers["content-type"].startswith("image/")
        assert _get(served.url(f"/p/{real.id}/op/0/image"), "")[0] in (401, 403)


def test_a_sync_op_s_content_has_its_own_page(tab: Tab, rig: Rig) -> None:
    rig.write("a.txt", b"alpha\n")
    rig.write("b.txt", b"bravo\n")
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    stored = svc.make_plan(rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False,
                           allow_empty_side=False)  # fmt: skip
    rec, _ = propose_sync(svc, rig.ctx, plan_id=stored.id, decisions={}, reason="sync")
    with serve(rig.store, rig.settings) as served:
        pair(tab, served)
        page = tab.page
        visit(tab, served.url(f"/p/{rec.id}"))
        assert page.locator("section.content").count() == 0  # a sync's ops open one by one
        page.locator("#op-1 a.content-link").click()
        shown(tab)
        assert page.locator("h1").inner_text().startswith(f"#{rec.id} op 1")
        assert "bravo" in page.locator("#preview").inner_text()
        assert "its digest matches" in page.locator("section.content").inner_text()
        page.click("text=previous op")
        shown(tab)
        assert "alpha" in page.locator("#preview").inner_text()
