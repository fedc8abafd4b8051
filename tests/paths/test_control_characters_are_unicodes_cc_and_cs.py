"""`placet.paths.shape.control_char`, which drive and remote path checks share, finds
exactly Unicode's categories Cc and Cs, over every code point."""

from __future__ import annotations

import sys
import unicodedata

from placet.paths.shape import control_char


def test_control_char_finds_exactly_the_cc_and_cs_code_points() -> None:
    found = [c for c in range(sys.maxunicode + 1) if control_char(f"a{chr(c)}b") is not None]
    expected = [
        c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in {"Cc", "Cs"}
    ]
    assert found == expected
    assert control_char("ok\u0085\x00") == "\u0085"  # the first one, a C1
    assert control_char("caf\u00e9 \u200b\ufeff") is None  # format characters are not Cc
