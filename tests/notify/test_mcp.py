"""Notifications end to end: agents propose over MCP to real `placet serve` processes, and
a real HTTP listener on 127.0.0.1 (standing in for ntfy and a webhook receiver) receives
the messages. Every wait is on a condition, with a cap.
"""

from __future__ import annotations

import json
import sqlite3
import time
import unicodedata
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import Implementation

from placet.config import load_settings
from placet.notify.channels import Channel, Ntfy, Webhook
from placet.notify.sender import Sender
from placet.store import open_store
from placet.store.outbox import Outbox
from tests.support.keyring_backend import file_keyring_env
from tests.support.mcp import CLIENT_INFO, Workspace, make_workspace, ok
from tests.support.notify import Listener, Received, WebhookReceiver, notify_toml, wait_until

SECRET = "webhook-secret-for-tests"
TOKEN = "ntfy-token-for-tests"

pytestmark = pytest.mark.anyio


def _setup(tmp_path: Path, placet_home: Path, listener: Listener, **kw: Any) -> Workspace:
    ws = make_workspace(tmp_path, placet_home)
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener, **kw))
    keyring_file = tmp_path / "keyring.json"
    keyring_file.write_text(
        json.dumps({"placet/notify-webhook-secret": SECRET, "placet/notify-ntfy-token": TOKEN})
    )
    ws.extra_env.update(file_keyring_env(keyring_file))
    return ws


def _client(ws: Workspace, name: str = CLIENT_INFO.name) -> Client:
    return Client(ws.params(), client_info=Implementation(name=name, version="1"))


async def _mkdir(client: Client, name: str) -> int:
    r = await client.call_tool(
        "propose_mkdir", {"remote_parent": "", "name": name, "reason": "for the notes"}
    )
    return int(ok(r)["proposal"]["id"])


def _hooks(listener: Listener) -> list[dict[str, Any]]:
    return [r.json() for r in listener.on("/hook")]


def _ids(hooks: list[dict[str, Any]]) -> list[int]:
    return sorted(p["id"] for h in hooks for p in h["proposals"])


def _verify(r: Received) -> bool:
    return WebhookReceiver(SECRET).refuse(r, time.time()) is None


def _deliveries(home: Path) -> list[tuple[str, str, int]]:
    con = sqlite3.connect(home / "placet.db")
    try:
        return con.execute("SELECT channel, state, attempts FROM notify_delivery").fetchall()
    finally:
        con.close()


async def test_a_proposal_reaches_ntfy_and_the_webhook_and_the_agent_hears_of_it(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    ws = _setup(tmp_path, placet_home, listener)
    async with _client(ws) as client:
        pid = await _mkdir(client, "notes-2031")
        assert await anyio.to_thread.run_sync(
            lambda: listener.wait_for(lambda: bool(listener.on("/hook")) and bool(listener.on("/")))
        )
        (hook,) = listener.on("/hook")
        assert _verify(hook)
        body = hook.json()
        assert body["event"] == "proposed" and body["title"] == "placet: 1 proposal waits for you"
        (item,) = body["proposals"]
        assert item["id"] == pid and item["kind"] == "mkdir" and item["status"] == "pending"
        assert item["target"] == "drive:notes-2031" and item["agent"] == CLIENT_INFO.name
        assert "expires" in body["body"] and f"#{pid} mkdir" in body["body"]
        (topic,) = listener.on("/")
        ntfy = topic.json()
        assert topic.headers["authorization"] == f"Bearer {TOKEN}"
        assert ntfy["topic"] == "placet-topic" and ntfy["priority"] == 4
        assert ntfy["title"] == body["title"] and ntfy["message"] == body["body"]
        assert ntfy["click"] == f"http://127.0.0.1:9/review/p/{pid}"  # the one proposal's page

        # The agent's wait reports who was told and when (once the delivery is recorded).
        async def status() -> dict[str, Any]:
            r = await client.call_tool("proposal_wait", {"id": pid, "timeout_s": 0})
            return ok(r)

        out = await status()
        for _ in range(100):  # each channel records its delivery on its own thread
            if "notified by" in out["status"] and "ntfy" in out["status"]:
                break
            await anyio.sleep(0.1)
            out = await status()
        assert out["status"].startswith("waiting for the owner; notified by ")
        assert "ntfy" in out["status"] and "expires in 30 min" in out["status"]
        assert out["timed_out"] is True and out["poll_after_s"] == 10

    # A discard reason reaches the agent.
    r = ws.placet("discard", str(pid), "--reason", "not now [b]please[/b]\u202e")
    assert r.returncode == 0, r.stderr
    async with _client(ws) as client:
        out = ok(await client.call_tool("proposal_wait", {"id": pid, "timeout_s": 1}))
        assert out["status"] == "discarded by the owner: not now [b]please[/b]\\u202e"
        assert out["poll_after_s"] is None and out["timed_out"] is False


async def test_a_burst_of_ten_proposals_is_one_message(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    # A long quiet time, so a slow machine cannot split the burst; the window caps it.
    ws = _setup(tmp_path, placet_home, listener, quiet=5.0, window=120.0)
    async with _client(ws) as client:
        ids = [await _mkdir(client, f"burst-{i}") for i in range(10)]
        assert await anyio.to_thread.run_sync(
            lambda: listener.wait_for(lambda: bool(_hooks(listener)))
        )
    (hook,) = _hooks(listener)
    assert _ids([hook]) == sorted(ids)
    assert hook["title"] == "placet: 10 proposals wait for you"
    assert len(listener.on("/")) == 1
    assert "and 0 more" not in hook["body"] and hook["body"].count("\n#") <= 10


async def test_agent_strings_arrive_inert_and_minimal_sends_no_path(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    hostile_client = "evil\x1b]52;c;Zm9v\x07\u202e[b]gpj.exe[/b]"
    hostile_name = "[red]boom[b]\u202egpj.exe\u200b"
    ws = _setup(tmp_path, placet_home, listener)
    async with _client(ws, hostile_client) as client:
        await _mkdir(client, hostile_name)
        assert await anyio.to_thread.run_sync(
            lambda: listener.wait_for(lambda: bool(_hooks(listener)))
        )
    (hook,) = _hooks(listener)
    texts = [hook["title"], *hook["body"].split("\n"), *(json.dumps(p) for p in hook["proposals"])]
    for t in texts:
        assert not [c for c in t if unicodedata.category(c) in ("Cc", "Cf")], t
    (item,) = hook["proposals"]
    assert item["target"] == "drive:[red]boom[b]\\u202egpj.exe\\u200b"
    # The server already replaced the client name's controls; nothing raw reaches a message.
    assert item["agent"].startswith("evil") and item["agent"].endswith("gpj.exe[/b]")
    assert "\x1b" not in item["agent"] and "\u202e" not in item["agent"]
    ntfy = listener.on("/")[0].json()
    assert "\u202e" not in ntfy["message"] and "\\u202e" in ntfy["message"]

    # detail = "minimal": no path and no agent name anywhere in the message.
    listener.received.clear()
    (placet_home / "config.toml").write_text(notify_toml(listener, detail="minimal"))
    async with _client(ws, "agent-name-secret") as client:
        await _mkdir(client, "path-name-secret")
        assert await anyio.to_thread.run_sync(
            lambda: listener.wait_for(lambda: bool(_hooks(listener)))
        )
    for r in listener.received:
        raw = r.body.decode()
        assert "path-name-secret" not in raw and "agent-name-secret" not in raw
        assert "drive:" not in raw
    (hook,) = _hooks(listener)
    assert set(hook["proposals"][0]) == {"id", "kind", "status", "bytes", "expires_at"}


async def test_listener_down_then_up_every_message_arrives_once(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    ws = _setup(tmp_path, placet_home, listener)
    listener.down()
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(_client(ws, "agent-a"))
        b = await stack.enter_async_context(_client(ws, "agent-b"))
        ids = [await _mkdir(a, "down-a1"), await _mkdir(b, "down-b1")]
        # Every delivery was tried and failed at least twice while the listener was down.
        assert await anyio.to_thread.run_sync(
            lambda: wait_until(
                lambda: (
                    len(d := _deliveries(placet_home)) == 4
                    and all(s == "pending" and n >= 2 for _c, s, n in d)
                )
            )
        )
        assert listener.received == []
        listener.up()
        assert await anyio.to_thread.run_sync(
            lambda: wait_until(lambda: {s for _c, s, _n in _deliveries(placet_home)} == {"sent"})
        )
    hooks = _hooks(listener)
    assert len(hooks) == 2 and len(listener.on("/")) == 2
    assert _ids(hooks) == sorted(ids)
    assert len({h["delivery"] for h in hooks}) == 2


async def test_two_servers_and_a_third_sender_send_each_message_once(
    tmp_path: Path, placet_home: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _setup(tmp_path, placet_home, listener)
    for k, v in ws.extra_env.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()
    store = open_store(settings)
    n = settings.notify
    assert n.ntfy is not None and n.webhook is not None
    channels: dict[str, Channel] = {  # this process's own keyring may be another test's
        "ntfy": Ntfy(n.ntfy.url, n.ntfy.priority, n.ntfy.click, TOKEN),
        "webhook": Webhook(n.webhook.url, SECRET),
    }
    third = Sender(settings, store, channels=channels).start()  # like `placet review`
    try:
        async with AsyncExitStack() as stack:
            a = await stack.enter_async_context(_client(ws, "agent-a"))
            b = await stack.enter_async_context(_client(ws, "agent-b"))
            ids: list[int] = []

            def all_arrived() -> bool:
                return listener.wait_for(lambda: len(_ids(_hooks(listener))) >= len(ids))

            for i in range(6):  # rounds: a message per session per round, or coalesced
                ids += [await _mkdir(a, f"a-{i}"), await _mkdir(b, f"b-{i}")]
                if i % 2:
                    await anyio.to_thread.run_sync(all_arrived)
            assert await anyio.to_thread.run_sync(
                lambda: listener.wait_for(lambda: len(_ids(_hooks(listener))) >= len(ids))
            )
            assert await anyio.to_thread.run_sync(
                lambda: wait_until(
                    lambda: {s for _c, s, _n in _deliveries(placet_home)} == {"sent"}
                )
            )
    finally:
        third.stop()
        store.close()
    hooks = _hooks(listener)
    assert _ids(hooks) == sorted(ids)  # every proposal in exactly one message
    assert len({h["delivery"] for h in hooks}) == len(hooks)  # no delivery twice
    with open_store(settings) as again:
        log = Outbox(again.engine).log(limit=1000)
    assert len(hooks) == len([d for d in log if d.channel == "webhook"])
    assert len(listener.on("/")) == len(hooks)
    assert all(_verify(r) for r in listener.on("/hook"))
