"""Untrusted text is rendered inert: no control, format or separator character survives."""

from __future__ import annotations

import io
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placet.errors import UsageError
from placet.text import ascii_escape, inert, inert_with_ascii, one_line_reason

FORBIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),  # CSI 2J: clear screen
        ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),  # OSC 52: set clipboard
        (
            "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
            "\\x1b]8;;http://x\\x1b\\\\link\\x1b]8;;\\x1b\\\\",
        ),
        ("a\x9b2Jb", "a\\x9b2Jb"),  # C1 CSI
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),  # RIGHT-TO-LEFT OVERRIDE
        ("\u2066x\u2069", "\\u2066x\\u2069"),  # isolates
        ("one\u2028two\u2029", "one\\u2028two\\u2029"),
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("line\nbreak\r\ttab\x7f", "line\\nbreak\\r\\ttab\\x7f"),
        ("nul\x00", "nul\\x00"),
        ("lone\udcff", "lone\\udcff"),  # surrogateescape'd non-UTF-8 byte
        ("tag\U000e0041", "tag\\U000e0041"),  # TAG LATIN CAPITAL LETTER A (Cf)
        ("filler\u3164", "filler\\u3164"),  # HANGUL FILLER renders blank
        ("back\\slash", "back\\\\slash"),
    ],
)
def test_inert_escapes_hostile_characters(raw: str, shown: str) -> None:
    assert inert(raw) == shown


def test_inert_keeps_markup_brackets_and_letters_as_literal_text() -> None:
    assert inert("[red]x[/]") == "[red]x[/]"
    assert inert("[link=file:///etc/passwd]click[/link]") == "[link=file:///etc/passwd]click[/link]"
    assert inert("café Ωμέγα 日本語 😀") == "café Ωμέγα 日本語 😀"


def test_inert_output_bytes_written_to_a_terminal_have_no_escape_bytes() -> None:
    # What reaches the terminal is bytes: check those, not only the str.
    buf = io.BytesIO()
    buf.write(inert("x\x1b[31mred\x9b\u202e\u2028").encode("utf-8"))
    data = buf.getvalue()
    assert b"\x1b" not in data
    assert b"\xc2\x9b" not in data  # C1 CSI encoded in UTF-8
    assert "\u202e".encode() not in data
    assert "\u2028".encode() not in data


def test_inert_with_ascii_shows_escaped_form_beside_non_ascii() -> None:
    # Cyrillic 'а' (U+0430) in a Latin-looking name.
    assert inert_with_ascii("p\u0430ypal.txt") == "p\u0430ypal.txt (ASCII: p\\u0430ypal.txt)"
    assert inert_with_ascii("plain.txt") == "plain.txt"
    assert inert_with_ascii("a\x1bb") == "a\\x1bb"  # ASCII control: escaped, no suffix
    assert ascii_escape("é\U0001f600") == "\\xe9\\U0001f600"


def test_one_line_reason_accepts_and_strips() -> None:
    assert one_line_reason("  upload the report  ") == "upload the report"
    assert one_line_reason("x" * 200) == "x" * 200


@pytest.mark.parametrize(
    "bad",
    ["", "   ", "two\nlines", "cr\rhere", "sep\u2028x", "para\u2029x", "esc\x1b[2J", "x" * 201],
)
def test_one_line_reason_refuses(bad: str) -> None:
    with pytest.raises(UsageError) as ei:
        one_line_reason(bad)
    assert ei.value.error_code == "invalid_argument"
    assert ei.value.details["field"] == "reason"
    assert "\x1b" not in ei.value.message and "\n" not in ei.value.message


def test_one_line_reason_custom_limit() -> None:
    with pytest.raises(UsageError, match="limit is 10"):
        one_line_reason("x" * 11, limit=10)


# exclude_categories=() lets lone surrogates (Cs) in too; the default leaves them out.
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_inert_never_emits_control_format_separator_or_surrogate(s: str) -> None:
    out = inert(s)
    assert not any(unicodedata.category(c) in FORBIDDEN for c in out)
    assert not any(unicodedata.category(c) in FORBIDDEN for c in inert_with_ascii(s))
    assert ascii_escape(s).isascii() and ascii_escape(s).isprintable()


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_inert_is_identity_on_printable_ascii_without_backslash(s: str) -> None:
    if "\\" not in s:
        assert inert(s) == s


def test_core_text_path_risk_localfs_import_only_the_stdlib() -> None:
    import subprocess
    import sys

    code = (
        "import sys, placet.paths.local, placet.local.atomic, placet.text, placet.proposals.risk\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pydantic', 'mcp', 'textual', 'rich', 'sqlmodel', 'sqlalchemy', 'platformdirs'})\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
