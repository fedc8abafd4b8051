"""Whether the rules file may be used at all: a file no agent can have written.

`placet.rules.loading` opens the file without following a link and asks `problem` about
the open file; a refusal is shown by `placet doctor`, `placet rules list` and the agent's
reply, and no rule applies. Refused: a `PLACET_HOME` or an `XDG_CONFIG_HOME` off
``$HOME/.config`` (an MCP host's configuration, a project's `.mcp.json` too, sets them
for `placet serve`, so rules apply only from placet's default config folder); a link or
anything but a regular file; a file not the owner's, or writable by group or others, or
in a folder that is; a file inside a local root an agent may use, by realpath and by the
device and inode of every folder above it.
docs/decisions/0038-standing-rules.md records the choice.
"""

from __future__ import annotations

import os
import posixpath
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from placet.paths.roots import is_within
from placet.text import quote

__all__ = ["Refusal", "env_problem", "problem"]


@dataclass(frozen=True)
class Refusal:
    """Why the rules file is not used: a stable `code` and a message with the fix."""

    code: str
    message: str


def _xdg_moved(env: Mapping[str, str]) -> str | None:
    """`XDG_CONFIG_HOME` when it moves placet's config folder off ``$HOME/.config``
    (platformdirs reads it on Linux and the BSDs only), else None."""
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    if not xdg or sys.platform in ("darwin", "win32"):
        return None
    home = env.get("HOME") or os.path.expanduser("~")
    usual = posixpath.normpath(posixpath.join(home, ".config"))
    return None if posixpath.normpath(xdg) == usual else xdg


def env_problem(env: Mapping[str, str]) -> Refusal | None:
    """A refusal when `PLACET_HOME`, or `XDG_CONFIG_HOME` off ``$HOME/.config``, moves
    placet's configuration (module docstring)."""
    xdg = _xdg_moved(env)
    if xdg is not None:
        return Refusal(
            "rules_home_moved",
            f"XDG_CONFIG_HOME is set ({quote(xdg)}), not to $HOME/.config: an MCP host's "
            "configuration (a project's .mcp.json too) can set it for placet serve, so "
            "standing rules apply only from placet's default config folder; unset "
            "XDG_CONFIG_HOME where placet runs to use them",
        )
    home = env.get("PLACET_HOME")
    if not home:
        return None
    return Refusal(
        "rules_home_moved",
        f"PLACET_HOME is set ({quote(home)}): an MCP host's configuration (a project's "
        ".mcp.json too) can set it for placet serve, so standing rules apply only from "
        "placet's default config folder; unset PLACET_HOME to use them (PLACET_DB still "
        "moves the database)",
    )


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):o}"


def _owner_problem(path: Path, st: os.stat_result, what: str) -> Refusal | None:
    if st.st_uid != os.getuid():
        return Refusal(
            "rules_not_owned",
            f"{what} {quote(str(path))} is owned by uid {st.st_uid}, not by you (uid "
            f"{os.getuid()}); chown it to yourself",
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return Refusal(
            "rules_writable",
            f"{what} {quote(str(path))} is writable by group or others (mode {_mode(st)}); "
            f"run `chmod go-w {path}` (the rules file is best 600)",
        )
    return None


def _identities(path: str) -> set[tuple[int, int]]:
    """(st_dev, st_ino) of `path` and every folder above it that can be stat'ed."""
    out: set[tuple[int, int]] = set()
    current = path
    while True:
        try:
            st = os.stat(current)
        except OSError:
            pass
        else:
            out.add((st.st_dev, st.st_ino))
        up = os.path.dirname(current)
        if up == current:
            return out
        current = up


def problem(path: Path, st: os.stat_result, roots: Sequence[Path]) -> Refusal | None:
    """Why the rules file at `path`, opened without following a link and whose status
    is `st` (of the open file), may not be used; None when it may (module docstring)."""
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return Refusal(
            "rules_not_regular",
            f"{quote(str(path))} is not a regular file; write the rules in a plain file there",
        )
    found = _owner_problem(path, st, "the rules file")
    if found is not None:
        return found
    folder = path.parent
    try:
        found = _owner_problem(folder, os.stat(folder), "the folder of the rules file")
    except OSError as e:
        return Refusal("rules_unreadable", f"cannot stat {quote(str(folder))}: {e.strerror}")
    if found is not None:
        return found
    real = os.path.realpath(path)
    above = _identities(real)
    for root in roots:
        try:
            rst = os.stat(root)
        except OSError:
            continue
        if is_within(real, os.path.realpath(root)) or (rst.st_dev, rst.st_ino) in above:
            return Refusal(
                "rules_in_root",
                f"{quote(str(path))} lies inside the local root {quote(str(root))}, which an "
                "agent may write to; keep the rules file in placet's config folder, outside "
                "every root",
            )
    return None
