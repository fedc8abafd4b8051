"""The name flags of `placet.proposals.risk`: bidi_or_invisible, confusable_name, non_ascii_name.

A name can read as another: bidirectional overrides reorder it, invisible characters hide
in it, lookalike letters (fullwidth forms, ligatures, Cyrillic ``а`` among Latin letters)
imitate an ASCII name, white space at its start or end vanishes in a listing. These
functions judge one target path's components and say which component holds the
characters (docs/design.md section 9, "Risk flags"); `placet.proposals.risk.risk_flags`
is the entry point. Stdlib only.
"""

from __future__ import annotations

import re
import unicodedata

from placet.text import INVISIBLE_LETTERS, inert, inert_with_ascii

__all__ = ["name_flags"]


# Scripts whose letters pass for Latin ones (а/a, ο/o, Ꭺ/A): mixing two is a spoof sign.
_LOOKALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})
_BIDI_CONTROLS = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})


def _script(c: str) -> str | None:
    if not unicodedata.category(c).startswith("L"):
        return None
    try:
        return unicodedata.name(c).split(" ", 1)[0]
    except ValueError:
        return None


def _is_hidden(c: str) -> bool:
    return unicodedata.category(c) == "Cf" or c in INVISIBLE_LETTERS


def _hidden_reason(component: str) -> str | None:
    hidden = [c for c in component if _is_hidden(c)]
    if not hidden:
        return None
    if any(unicodedata.bidirectional(c) in _BIDI_CONTROLS for c in hidden):
        return "it holds bidirectional override characters that reorder how it is displayed"
    return "it holds invisible characters"


_EDGE_SPACE = re.compile(r"(?:^|/)\s|\s(?:/|$)")
"""White space at the start or end of some component of a path."""


def _spacing_reason(component: str) -> str | None:
    """Why `component` reads as the same name without its leading or trailing white
    space (``"report.pdf "``), or None."""
    lead, trail = component[:1].isspace(), component[-1:].isspace()
    if not (lead or trail):
        return None
    where = "begins and ends" if lead and trail else "begins" if lead else "ends"
    return f"it {where} with white space, which a listing does not show"


def _confusable_reason(component: str) -> str | None:
    """Why `component` (invisible characters already removed) may pass for another,
    ASCII-looking name, or None. Only called for a non-ASCII component.

    Confusable means confusable *with an ASCII name*: its compatibility form is ASCII
    (fullwidth ``ｒｅｐｏｒｔ``, ligature ``ﬁle``, Kelvin sign), or one word mixes Latin
    letters with lookalike letters of another script (``pаypal``). A compatibility form
    that is not ASCII (``µm``, ``½``) or a word of one script (``отчёт``) is merely
    non-ASCII."""
    compat = unicodedata.normalize("NFKC", component)
    if compat.isascii():
        return f"it imitates the ASCII name '{inert(compat)}' with lookalike characters"
    # Per word (run of letters), so "отчёт.txt" is fine and "pаypal" is not.
    for word in re.findall(r"[^\W\d_]+", compat):
        scripts = {s for s in map(_script, word) if s in _LOOKALIKE_SCRIPTS}
        if len(scripts) > 1 and "LATIN" in scripts:
            mixed = ", ".join(sorted(scripts)).lower()
            return f"it mixes Latin letters with lookalikes of another script ({mixed})"
    return None


def name_flags(target_path: str) -> list[tuple[str, str]]:
    """bidi_or_invisible, then confusable_name or non_ascii_name, judged on the target's
    own name (its last component) first, then its folders from the nearest out, so that
    each message names the one component that holds the characters. The escaped ASCII
    form is given once, in the first of these flags."""
    flags: list[tuple[str, str]] = []
    if target_path.isascii() and not _EDGE_SPACE.search(target_path):
        return flags
    components = [p for p in target_path.split("/") if p]
    order = range(len(components) - 1, -1, -1)  # the name itself first, then its folders
    ascii_said = False

    def named(i: int) -> str:
        nonlocal ascii_said
        comp = components[i]
        text = inert(comp) if ascii_said else inert_with_ascii(comp)
        ascii_said = ascii_said or not comp.isascii()
        shown = f"the {'name' if i == len(components) - 1 else 'folder'} '{text}'"
        return shown if len(components) == 1 else f"{shown} (in '{inert(target_path)}')"

    for i in order:
        why = _hidden_reason(components[i])
        if why is not None:
            flags.append(("bidi_or_invisible", f"{named(i)} may not read as it is: {why}"))
            break
    for i in order:
        visible = "".join(c for c in components[i] if not _is_hidden(c))
        why = _spacing_reason(visible)
        if why is None and not visible.isascii():
            why = _confusable_reason(visible)
        if why is not None:
            flags.append(("confusable_name", f"{named(i)} may pass for another: {why}"))
            return flags
    for i in order:
        if any(not c.isascii() and not _is_hidden(c) for c in components[i]):
            flags.append(("non_ascii_name", f"{named(i)} holds non-ASCII characters"))
            break
    return flags
