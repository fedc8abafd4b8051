"""Each channel sends on its own, and a session's end sends what it left.

A webhook receiver that takes a request and never answers holds the webhook's sends
only: ntfy, on the same running sender, goes on delivering. And a short `placet serve`
session (an agent proposes, then its host closes the connection at once, inside the
burst's quiet time) sends its message before the process exits, instead of leaving it
in the outbox until some later placet process starts. Real listeners on 127.0.0.1, a
real `placet serve` driven by the official MCP client.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from mcp import Client

from placet.notify import channels as ch
from placet.notify.sender import Sender
from placet.store import Store
from tests.support.mcp import CLIENT_INFO, make_workspace, ok
from tests.support.notify import Listener, RawListener, notify_toml, propose


@pytest.mark.timeout(90)
def test_a_webhook_that_never_answers_does_not_hold_ntfy(
    notify_store: Store, listener: Listener
) -> None:
    """The webhook's first send hangs (it is cut off only at `TIMEOUT_S`, 10 s); the
    second session's message reaches ntfy while that send still hangs. With one sending
    thread for every channel it waited behind the webhook's timeout."""
    hang = RawListener("hold")
    n = notify_store.settings.notify
    assert n.ntfy is not None
    cancel = threading.Event()  # what `Sender.stop` sets for the channels it builds
    channels: dict[str, ch.Channel] = {
        "ntfy": ch.Ntfy(n.ntfy.url, n.ntfy.priority, None, None, cancel=cancel),
        "webhook": ch.Webhook(hang.url("/hook"), "secret", cancel=cancel),
    }
    sender = Sender(notify_store.settings, notify_store, channels=channels).start()
    try:
        propose(notify_store, "first", "run-a", datetime.now(UTC))
        assert listener.wait_for(lambda: len(listener.on("/")) == 1)
        assert hang.connected.wait(30), "the webhook was never tried"
        propose(notify_store, "second", "run-b", datetime.now(UTC))
        assert listener.wait_for(lambda: len(listener.on("/")) == 2)
        assert not hang.cut_off.is_set(), "ntfy waited until the webhook's send was cut off"
        assert hang.requests == 1
    finally:
        cancel.set()
        sender.stop()
        hang.close()


@pytest.mark.anyio
async def test_a_short_session_sends_its_message_before_it_exits(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    """The burst rules would hold the message 30 s (quiet) and the session ends after
    one proposal: its exit flushes. Without it the event waited, unsent, for the next
    placet process (or was skipped after an hour)."""
    ws = make_workspace(tmp_path, placet_home)
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(
        notify_toml(listener, quiet=30, window=60, webhook=False)
    )
    async with Client(ws.params(), client_info=CLIENT_INFO) as client:
        r = await client.call_tool(
            "propose_mkdir", {"remote_parent": "", "name": "brief", "reason": "for the notes"}
        )
        pid = int(ok(r)["proposal"]["id"])
    # The client has closed stdin and waited for `placet serve` to exit.
    assert await anyio.to_thread.run_sync(
        lambda: listener.wait_for(lambda: bool(listener.on("/")), timeout=5)
    ), "the session exited with its notification unsent"
    (topic,) = listener.on("/")
    assert f"#{pid} mkdir" in topic.json()["message"]
    con = sqlite3.connect(placet_home / "placet.db")
    try:
        states = con.execute("SELECT channel, state FROM notify_delivery").fetchall()
    finally:
        con.close()
    assert states == [("ntfy", "sent")]
