"""The whole loop, every part real: an agent proposes over MCP to `placet serve`; a local
listener standing in for ntfy receives the notification, whose click URL is the
proposal's page in `placet web`; the owner accepts there in Chromium with a passkey; the
agent's `proposal_wait` returns `succeeded`; `placet audit --verify` re-verifies the
passkey's signature."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import anyio

from placet.config import load_settings
from placet.store import open_store
from tests.support.mcp import connect, make_workspace, ok
from tests.support.notify import Listener, notify_toml
from tests.support.web import Tab, browser, pair, serve, tab

__all__ = ["browser", "tab"]  # fixtures imported for this module

FINAL = ("succeeded", "failed", "interrupted", "discarded", "expired", "withdrawn")


def _agent(ws: Any, out: dict[str, Any], proposed: threading.Event) -> None:
    """The agent, on its own thread and event loop: propose, then wait for the outcome."""

    async def main() -> None:
        async with connect(ws) as client:
            made = ok(
                await client.call_tool(
                    "propose_upload",
                    {"local_path": "hello.txt", "remote_parent": "", "reason": "weekly notes"},
                )
            )
            out["id"] = made["proposal"]["id"]
            proposed.set()
            for _ in range(40):  # each call waits up to 5 s itself
                got = ok(await client.call_tool("proposal_wait", {"id": out["id"], "timeout_s": 5}))
                out["waits"] = out.get("waits", 0) + 1
                if got["proposal"]["status"] in FINAL:
                    out["final"] = got
                    return

    try:
        anyio.run(main)
    except BaseException as e:  # reported by the test
        out["error"] = e
        proposed.set()


def test_propose_notify_accept_by_passkey_wait_verify(
    tab: Tab, tmp_path: Path, placet_home: Path
) -> None:
    ws = make_workspace(tmp_path, placet_home)
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = load_settings({**os.environ, **ws.env})
    store = open_store(settings)
    with Listener() as listener, serve(store, settings) as served:
        config = notify_toml(listener, webhook=False).replace(
            'click = "http://127.0.0.1:9/review"', f'click = "{served.origin}/"'
        )
        (placet_home / "config.toml").write_text(config)
        out: dict[str, Any] = {}
        proposed = threading.Event()
        agent = threading.Thread(target=_agent, args=(ws, out, proposed), daemon=True)
        agent.start()
        assert proposed.wait(60) and "error" not in out, out.get("error")
        pid = out["id"]

        # the owner's phone is told, and the message leads to the proposal's page
        assert listener.wait_for(lambda: bool(listener.on("/")), timeout=30), listener.received
        [message] = listener.on("/")
        body = message.json()
        assert body["topic"] == "placet-topic" and "hello.txt" in body["message"]
        assert body["click"] == f"{served.origin}/p/{pid}"

        pair(tab, served)
        tab.page.goto(body["click"])
        rec = store.get(pid)
        assert tab.page.locator("#request-hash").inner_text() == rec.request_hash
        tab.page.click("#accept")
        tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")

        agent.join(120)
        assert not agent.is_alive() and "error" not in out, out.get("error")
        final = out["final"]
        assert final["proposal"]["status"] == "succeeded" and final["poll_after_s"] is None
    assert (ws.drive / "hello.txt").read_bytes() == (ws.root / "hello.txt").read_bytes()
    approval = [e for e in store.audit_events(proposal_id=pid) if e.to_status == "approved"]
    assert approval[0].detail["via"] == "web" and approval[0].detail["passkey"]["signature"]
    store.close()
    verified = ws.placet("audit", "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "1 passkey-signed approval(s) re-verified" in verified.stdout + verified.stderr
    assert json.loads(message.body)["priority"] == 4
