"""What an op's targets were when it was proposed, as the owner reads it before accepting.

`placet accept` / `placet show` (`placet.cli.accept_effect`) and the web page
(`placet.web.pages`) print the same facts under each op; each renderer escapes the text
its own way (`placet.text.inert` for the terminal, HTML escaping for the page).
"""

from __future__ import annotations

from placet.display import size_text
from placet.schema import Op

__all__ = ["proposed_state"]


def proposed_state(op: Op) -> list[tuple[str, str]]:
    """(label, text) pairs: the drive target's state when proposed (not for a download),
    the local target's (a download), and the planner's reason when it gave one. Text is
    raw: the planner's reason may hold names from the agent or the remote."""
    ev_local, ev_remote = op.expected_local, op.expected_remote
    out: list[tuple[str, str]] = []
    if ev_remote is not None and op.kind != "download":
        seen = "absent" if not ev_remote.exists else (
            f"exists, {size_text(ev_remote.size)}, "
            + (f"{ev_remote.digest_type} {ev_remote.digest}" if ev_remote.digest else "no digest")
            + (" (of the bytes placet read; no remote digest)" if ev_remote.read_by_placet else "")
        )  # fmt: skip
        out.append(("target on the drive when proposed", seen))
    if op.kind == "download":
        seen = "absent" if ev_local is None else f"exists, {size_text(ev_local.size)}"
        out.append(("local target when proposed", seen))
    if op.reason:
        out.append(("planner", op.reason))
    return out
