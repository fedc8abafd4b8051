"""Rendering preview bytes: text, diffs with counts, binaries by magic number, every line
inert and bounded (`placet.preview.render`, pure functions: tables of bytes in, lines out).
"""

from __future__ import annotations

import unicodedata

import pytest

from placet.preview.render import Content, Limits, Rendering, render_new, render_replacement


def whole(data: bytes) -> Content:
    return Content(data, len(data))


def texts(r: Rendering, kind: str | None = None) -> list[str]:
    return [line.text for line in r.lines if kind is None or line.kind == kind]


def test_a_new_text_file_shows_its_first_lines_and_says_what_is_cut() -> None:
    data = b"".join(f"line {i}\r\n".encode() for i in range(10))
    r = render_new(whole(data), Limits(lines=3))
    assert texts(r, "text") == ["line 0", "line 1", "line 2"]
    assert texts(r, "note") == ["... 7 more lines not shown"]
    assert r.title == "text (UTF-8), 10 lines in all, 80 B"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        ("é\nü\n".encode("utf-8-sig"), "UTF-8 with BOM"),
        (b"\xff\xfe" + "é\nü\n".encode("utf-16-le"), "UTF-16LE"),
        (b"\xfe\xff" + "é\nü\n".encode("utf-16-be"), "UTF-16BE"),
        (b"\x00\x00\xfe\xff" + "é\nü\n".encode("utf-32-be"), "UTF-32BE"),
    ],
)
def test_a_byte_order_mark_declares_the_encoding(data: bytes, encoding: str) -> None:
    r = render_new(whole(data))
    assert texts(r, "text") == ["é", "ü"]
    assert f"text ({encoding})" in r.title


def test_a_partial_preview_holds_back_a_cut_character_and_says_it_is_partial() -> None:
    data = "naïve\n".encode() * 3 + "ï".encode()[:1]
    r = render_new(Content(data, 5000))
    assert texts(r, "text") == ["naïve"] * 3
    assert texts(r, "note") == ["only the first 22 B of 4.9 KiB (5000 bytes) were read"]


@pytest.mark.parametrize(
    ("head", "name", "image"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "PNG image", "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "JPEG image", "image/jpeg"),
        (b"GIF89a\x01\x00", "GIF image", "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "WebP image", "image/webp"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3", "PDF document", None),
        (b"PK\x03\x04\x14\x00", "zip archive (or docx, xlsx, jar, apk)", None),
        (b"\x1f\x8b\x08\x00", "gzip archive", None),
        (b"\xfd7zXZ\x00\x00", "xz archive", None),
        (b"7z\xbc\xaf\x27\x1c\x00", "7z archive", None),
        (b"a.txt" + b"\x00" * 252 + b"ustar\x0000", "tar archive", None),
        (b"\x7fELF\x02\x01\x01", "ELF executable", None),
        (b"\xcf\xfa\xed\xfe\x07\x00", "Mach-O executable", None),
        (b"MZ\x90\x00\x03\x00\x00\x00", "Windows executable (PE)", None),
        (b"SQLite format 3\x00\x10\x00", "SQLite database", None),
        (b"\x00\x01\x02\xff\xfe", "binary data of unknown type", None),
    ],
    ids=lambda v: v.split(" ")[0] if isinstance(v, str) else "",
)
def test_a_binary_is_told_by_its_magic_number(head: bytes, name: str, image: str | None) -> None:
    r = render_new(Content(head, 4096))
    assert r.title == f"{name}, 4.0 KiB (4096 bytes)"
    assert r.image == image
    assert not texts(r, "text")


def test_a_png_that_is_really_html_is_text_never_an_image() -> None:
    html = b'<!doctype html><html><body><script>alert("png")</script></body></html>\n'
    r = render_new(whole(html))
    assert r.image is None
    assert texts(r, "text") == [html.decode().rstrip("\n")]


def test_text_starting_like_a_weak_signature_stays_text() -> None:
    r = render_new(whole(b"MZ is the plan\nBM too\n"))
    assert texts(r, "text") == ["MZ is the plan", "BM too"]


def test_hostile_bytes_render_inert_and_bounded() -> None:
    hostile = (
        b"\x1b]52;c;cm0gLXJmIH4=\x07clipboard \x1b[2J\x1b[31mred\x1b[0m\n"
        b"evil\xe2\x80\xaetxt.exe \xe2\x80\x8bzero width \xc2\x9b C1\n"
        b"[bold red]markup[/] [link=https://x]click[/link]\n"
        b"<script>alert(1)</script><img src=x onerror=alert(2)>\n"
        b"line\xe2\x80\xa8separator\n"
    )
    single = b"A" * (10 * 1024 * 1024)
    for r in (
        render_new(whole(hostile + single)),
        render_replacement(whole(b"before\n" + single), whole(hostile + single)),
    ):
        for line in r.lines:
            assert len(line.text) <= 240 * 10  # cut before made inert: escapes at most 10 each
            assert all(
                unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp", "Cs", "Cn")
                for c in line.text
            ), line.text
        shown = "\n".join(texts(r))
        assert "\\x1b]52;c;cm0gLXJmIH4=\\x07clipboard \\x1b[2J" in shown
        assert "evil\\u202etxt.exe \\u200bzero width \\x9b C1" in shown
        assert "[bold red]markup[/] [link=https://x]click[/link]" in shown
        assert "<script>alert(1)</script>" in shown
        assert "line\\u2028separator" in shown
        long = [line for line in r.lines if line.text.startswith("AAAA")]
        assert long and long[0].cut == len(single) - 240


def test_a_replacement_is_a_unified_diff_with_its_counts() -> None:
    old = b"# Report\n\nTotal: 3\nOwner: ana\nend\n"
    new = b"# Report\n\nTotal: 4\nOwner: ana\nReviewed: yes\nend\n"
    r = render_replacement(whole(old), whole(new))
    assert (r.added, r.removed) == (2, 1)
    assert [(x.kind, x.text) for x in r.lines] == [
        ("hunk", "@@ -1,5 +1,6 @@"),
        ("context", "# Report"),
        ("context", ""),
        ("del", "Total: 3"),
        ("add", "Total: 4"),
        ("context", "Owner: ana"),
        ("add", "Reviewed: yes"),
        ("context", "end"),
    ]
    assert r.title == "text (UTF-8), +2 -1 lines, 34 B -> 48 B"


def test_a_diff_of_100000_lines_is_cut_with_a_note() -> None:
    old = [f"row {i}: value {i * 7}" for i in range(100_000)]
    new = [f"row {i}: value {i * 7 + 1}" if i % 10 == 0 else s for i, s in enumerate(old)]
    r = render_replacement(
        whole(("\n".join(old) + "\n").encode()), whole(("\n".join(new) + "\n").encode())
    )
    assert (r.added, r.removed) == (10_000, 10_000)
    diff = [x for x in r.lines if x.kind != "note"]
    assert len(diff) == 1000
    assert texts(r, "note")[0].startswith("... ") and "+10000 -10000 in all" in texts(r, "note")[0]


def test_a_binary_replacing_text_is_not_diffed() -> None:
    r = render_replacement(whole(b"plain\n"), Content(b"\x7fELF\x02\x01", 9000))
    assert r.added is None
    assert r.title.startswith("ELF executable, 8.8 KiB (9000 bytes); replaces text (UTF-8)")
