"""Plain-text forms of stored JSON for people: op failures, audit details, durations.

The review UI and `placet show | audit` show the same stored values. Each string goes
through `placet.text` exactly once (docs/design.md section 9, "Untrusted text"): `inert`,
or `inert_with_ascii` beside an escaped ASCII form; never a JSON dump escaped again. A
failure reads as its ``code: message`` line first, its details after.
`missing_folders_line` states the remote parents an upload or mkdir creates on the way
(evidence ``missing_parents``; docs/decisions/0028-risk-and-own-folders.md). Stdlib only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placet.text import inert, inert_with_ascii, is_unsafe_char

__all__ = [
    "already_inert",
    "duration",
    "evidence_lines",
    "failure_line",
    "flat_pairs",
    "missing_folders_line",
    "plain",
    "plain_pairs",
    "result_line",
    "size_text",
]

_FAILURE_KEYS = ("code", "message", "retryable")


def already_inert(s: str) -> str:
    """Text placet escaped already (a risk flag's message, built with `inert`): its
    backslash sequences are kept, so ``\\u202e`` is not escaped a second time; a raw
    unsafe character that slipped in is still escaped."""
    return "".join(inert(c) if c != "\\" and is_unsafe_char(c) else c for c in s)


def plain(value: Any, *, ascii_forms: bool = True) -> str:
    """`value` (a JSON value) as one line of text, every string rendered once.

    Strings are shown unquoted through `inert_with_ascii` (or `inert` when
    `ascii_forms` is false); dicts as ``{k: v, ...}`` in key order, lists as
    ``[a, b]``; numbers, booleans and None as in Python's `str`.
    """
    show: Callable[[str], str] = inert_with_ascii if ascii_forms else inert
    if isinstance(value, str):
        return show(value)
    if isinstance(value, dict):
        inner = ", ".join(
            f"{show(str(k))}: {plain(value[k], ascii_forms=ascii_forms)}"
            for k in sorted(value, key=str)
        )
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(plain(v, ascii_forms=ascii_forms) for v in value) + "]"
    return inert(str(value))


def plain_pairs(detail: dict[str, Any], *, ascii_forms: bool = True) -> str:
    """A detail dict as ``k=v  k=v`` (keys sorted; values as `plain`); '' for {}."""
    return "  ".join(
        f"{inert(str(k))}={plain(detail[k], ascii_forms=ascii_forms)}"
        for k in sorted(detail, key=str)
    )


def failure_line(
    detail: dict[str, Any], *, ascii_forms: bool = True
) -> tuple[str | None, dict[str, Any]]:
    """Split an op result's detail into its ``code: message`` line and the rest.

    Returns:
        (``"code: message"`` or None when `detail` has no code or message, the remaining
        keys other than ``retryable``: ``details``, ``temps``, success facts...).
    """
    code, message = detail.get("code"), detail.get("message")
    rest = {
        k: v for k, v in detail.items() if k not in _FAILURE_KEYS and not (k == "details" and not v)
    }
    if code is None and message is None:
        return None, rest
    show: Callable[[str], str] = inert_with_ascii if ascii_forms else inert
    parts = [show(str(p)) for p in (code, message) if p is not None]
    return ": ".join(parts), rest


def duration(seconds: float) -> str:
    """A span for people in one uniform form: ``45s``, ``28m32s``, ``23h51m``, ``3d04h``."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    m, sec = divmod(s, 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


MISSING_PARENTS_KEY = "missing_parents"
"""Evidence key of an upload or mkdir: the remote parent folders that did not exist when
it was proposed (drive-relative, outermost first); absent when placet did not check."""


def missing_folders_line(
    kind: str, request: dict[str, Any], evidence: dict[str, Any]
) -> str | None:
    """The line that says which remote folders executing `kind` creates besides its target.

    Returns:
        ``"creates missing folders: A, A/B"`` when the evidence lists missing parents;
        ``"creates missing folders: A/B, or the part of it that is absent at execution
        (not checked when proposed)"`` when the evidence does not say and the parent is not
        the drive's top; None for other kinds, a parent at the top, or an empty list.
        Names are shown through `inert_with_ascii`.
    """
    if kind not in ("upload", "mkdir"):
        return None
    parent = request.get("remote_parent")
    if not isinstance(parent, str) or not parent:
        return None
    recorded = evidence.get(MISSING_PARENTS_KEY)
    if isinstance(recorded, list):
        folders = [inert_with_ascii(str(f)) for f in recorded if f]
        return f"creates missing folders: {', '.join(folders)}" if folders else None
    return (
        f"creates missing folders: {inert_with_ascii(parent)}, or the part of it that is "
        "absent at execution (not checked when proposed)"
    )


def human_bytes(n: float | None) -> str:
    """A size (or a rate's bytes) for people, in binary units: ``"512 B"`` (whole bytes),
    ``"1.5 MiB"``; ``"-"`` for None."""
    if n is None:
        return "-"
    if n < 1024:
        return f"{n:.0f} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def size_text(n: int | None) -> str:
    """``"512 B"``, ``"1.2 KiB (1234 bytes)"``; ``"?"`` for None."""
    if n is None:
        return "?"
    return human_bytes(n) if n < 1024 else f"{human_bytes(n)} ({n} bytes)"


def _flat(value: Any, key: str, ascii_forms: bool) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for k in sorted(value, key=str):
            out += _flat(value[k], f"{key}.{k}" if key else str(k), ascii_forms)
        return out
    if isinstance(value, list | tuple) and any(isinstance(v, dict | list) for v in value):
        return [p for i, v in enumerate(value) for p in _flat(v, f"{key}[{i}]", ascii_forms)]
    return [(inert(key), plain(value, ascii_forms=ascii_forms))]


def flat_pairs(detail: dict[str, Any], *, ascii_forms: bool = True) -> str:
    """A nested JSON dict as ``k=v, a.b=v, t[0].x=v`` (dotted keys, no braces; values as
    `plain`); '' for {}."""
    return ", ".join(f"{k}={v}" for k, v in _flat(detail, "", ascii_forms))


_SHOWN_ELSEWHERE = {"code", "message", "retryable", "remote_path", "local_path", "size",
                    "verification", "seconds", "replaced", "trash_path"}  # fmt: skip


def result_line(index: int, outcome: str, op: dict[str, Any], detail: dict[str, Any]) -> str:
    """One op result as one line: ``#5 done: docs/a.txt (10 B, verified digest:md5, 0.4s)``
    or ``#5 failed: docs/a.txt: refused: message (details.path=x)``.

    The path is the op's target (a download's local path, else its remote path); the
    detail's facts follow in brackets, nested keys dotted; names via `inert_with_ascii`.
    """
    target = op.get("local_path") if op.get("kind") == "download" else op.get("remote_path")
    target = target or op.get("remote_path") or op.get("local_path") or "?"
    head = f"#{index} {inert(outcome)}: {inert_with_ascii(str(target))}"
    failure, _ = failure_line(detail)
    facts: list[str] = []
    if "size" in detail:
        facts.append(size_text(detail["size"] if isinstance(detail["size"], int) else None))
    if detail.get("verification"):
        facts.append(f"verified by {inert(str(detail['verification']))}")
    if isinstance(detail.get("seconds"), int | float):
        facts.append(f"{detail['seconds']:.1f}s")
    if detail.get("replaced"):
        facts.append("replaced the old file")
    if detail.get("trash_path"):
        facts.append(f"old file kept at {inert_with_ascii(str(detail['trash_path']))}")
    rest = {
        k: v
        for k, v in detail.items()
        if k not in _SHOWN_ELSEWHERE and v not in (None, {}, [])
        and not (failure is None and k in ("sha256", "digest", "local_digest", "remote_digest"))
        and not (failure is None and k.endswith("digest_type"))
    }  # fmt: skip
    if rest:
        facts.append(flat_pairs(rest))
    if failure is not None:
        head += f": {failure}"
    return head + (f" ({', '.join(facts)})" if facts else "")


def evidence_lines(kind: str, request: dict[str, Any], evidence: dict[str, Any]) -> list[str]:
    """The evidence facts the op lines do not already show, as ``  key  value`` lines.

    A sync: the plan it came from (id, when, the non-zero summary counts), the owner's
    decisions, the skips verified. An upload, mkdir or download: only keys other than
    the ``local``/``remote`` facts and ``missing_parents`` (shown on their own lines).
    """
    out: list[str] = []
    if kind == "sync":
        plan = evidence.get("plan")
        if isinstance(plan, dict):
            summary = plan.get("summary") or {}
            counts = ", ".join(
                f"{v} {inert(str(k))}" for k, v in sorted(summary.items()) if v
            ) if isinstance(summary, dict) else plain(summary)  # fmt: skip
            made = f" made {inert(str(plan['created_at']))}" if plan.get("created_at") else ""
            out.append(f"  plan          {plain(plan.get('id'))}{made}: {counts or 'nothing'}")
        if evidence.get("verified_skips"):
            out.append(f"  verified      {plain(evidence['verified_skips'])} skip(s)")
        decisions = request.get("decisions")
        if isinstance(decisions, dict) and decisions:
            out.append("  decisions     " + ", ".join(
                f"{inert_with_ascii(str(k))}: {plain(v)}" for k, v in sorted(decisions.items())
            ))  # fmt: skip
        rest = {k: v for k, v in evidence.items() if k not in ("plan", "verified_skips")}
    else:
        rest = {
            k: v for k, v in evidence.items() if k not in ("local", "remote", MISSING_PARENTS_KEY)
        }
    if rest:
        out.append(f"  evidence      {flat_pairs(rest)}")
    return out
