"""`make demo` as a person runs it: the real review UI on a real terminal (tmux).

The demo (`.venv/bin/python examples/demo.py`, what `make demo` runs after installing)
starts in a detached tmux session of 160x50 on a private tmux server, so stdin and stdout
are a terminal and it opens `placet review` in the foreground. The test reads the screen
with `capture-pane` and types like a person: Enter to open the review, `a` on each
proposal, waits out the confirmation's half-second key guard, confirms (`y`, or the
proposal id and Enter for a risk-flagged one), and `q` at the end. Then it checks the
files and their SHA-256 on the drive and in the workspace, not only the screen text.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.store import open_store

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (CI installs it)")

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
WIDTH, HEIGHT = 160, 50
EXIT_MARK = "DEMO-EXIT="


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Terminal:
    """One detached tmux session on a private server whose socket lives in `folder`.

    The server gets `os.environ` explicitly, without `COLUMNS`/`LINES`: something in the
    test process sets those at the C level (80x24), a child started with the inherited
    environment would see them, and Textual sizes itself by them before the terminal.
    """

    def __init__(self, folder: Path) -> None:
        self.socket = folder / "tmux.sock"
        self.conf = folder / "tmux.conf"
        self.conf.write_text("set -g history-limit 20000\nset -g remain-on-exit on\n")
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-S", str(self.socket), "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env=self.env,
        )
        return done.stdout

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-s", "demo", "-x", str(WIDTH), "-y", str(HEIGHT), command)

    def screen(self) -> str:
        """What is on the screen now."""
        return self.tmux("capture-pane", "-p", "-t", "demo")

    def history(self) -> str:
        """Everything the pane printed, scrollback included (joined wrapped lines)."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-20000", "-t", "demo")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "demo", *keys)

    def wait_for(
        self, what: str, ok: Callable[[str], bool], *, seconds: float = 60.0, whole: bool = False
    ) -> str:
        """Poll the screen (or the whole history) until `ok(text)`; bounded."""
        deadline = time.monotonic() + seconds
        while True:
            text = self.history() if whole else self.screen()
            if ok(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {seconds} s waiting for {what}:\n{text}")
            time.sleep(0.2)

    def kill(self) -> None:
        subprocess.run(
            [TMUX or "tmux", "-S", str(self.socket), "kill-server"],
            capture_output=True,
            check=False,
            env=self.env,
        )


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.kill()


def pending_count(screen: str) -> int | None:
    m = re.search(r"^\s*(\d+) pending\b", screen, re.MULTILINE)
    return int(m.group(1)) if m else None


@pytest.mark.timeout(180)
def test_make_demo_in_a_terminal_accepting_each_proposal(
    tmp_path: Path, terminal: Terminal
) -> None:
    base = tmp_path / "demo"
    # The tmux server inherits this process's environment; the demo must not need one.
    command = (
        f"env -u PLACET_HOME -u PLACET_DB -u PLACET_DRIVE "
        f"{sys.executable} {DEMO} --dir {base}; echo {EXIT_MARK}$?"
    )
    terminal.start(command)

    terminal.wait_for("the agent's proposals", lambda s: "Press Enter to open placet review" in s)
    intro = terminal.history()
    assert "proposal ids: #1, #2, #3" in intro
    assert f"PLACET_HOME   {base / 'placet-home'}" in intro
    terminal.keys("Enter")

    def rows_shown(screen: str) -> bool:
        """Three pending rows, laid out for the terminal's width (agent names whole)."""
        return pending_count(screen) == 3 and all(
            re.search(rf"^\s*\d+\s+{kind}\b.*demo-agent", screen, re.MULTILINE)
            for kind in ("upload", "mkdir", "download")
        )

    queue = terminal.wait_for("the review queue", rows_shown)
    assert "placet review" in queue
    assert "shared/report.md" in queue

    home = base / "placet-home"
    settings = load_settings({"PLACET_HOME": str(home)})
    for pid, left in ((1, 2), (2, 1), (3, 0)):
        terminal.keys("a")
        dialog = terminal.wait_for(
            f"the confirmation of #{pid}",
            lambda s, pid=pid: f"Accept proposal #{pid}?" in s and "request hash (rec" in s,
        )
        time.sleep(0.7)  # the dialog ignores keys for 0.5 s after it opens
        if f"Type {pid} and press Enter" in dialog:
            terminal.keys("-l", str(pid))
            terminal.keys("Enter")
        else:
            terminal.keys("y")
        # The row stays (executing) until the transfer ends and the queue reloads; only
        # then is the cursor on the next proposal.
        terminal.wait_for(
            f"#{pid} to leave the queue",
            lambda s, pid=pid, left=left: (
                pending_count(s) == left
                and not re.search(rf"^\s*{pid}\s+(upload|mkdir|download)\s", s, re.MULTILINE)
            ),
            seconds=60,
        )
        store = open_store(settings)
        try:
            deadline = time.monotonic() + 30
            while store.get(pid).status not in ("succeeded", "failed", "interrupted"):
                assert time.monotonic() < deadline, f"#{pid} is still {store.get(pid).status}"
                time.sleep(0.1)
            assert store.get(pid).status == "succeeded"
        finally:
            store.close()

    row = re.compile(r"^\s*\d+\s+(upload|mkdir|download)\s", re.MULTILINE)
    empty = terminal.wait_for("an empty queue", lambda s: not row.search(s))
    assert pending_count(empty) == 0
    terminal.keys("q")
    text = terminal.wait_for("the demo to end", lambda s: EXIT_MARK in s, whole=True, seconds=90)
    assert f"{EXIT_MARK}0" in text, text

    # The files, by digest.
    drive = home / "drive"
    workspace = base / "workspace"
    report = drive / "shared" / "report.md"
    assert sha256(report) == sha256(workspace / "notes" / "report.md")
    assert (drive / "reports").is_dir()
    landed = workspace / "readme-from-drive.txt"
    assert sha256(landed) == sha256(drive / "shared" / "readme-from-drive.txt")
    # What the demo printed after the review agrees with the files.
    lines = text.splitlines()
    assert any("shared/report.md" in line and sha256(report) in line for line in lines)
    assert any("readme-from-drive.txt" in line and sha256(landed) in line for line in lines)
    for kind in ("upload", "mkdir", "download"):
        assert any(f"{kind}: succeeded ({kind} done)" in line for line in lines), kind
    assert any(line.startswith("placet audit --verify:") and "12 events" in line for line in lines)

    store = open_store(settings)
    try:
        approvals = [e for e in store.audit_events() if e.to_status == "approved"]
        assert [e.proposal_id for e in approvals] == [1, 2, 3]
        assert all(e.actor == "owner" and (e.detail or {}).get("tty") for e in approvals)
    finally:
        store.close()
