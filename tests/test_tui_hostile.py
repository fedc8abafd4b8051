"""Hostile agent text never reaches the terminal as control sequences or markup.

The real `placet review` runs on a pseudo-terminal (xterm-256color, 160x72) and every
byte it writes is kept. The queue, the detail pane, the accept modal, a notification and
the history all show proposals whose reason, file name, label and client name carry Rich
markup, OSC 52 (clipboard write), OSC 8 (hyperlink), CSI 2J (clear screen), a C1 CSI
(U+009B) and U+202E (right-to-left override). The test asserts those payloads are absent
from the raw output, and that their escaped, visible forms are present (so the text was
really on screen). Textual's own sequences (cursor moves, colours, modes) are allowed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tui_fixtures import add_upload
from tui_pty import PtyProcess

from placet.config import Settings
from placet.store import open_store

PLACET = str(Path(sys.executable).parent / "placet")

OSC52 = "\x1b]52;c;SGFja2Vk\x07"
OSC8 = "\x1b]8;;https://evil.example/x\x07click\x1b]8;;\x07"
CSI_CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"
RLO = "\u202e"
MARKUP = "[red]RED[/] [link=https://evil2.example]L[/link]"
HOSTILE = f"{MARKUP} {OSC52} {OSC8} {CSI_CLEAR} {C1_CSI} {RLO}gpj.exe"
NAME = f"n{OSC52}{CSI_CLEAR}{C1_CSI}{RLO}gpj.exe[b]B"


def assert_inert(out: bytes) -> None:
    """None of the hostile payloads is in `out` as a live sequence."""
    assert b"\x1b]52" not in out  # clipboard write
    assert b"\x1b]8;" not in out  # any hyperlink: we render none of our own
    assert b"evil2.example\x1b" not in out and not re.search(rb"\x1b\]8;[^\x07]*evil", out)
    assert b"\x1b[2J" not in out  # Textual's full-screen driver never sends it (checked)
    text = out.decode("utf-8")  # strict: what reaches a terminal is valid UTF-8
    assert "\x9b" not in text  # C1 CSI, as a character (its UTF-8 is C2 9B)
    assert b"\xc2\x9b" not in out
    assert RLO not in text and b"\xe2\x80\xae" not in out


@pytest.mark.timeout(120)
def test_hostile_text_is_inert_in_every_view(settings: Settings, placet_home: Path) -> None:
    store = open_store(settings)
    now = datetime.now(UTC)
    shown = add_upload(
        store,
        local_path=f"in/{NAME}",
        remote_parent=f"up{RLO}",
        name=NAME,
        reason=HOSTILE,
        label=f"lbl{OSC52}{MARKUP}",
        client_name=f"cli{CSI_CLEAR}",
        now=now,
    )
    old = add_upload(
        store, local_path="old/x.txt", name=f"old{NAME}", reason=f"old {HOSTILE}", now=now
    )
    store.discard(old.id, actor="owner", reason="no", now=now)
    env = dict(os.environ, TERM="xterm-256color", PLACET_HOME=str(placet_home), LANG="C.UTF-8")
    env.pop("NO_COLOR", None)
    app = PtyProcess([PLACET, "review"], env, cols=160, rows=72)
    try:
        # Queue and detail pane: the hostile proposal is the selected first row.
        assert app.wait_for(b"the agent's claim"), app.bytes()[-2000:]
        assert app.wait_for(b"\\x1b]52;c;SGFja2Vk\\x07")  # the escaped reason, visible

        # The accept modal shows the same effect; cancel after its guard.
        mark = app.mark()
        app.send("a")
        assert app.wait_for(f"Accept proposal #{shown.id}".encode(), since=mark)
        time.sleep(0.8)  # the modal's guard
        app.send("escape")

        # A notification about a new hostile proposal, created by another process.
        mark = app.mark()
        script = (
            "import sys; sys.path.insert(0, sys.argv[1])\n"
            "from datetime import UTC, datetime\n"
            "from placet.config import load_settings\n"
            "from placet.store import open_store\n"
            "from tui_fixtures import add_upload\n"
            "s = open_store(load_settings())\n"
            "add_upload(s, local_path='n/a.txt', name=sys.argv[2], reason=sys.argv[2],\n"
            "           label=sys.argv[2], now=datetime.now(UTC))\n"
        )
        subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent), f"new{NAME}"],
            env=env,
            check=True,
            timeout=60,
        )
        assert app.wait_for(b"New proposal", since=mark), app.bytes()[mark:][-3000:]
        assert app.wait_for(b"newn\\x1b]52;c;SGFja2Vk\\x07", since=mark)

        # History, with the discarded hostile proposal selected and detailed.
        mark = app.mark()
        app.send("2")
        assert app.wait_for(b"finished proposal", since=mark)
        assert app.wait_for(b"docs/oldn\\x1b]52;c;", since=mark)  # the history row
        assert app.wait_for(b"old [red]RED[/]", since=mark)  # its reason, in the detail
        app.send("q")
        assert app.wait_exit(20) == 0
    finally:
        app.kill()
        store.close()
    out = app.bytes()
    assert_inert(out)
    # The hostile text was on screen, literally: markup as brackets, controls escaped.
    for visible in (
        b"[red]RED[/]",
        b"[link=https://evil2.example]",
        b"\\u202egpj.exe",
        b"\\x9b31m",
    ):
        assert visible in out, visible
    assert b"\\x1b[2J" in out


def test_review_refuses_without_a_terminal(placet_home: Path) -> None:
    env = dict(os.environ, PLACET_HOME=str(placet_home))
    r = subprocess.run(
        [PLACET, "review"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "needs a terminal" in r.stderr and "placet accept" in r.stderr
