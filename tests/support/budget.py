"""A sync of N generated files through a real `placet serve`, every reply measured.

Shared by tests/server/test_reply_budget.py (300 and 20,000 files) and bench/reply_budget.py
(100,000 files, and the timings). `Measured` wraps an `mcp.Client`: every call asserts
that the text content and the structured content of the reply, each as UTF-8 JSON, are
within the budget, and records the largest of each per tool.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import CallToolResult

from tests.support.mcp import error_payload

BUDGET = 40_000


def reply_sizes(result: CallToolResult) -> tuple[int, int]:
    """(text content, structured content) of `result`, in bytes of UTF-8 JSON."""
    text = json.dumps([c.model_dump(mode="json") for c in result.content], ensure_ascii=False)
    data = json.dumps(result.structured_content, ensure_ascii=False)
    return len(text.encode()), len(data.encode())


@dataclass
class Measured:
    """A client whose every reply is checked against `budget` (see the module docstring)."""

    client: Client
    budget: int = BUDGET
    largest: dict[str, list[int]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        text, data = reply_sizes(result)
        assert text <= self.budget and data <= self.budget, (tool, text, data)
        top = self.largest.setdefault(tool, [0, 0])
        top[0], top[1] = max(top[0], text), max(top[1], data)
        self.calls[tool] = self.calls.get(tool, 0) + 1
        assert not result.is_error, result.content[0].text if result.content else result
        assert result.structured_content is not None
        return result.structured_content

    async def pages(self, tool: str, **args: Any) -> list[dict[str, Any]]:
        """Every page of `tool(**args)`, following next_cursor (same arguments)."""
        pages = [await self.call(tool, **args)]
        while pages[-1]["next_cursor"]:
            pages.append(await self.call(tool, **args, cursor=pages[-1]["next_cursor"]))
        return pages

    async def settled(self, tool: str, **args: Any) -> dict[str, Any]:
        """`tool(**args)`, called again while it answers the retryable `in_progress`."""
        while True:
            result = await self.client.call_tool(tool, args)
            text, data = reply_sizes(result)
            assert text <= self.budget and data <= self.budget, (tool, text, data)
            sc = error_payload(result) if result.is_error else {}
            if not (result.is_error and sc.get("code") == "in_progress"):
                break
        assert not result.is_error, result.content[0].text if result.content else result
        top = self.largest.setdefault(tool, [0, 0])
        top[0], top[1] = max(top[0], text), max(top[1], data)
        self.calls[tool] = self.calls.get(tool, 0) + 1
        assert result.structured_content is not None
        return result.structured_content


NAME = "-a-longer-generated-name-to-fill-the-pages.txt"


def make_tree(folder: Path, n: int, per_dir: int = 250) -> list[str]:
    """`n` small files (4-10 bytes) in folders of `per_dir`; their relative paths."""
    paths: list[str] = []
    for i in range(n):
        d = folder / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        rel = f"d{i // per_dir:04d}/f{i:06d}{NAME}"
        fd = os.open(folder / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, f"{i}\n".encode())
        os.close(fd)
        paths.append(rel)
    return paths


@dataclass
class Proposed:
    """What the agent saw: the plan's op paths, the proposal, and the ops it paged."""

    plan_paths: list[str]
    plan_dirs: list[str]
    pid: int
    paged: list[dict[str, Any]]


async def plan_and_propose(
    m: Measured, local: str, remote: str, n: int, tick: Callable[[str], None] = lambda _: None
) -> Proposed:
    """Index, plan, propose and page through the ops of a sync of `local` (n files) to a
    missing remote folder `remote`, checking counts and that every op is paged once."""
    entries = [e for p in await m.pages("local_index", path=local) for e in p["entries"]]
    assert sum(1 for e in entries if e["kind"] == "file") == n
    tick("local_index")
    first = await m.settled("sync_plan", local_path=local, remote_path=remote)
    pages = [first]
    while pages[-1]["next_cursor"]:
        pages.append(
            await m.call("sync_plan", local_path=local, remote_path=remote,
                         cursor=pages[-1]["next_cursor"])
        )  # fmt: skip
    plan_paths = [o["path"] for p in pages for o in p["ops"]]
    plan_dirs = [d for p in pages for d in p["dirs_to_create"]]
    assert first["counts"]["upload"] == n and len(plan_paths) == n == len(set(plan_paths))
    tick("sync_plan")
    prop = await m.call("propose_sync", plan_id=first["plan_id"], reason="back up the tree")
    pid = prop["proposal"]["id"]
    summary = prop["proposal"]["sync"]
    assert summary["op_count"] == n + len(plan_dirs)
    assert summary["by_kind"]["upload"]["count"] == n
    tick("propose_sync")
    for _ in range(2):
        got = await m.call("proposal_get", id=pid)
        assert got["proposal"]["sync"]["op_count"] == summary["op_count"]
    await m.pages("proposal_list")
    waited = await m.call("proposal_wait", id=pid, timeout_s=0)
    assert waited["timed_out"] is True and waited["proposal"]["status"] == "pending"
    tick("proposal_get/list/wait")
    paged = [
        {**v["op"], "outcome": v["result"] and v["result"]["outcome"]}
        for p in await m.pages("proposal_ops", id=pid)
        for v in p["ops"]
    ]
    assert [o["index"] for o in paged] == list(range(summary["op_count"]))  # each once
    prefix = f"{remote}/"
    uploads = [o["remote_path"].removeprefix(prefix) for o in paged if o["kind"] == "upload"]
    assert uploads == plan_paths  # same count, same paths, same order as the plan
    assert {o["remote_path"] for o in paged if o["kind"] == "mkdir"} == {
        remote if d == "." else f"{prefix}{d}" for d in plan_dirs
    }
    tick("proposal_ops")
    return Proposed(plan_paths, plan_dirs, pid, paged)


async def check_ran(m: Measured, proposed: Proposed, remote: str, drive: Path) -> None:
    """After the owner accepted: the ops paged now are those paged before, each done, and
    the drive holds every file."""
    waited = await m.call("proposal_wait", id=proposed.pid, timeout_s=50)
    assert waited["proposal"]["status"] == "succeeded", waited["proposal"]["result"]
    assert waited["proposal"]["sync"]["outcomes"] == {"done": len(proposed.paged)}
    after = [
        {**v["op"], "outcome": v["result"] and v["result"]["outcome"]}
        for p in await m.pages("proposal_ops", id=proposed.pid)
        for v in p["ops"]
    ]
    strip = [{k: v for k, v in o.items() if k != "outcome"} for o in after]
    assert strip == [{k: v for k, v in o.items() if k != "outcome"} for o in proposed.paged]
    assert {o["outcome"] for o in after} == {"done"}
    for rel in proposed.plan_paths:
        assert (drive / remote / rel).is_file(), rel
