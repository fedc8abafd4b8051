"""The owner's confirmation on the terminal: one short random code written to the
controlling terminal (``/dev/tty``) and read back from it, its type-ahead flushed first,
so a command run without a terminal (an agent's shell tool, a pipe, cron) cannot
confirm whatever its stdin holds. ``--yes`` skips the code only when the owner opted in
(``allow_yes``). Used by `placet accept`, `placet discard` of several proposals and
`placet web pair`; docs/security.md says what it cannot stop (a same-user process
driving a terminal of its own).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import termios
from collections.abc import Callable, Iterator

from placet.config import Settings
from placet.errors import PolicyRefused

CODE_ALPHABET = "ACDEFHJKLMNPRTUVWXY3479"
"""Letters and digits that cannot be misread for one another (no 0/O, 1/I/L, 5/S...)."""
CODE_LENGTH = 6


def yes_allowed(settings: Settings, ids: list[int], yes: bool) -> None:
    """Refuse ``--yes`` (``yes_not_allowed``) unless the owner opted in."""
    if yes and not settings.allow_yes:
        which = ", ".join(str(i) for i in ids)
        raise PolicyRefused(
            f"refusing --yes for proposal {which}: deciding without the confirmation "
            f"code is off. Set allow_yes = true in {settings.config_file} to allow it, or "
            "run the command at a terminal and type the code",
            code="yes_not_allowed",
            details={"config_key": "allow_yes", "config_file": str(settings.config_file)},
        )


def no_terminal(ids: list[int], settings: Settings, verb: str = "accept") -> PolicyRefused:
    """The refusal of a confirmation with no terminal to show its code on."""
    which = ", ".join(str(i) for i in ids)
    return PolicyRefused(
        f"refusing to {verb} proposal {which}: there is no terminal to confirm on "
        "(placet reads the confirmation code from /dev/tty, never from stdin); run "
        f"`placet {verb}` in a terminal, or opt in to --yes with allow_yes = true in "
        f"{settings.config_file}",
        code="no_terminal",
        details={"proposal_ids": ids},
    )


@contextlib.contextmanager
def terminal() -> Iterator[int | None]:
    """The controlling terminal, opened read-write, or None when there is none."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def read_line(fd: int, limit: int = 64) -> str:
    """One line read from `fd` a byte at a time (at most `limit` bytes, no newline)."""
    buf = b""
    while len(buf) < limit:
        ch = os.read(fd, 1)
        if not ch or ch in b"\r\n":
            break
        buf += ch
    return buf.decode("utf-8", "replace")


def code_typed(tty: int, prompt: Callable[[str], str]) -> bool:
    """Write `prompt(code)` for a fresh confirmation code to the terminal `tty` (its
    type-ahead flushed first, so it cannot answer a code not yet shown) and read a line
    back from it: True when the line is the code (case and surrounding blanks aside)."""
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    with contextlib.suppress(termios.error):
        termios.tcflush(tty, termios.TCIFLUSH)
    os.write(tty, prompt(code).encode())
    typed = read_line(tty).strip().upper()
    return secrets.compare_digest(typed.encode(), code.encode())
