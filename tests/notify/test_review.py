"""Two `placet serve` processes and a real `placet review` (on a pty) on one database:
every proposal reaches the listener in exactly one message, no delivery twice; the
review UI sends the webhook deliveries the servers cannot sign, and rings the bell."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import Implementation

from tests.support.keyring_backend import file_keyring_env
from tests.support.mcp import PLACET, make_workspace, ok
from tests.support.notify import Listener, notify_toml, wait_until
from tests.support.terminal import PtyProcess

SECRET = "review-signs"


def _claims(home: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(home / "placet.db")
    try:
        return con.execute("SELECT channel, state, claimed_by FROM notify_delivery").fetchall()
    finally:
        con.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_servers_and_review_send_each_message_once(
    tmp_path: Path, placet_home: Path, listener: Listener, anyio_backend: str
) -> None:
    ws = make_workspace(tmp_path, placet_home)
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener))
    keyring = tmp_path / "keyring.json"
    keyring.write_text(json.dumps({"placet/notify-webhook-secret": SECRET}))
    # The servers have no keyring (so they cannot sign); the review UI has the secret.
    ws.extra_env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    env = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8", **ws.env)
    env.update(file_keyring_env(keyring))
    env.pop("NO_COLOR", None)
    review = PtyProcess([PLACET, "review"], env, cols=160, rows=48)
    try:
        assert review.wait_for(b"Queue", timeout=30)
        since = review.mark()
        ids: list[int] = []

        def hook_ids() -> list[int]:
            return sorted(p["id"] for r in listener.on("/hook") for p in r.json()["proposals"])

        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    Client(ws.params(), client_info=Implementation(name=f"agent-{c}", version="1"))
                )
                for c in "ab"
            ]
            for i in range(3):
                for c, client in zip("ab", clients, strict=True):
                    r = await client.call_tool(
                        "propose_mkdir", {"remote_parent": "", "name": f"{c}{i}", "reason": "r"}
                    )
                    ids.append(ok(r)["proposal"]["id"])
                await anyio.to_thread.run_sync(
                    lambda: listener.wait_for(lambda: len(hook_ids()) >= len(ids))
                )
        assert await anyio.to_thread.run_sync(
            lambda: wait_until(lambda: {s for _c, s, _h in _claims(placet_home)} == {"sent"})
        )
        assert hook_ids() == sorted(ids)  # every proposal in exactly one message
        hooks = [r.json() for r in listener.on("/hook")]
        assert len({h["delivery"] for h in hooks}) == len(hooks)
        assert len(listener.on("/")) == len(hooks)  # ntfy: the same messages, once each
        # Only the review UI could sign: it sent every webhook delivery.
        senders = {h.split(":")[1] for ch, _s, h in _claims(placet_home) if ch == "webhook"}
        assert senders == {str(review.pid)}
        assert review.wait_for(b"\x07", since=since)  # the terminal bell rang
        review.send("q")
        assert review.wait_exit(20) == 0
    finally:
        review.kill()
