"""How an approval was made: the process facts an audit event records beside it.

An approval typed at a terminal and one driven through a pseudo-terminal by another
program look alike to placet (issue: `script -qfc "placet accept ID"` with a pipe reading
the code back). What tells them apart afterwards is the process around the approval: the
terminal's name, the session, and the chain of parent processes (`script`, `expect`, a
shell, an agent's runner...). `origin()` gathers those facts for the approval's audit
event (docs/design.md section 9, "Audit"); nothing here decides, it only records.
Linux reads /proc; elsewhere the chain is left empty.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from placet.text import inert

__all__ = ["MAX_PARENTS", "origin"]

MAX_PARENTS = 8
"""Ancestors recorded at most (the nearest first)."""
_MAX_COMMAND_CHARS = 200


def _process(pid: int) -> dict[str, Any] | None:
    """{pid, name, command} of process `pid` from /proc, or None when unreadable."""
    proc = Path(f"/proc/{pid}")
    try:
        stat = (proc / "stat").read_text()
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    command = " ".join(a.decode("utf-8", "replace") for a in argv if a)
    if len(command) > _MAX_COMMAND_CHARS:
        command = command[: _MAX_COMMAND_CHARS - 1] + "…"
    ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return {"pid": pid, "ppid": ppid, "name": inert(name), "command": inert(command)}


def parents(pid: int | None = None, limit: int = MAX_PARENTS) -> list[dict[str, Any]]:
    """The chain of parent processes of `pid` (default: this process), nearest first,
    each `{pid, name, command}` (command cut to 200 characters, made inert)."""
    out: list[dict[str, Any]] = []
    current = _process(os.getpid() if pid is None else pid)
    while current is not None and current["ppid"] > 0 and len(out) < limit:
        current = _process(current["ppid"])
        if current is not None:
            out.append({k: current[k] for k in ("pid", "name", "command")})
    return out


def origin(tty_fd: int | None) -> dict[str, Any]:
    """The facts of the process making an approval, for its audit event.

    Args:
        tty_fd: the terminal the owner confirmed on (None: no terminal).

    Returns:
        `{tty: "/dev/pts/3" | None, session_id: int, pid: int, parents: [...]}`.
    """
    tty: str | None = None
    if tty_fd is not None:
        # /dev/tty names only "the controlling terminal"; stdin/stdout/stderr, when they
        # are that terminal, give its real name (/dev/pts/3).
        for fd in (0, 1, 2, tty_fd):
            try:
                if os.isatty(fd):
                    tty = os.ttyname(fd)
                    break
            except OSError:
                continue
    return {"tty": tty, "session_id": os.getsid(0), "pid": os.getpid(), "parents": parents()}
