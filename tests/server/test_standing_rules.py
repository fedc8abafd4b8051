"""Standing rules in a real `placet serve` with the official MCP client: a proposal a rule
covers is approved by it and runs like any other, the agent's reply says so, and the
hostile ones wait for the owner; a server whose host configuration moves `PLACET_HOME`
(a project's `.mcp.json`) applies no rule and says why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from placet.config import Settings
from placet.store import open_store
from tests.rules.test_matcher import MINIMAL
from tests.support.mcp import CLIENT_INFO, PLACET, ok
from tests.support.rules import become_owner, owner_settings, write_rules

pytestmark = pytest.mark.anyio

PASSED = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


class Owner:
    """An owner's machine: placet's config in its default folder (naming the drive), a
    project root with files, and a local-folder drive."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.env = {k: env[k] for k in PASSED}
        self.settings: Settings = owner_settings(env)
        self.root = tmp_path / "proj"
        self.drive = tmp_path / "drive"
        self.root.mkdir()
        self.drive.mkdir()
        (self.root / "weekly.pdf").write_bytes(b"%PDF-1.7 weekly report\n")
        (self.root / "install.sh").write_text("#!/bin/sh\necho hi\n")
        self.settings.config_file.parent.mkdir(parents=True, mode=0o700)
        self.settings.config_file.write_text(f'drive = "{self.drive}"\n')
        write_rules(self.settings, MINIMAL)

    @asynccontextmanager
    async def serve(self, **extra: str) -> AsyncIterator[Client]:
        params = StdioServerParameters(
            command=PLACET,
            args=["serve", "--root", str(self.root)],
            env={**self.env, **extra},
            cwd=str(self.root),
        )
        async with Client(params, client_info=CLIENT_INFO) as client:
            yield client


@pytest.fixture
def owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Owner:
    return Owner(tmp_path, become_owner(tmp_path, monkeypatch))


async def _call(client: Client, tool: str, **args: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(tool, args)
    text = result.content[0].text  # type: ignore[union-attr]
    return ok(result), text


async def _outcome(client: Client, pid: int) -> str:
    for _ in range(10):
        waited, _ = await _call(client, "proposal_wait", id=pid, timeout_s=10)
        status = str(waited["proposal"]["status"])
        if status not in ("approved", "executing"):
            return status
    raise AssertionError(f"proposal {pid} still runs")


async def test_a_covered_proposal_is_approved_by_its_rule_and_runs(owner: Owner) -> None:
    async with owner.serve() as client:
        made, text = await _call(
            client, "propose_mkdir", remote_parent="reports", name="2026", reason="folders"
        )
        assert made["approved_by_rule"] == "report-folders"
        assert made["rules"] == "approved by rule 'report-folders'"
        assert made["proposal"]["status"] == "approved"
        assert made["proposal"]["resolution"]["by"] == "rule:report-folders"
        assert "approved by rule report-folders: it runs now" in text
        assert await _outcome(client, made["proposal"]["id"]) == "succeeded"
        assert (owner.drive / "reports" / "2026").is_dir()

        up, text = await _call(
            client, "propose_upload", local_path="weekly.pdf", remote_parent="reports/2026",
            reason="this week's report",
        )  # fmt: skip
        assert up["approved_by_rule"] == "weekly-reports"
        assert await _outcome(client, up["proposal"]["id"]) == "succeeded"
        assert (owner.drive / "reports" / "2026" / "weekly.pdf").read_bytes().startswith(b"%PDF")

        for args in (
            {"local_path": "weekly.pdf", "remote_parent": "reports-evil"},
            {"local_path": "weekly.pdf", "remote_parent": "Reports"},
            {"local_path": "install.sh", "remote_parent": "reports"},
            {"local_path": "weekly.pdf", "remote_parent": "reports/2026", "name": "weekly.pdf",
             "replace_existing": True},
        ):  # fmt: skip
            waits, text = await _call(client, "propose_upload", reason="r", **args)
            assert waits["approved_by_rule"] is None, args
            assert waits["proposal"]["status"] == "pending", args
            assert "it does nothing until the owner accepts it" in text

    with open_store(owner.settings) as store:
        events = store.audit_events(proposal_id=made["proposal"]["id"])
    approval = next(e for e in events if e.to_status == "approved")
    assert approval.actor == "rule:report-folders"
    assert approval.detail["via"] == "rule"
    rule = approval.detail["rule"]
    assert rule["id"] == "report-folders"
    assert rule["rules_sha256"] == __import__("hashlib").sha256(MINIMAL).hexdigest()
    assert rule["rules_path"].endswith("/placet/rules.toml")
    assert approval.detail["request_hash"] == made["proposal"]["request_hash"]


async def test_a_moved_placet_home_applies_no_rule_and_says_so(
    owner: Owner, tmp_path: Path
) -> None:
    # A project's .mcp.json starts placet serve with a PLACET_HOME of its own (outside
    # the root: a home inside a root is refused as a root anyway), whose rules.toml
    # allows everything.
    moved = tmp_path / "elsewhere"
    moved.mkdir(mode=0o700)
    (moved / "config.toml").write_text(f'drive = "{owner.drive}"\n')
    own = moved / "rules.toml"
    own.write_text('[[rule]]\nid = "all"\neffect = "allow"\nkinds = ["mkdir", "upload"]\n')
    own.chmod(0o600)
    async with owner.serve(PLACET_HOME=str(moved)) as client:
        made, text = await _call(
            client, "propose_mkdir", remote_parent="reports", name="x", reason="r"
        )
    assert made["approved_by_rule"] is None
    assert made["proposal"]["status"] == "pending"
    assert made["rules"].startswith("standing rules are off (PLACET_HOME is set")
    assert "standing rules are off" in text


async def test_a_rules_file_others_can_write_applies_no_rule_and_says_so(owner: Owner) -> None:
    (owner.settings.config_file.parent / "rules.toml").chmod(0o666)
    async with owner.serve() as client:
        made, _ = await _call(
            client, "propose_mkdir", remote_parent="reports", name="x", reason="r"
        )
    assert made["approved_by_rule"] is None
    assert "writable by group or others (mode 666)" in made["rules"]
