"""Process checks for tests that stop placet and its rclone children: which processes run
under a pid, and whether one still runs (Linux /proc and `ps`)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def descendants(root_pid: int) -> set[int]:
    """Every process under `root_pid` (children, their children, ...), from `ps`."""
    ps = subprocess.run(["ps", "-eo", "pid,ppid"], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for ln in ps.splitlines()[1:]:
        pid, ppid = (int(x) for x in ln.split()[:2])
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root_pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.add(c)
            todo.append(c)
    return found


def alive(pid: int) -> bool:
    """`pid` exists and is not a zombie (ended, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
