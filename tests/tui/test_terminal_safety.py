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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.executor import plan_for
from placet.proposals.vetting import proposal_flags
from placet.store import Store, open_store
from placet.tui import make_app
from placet.tui.confirm import AcceptScreen
from placet.tui.facts import effect_of
from tests.support import REPO
from tests.support.review import DRIVE, Recorder, add_upload, plain, settle, until
from tests.support.rig import Rig, make_rig, propose_config_download, propose_hook_download
from tests.support.terminal import PtyProcess

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
    env["PLACET_DRIVE"] = DRIVE  # the drive the fixture proposals were made against
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
            "from tests.support.review import add_upload\n"
            "s = open_store(load_settings())\n"
            "add_upload(s, local_path='n/a.txt', name=sys.argv[2], reason=sys.argv[2],\n"
            "           label=sys.argv[2], now=datetime.now(UTC))\n"
        )
        subprocess.run(
            [sys.executable, "-c", script, str(REPO), f"new{NAME}"],
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


# -- proposals `placet accept` refuses or flags: the review UI does the same --------------


def _approvals(store: Store, pid: int) -> list[dict[str, Any]]:
    return [e.detail for e in store.audit_events(proposal_id=pid) if e.to_status == "approved"]


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_download_into_a_git_root_is_flagged_and_needs_the_typed_id(
    configured_rig: Rig, tmp_path: Path
) -> None:
    """The root is itself a `.git` folder: `hooks/pre-commit` is runs_code because the
    flag is matched on the root's path joined with the target (as `placet accept`), so
    one key, Enter or the button start nothing; the typed id accepts and executes."""
    gitdir = tmp_path / "repo" / ".git"
    rec = propose_hook_download(configured_rig, gitdir)
    flags = effect_of(rec).flags
    assert [f.code for f in flags] == ["runs_code"]  # the target alone would pass
    assert flags == proposal_flags(rec, plan_for(rec.kind, rec.request, rec.evidence).ops)

    events = Recorder()
    app = make_app(configured_rig.settings, configured_rig.store, confirm_guard_seconds=0)
    async with app.run_test(size=(160, 48), message_hook=events) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AcceptScreen) and screen.typed_required
        shown = plain(screen.body, width=400)
        assert "runs_code: 'hooks/pre-commit' in the local root" in shown
        assert f"matches '.git/' in the path of the local root '{gitdir}'" in shown

        await pilot.press("y")  # one key
        await pilot.press("enter")  # Enter on the empty field
        await pilot.click("#accept")  # the (disabled) button
        await settle(pilot)
        assert app.screen is screen and app.transfer is None
        assert (
            configured_rig.store.get(rec.id).status == "pending"
            and _approvals(configured_rig.store, rec.id) == []
        )
        assert not (gitdir / "hooks" / "pre-commit").exists()

        screen.query_one("#typed", Input).value = ""
        await pilot.press(*str(rec.id), "enter")  # the typed id: accepted and executed
        done = await until(
            pilot, lambda: configured_rig.store.get(rec.id).status == "succeeded", 60
        )
        assert done, (configured_rig.store.get(rec.id).status, events.text())
        (approval,) = _approvals(configured_rig.store, rec.id)
        assert approval["request_hash"] == rec.request_hash and approval["via"] == "tui"
    assert (gitdir / "hooks" / "pre-commit").read_bytes() == b"#!/bin/sh\necho pwned\n"


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_writes_into_placet_folders_are_refused_before_the_modal(
    settings: Settings, configured_rig: Rig, tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """Both `placet_own_path` cases of `placet accept`: a download into a root holding
    placet's data dir, and an upload to a local-folder drive holding it. The review UI
    says why, opens no confirmation, records no approval and writes nothing; the worker
    refuses again if it is reached anyway."""
    down, top = propose_config_download(configured_rig)
    home = configured_rig.settings.data_dir
    before = configured_rig.settings.config_file.read_bytes()
    # The drive is a local folder above placet's data dir (a second rig over tmp_path).
    up_rig = make_rig(settings, make_drive(str(tmp_path)), tmp_path / "up", tmp_path)
    up_rig.write("cfg.toml", b"allow_yes = true\n")
    up = up_rig.upload("cfg.toml", home.name, name="config.toml", replace_existing=True)

    for rec, rig_settings, advice in (
        (down, top.settings, "--root apart from placet's folders"),
        (up, up_rig.settings, "placet drive set"),
    ):
        events = Recorder()
        app = make_app(rig_settings, configured_rig.store, confirm_guard_seconds=0)
        async with app.run_test(size=(160, 48), message_hook=events) as pilot:
            await settle(pilot)
            assert app.queue_table.select_id(rec.id)
            await pilot.press("a")
            await settle(pilot)
            assert not isinstance(app.screen, AcceptScreen)
            assert app.transfer is None
            assert "not accepted: placet_own_path" in events.titles(), events.text()
            assert f"'{home}'" in events.text() and advice in events.text()

            app._start_transfer(rec, [])  # past the modal: the worker checks again
            assert await until(pilot, lambda: app.transfer is None)  # noqa: B023
            await settle(pilot)
            assert events.titles()[-1] == "placet_own_path"  # the transfer's own report
        assert configured_rig.store.get(rec.id).status == "pending"
        assert _approvals(configured_rig.store, rec.id) == []
    assert configured_rig.settings.config_file.read_bytes() == before
