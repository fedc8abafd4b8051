"""A sync of N generated files through a real `placet serve`, every reply measured.

Shared by tests/server/test_reply_budget.py (300 and 20,000 files) and bench/reply_budget.py
(100,000 files, a site-packages copy, and the timings). `Measured` wraps an `mcp.Client`:
every call asserts that the text content and the structured content of the reply, each
as UTF-8 JSON, are within the budget, records the largest of each per tool, and adds
what a host hands the model (`model_bytes`) to `read`: the whole task's cost in context.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import CallToolResult, ListToolsResult, TextContent

from tests.support.mcp import error_payload

BUDGET = 40_000


def model_bytes(result: CallToolResult) -> int:
    """What a host hands the model of `result`: `JSON.stringify(structuredContent)`
    (compact JSON, non-ASCII as UTF-8) when there is structured content, which Claude Code
    and VS Code give instead of the text; else the text blocks (an error's code, cause
    and next step)."""
    if result.structured_content is not None:
        data = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        return len(data.encode())
    return sum(len(c.text.encode()) for c in result.content if isinstance(c, TextContent))


def reply_sizes(result: CallToolResult) -> tuple[int, int]:
    """(text content, structured content) of `result`, in bytes of UTF-8 JSON."""
    text = json.dumps([c.model_dump(mode="json") for c in result.content], ensure_ascii=False)
    data = json.dumps(result.structured_content, ensure_ascii=False)
    return len(text.encode()), len(data.encode())


def tools_list_bytes(listed: ListToolsResult) -> int:
    """`tools/list`'s result, `{"tools": [...]}` as the server wrote it, in bytes of
    compact UTF-8 JSON (the JSON-RPC envelope, ~40 bytes, aside; the fields the client
    adds of its own, such as `_meta`, left out)."""
    tools = [t.model_dump(mode="json", by_alias=True, exclude_unset=True) for t in listed.tools]
    data = json.dumps({"tools": tools}, ensure_ascii=False, separators=(",", ":"))
    return len(data.encode())


@dataclass
class Measured:
    """A client whose every reply is checked against `budget` (see the module docstring)."""

    client: Client
    budget: int = BUDGET
    largest: dict[str, list[int]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    read: int = 0
    """Bytes of every reply so far as a host hands them to the model (`model_bytes`)."""
    replies: int = 0
    """Replies so far, an in_progress answer included."""

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        self.read += model_bytes(result)
        self.replies += 1
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
            self.read += model_bytes(result)
            self.replies += 1
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


def make_conflicts(drive_folder: Path, paths: list[str]) -> None:
    """Remote files at `paths` whose bytes differ from the local ones `make_tree` wrote:
    with no earlier sync, each is a `content_differs` conflict."""
    for rel in paths:
        (drive_folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (drive_folder / rel).write_text(f"remote {rel}\n")


@dataclass
class Proposed:
    """What the agent read (`task_bytes`: sync_plan and propose_sync, as the tool
    descriptions say), the proposal, and the plan's ops listed afterwards (paths by kind
    from `sync_plan_ops`, the proposal's ops from `proposal_ops`)."""

    task_bytes: int
    task_replies: int
    plan_id: int
    pid: int
    plan_paths: list[str]
    plan_dirs: list[str]
    paged: list[dict[str, Any]]


async def plan_and_propose(
    m: Measured,
    local: str,
    remote: str,
    n: int | None,
    tick: Callable[[str], None] = lambda _: None,
    *,
    conflicts: Sequence[str] = (),
) -> Proposed:
    """Plan and propose a sync of `local` (n new files, None: as many as the plan says;
    `conflicts` more, conflicting) to `remote` as an agent following the tool
    descriptions does: sync_plan (again while it answers in_progress), then propose_sync
    with plan_id and a decision per conflict, and nothing else. Then, outside the task,
    list the plan's ops by kind (`sync_plan_ops`) and the proposal's (`proposal_ops`) and
    check that each is listed once and that they are the same."""
    before, replies = m.read, m.replies
    plan = await m.settled("sync_plan", local_path=local, remote_path=remote)
    if n is None:
        n = plan["counts"]["upload"] + len(conflicts)
    assert plan["counts"]["upload"] == n - len(conflicts)
    listed = [c["path"] for c in plan["conflicts"]]
    cursor = plan["conflicts_cursor"]
    while cursor:  # more conflicts than fit the summary: the description says where
        page = await m.call("sync_plan_ops", plan_id=plan["plan_id"], kind="conflict",
                            cursor=cursor)  # fmt: skip
        listed += [c["path"] for c in page["items"]]
        cursor = page["next_cursor"]
    assert sorted(listed) == sorted(conflicts)
    tick("sync_plan")
    decisions = dict.fromkeys(listed, "keep_local")
    prop = await m.call("propose_sync", plan_id=plan["plan_id"], decisions=decisions,
                        reason="back up the tree")  # fmt: skip
    task, task_replies = m.read - before, m.replies - replies
    pid = prop["proposal"]["id"]
    summary = prop["proposal"]["sync"]
    tick("propose_sync")
    plan_paths = await _items(m, plan["plan_id"], "upload")
    plan_dirs = await _items(m, plan["plan_id"], "mkdir")
    assert len(plan_paths) == n - len(conflicts) == len(set(plan_paths))
    assert summary["op_count"] == n + len(plan_dirs)
    assert summary["by_kind"]["upload"]["count"] == n - len(conflicts)
    tick("sync_plan_ops (every upload and mkdir)")
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
    revised = [o["remote_path"].removeprefix(prefix) for o in paged
               if o["kind"] == "upload_revision"]  # fmt: skip
    assert sorted(revised) == sorted(conflicts)  # one per conflict decided keep_local
    assert {o["remote_path"] for o in paged if o["kind"] == "mkdir"} == {
        remote if d == "." else f"{prefix}{d}" for d in plan_dirs
    }
    tick("proposal_ops")
    return Proposed(task, task_replies, plan["plan_id"], pid, plan_paths, plan_dirs, paged)


async def _items(m: Measured, plan_id: int, kind: str) -> list[str]:
    """The paths of every item of `kind` in plan `plan_id`, page after page."""
    pages = await m.pages("sync_plan_ops", plan_id=plan_id, kind=kind)
    assert all(p["total"] == pages[0]["total"] for p in pages)
    paths = [i["path"] for p in pages for i in p["items"]]
    assert len(paths) == pages[0]["total"]
    return paths


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
    for o in after:
        if o["kind"] == "upload_revision":  # a conflict decided keep_local: the local bytes
            assert not (drive / o["remote_path"]).read_bytes().startswith(b"remote "), o
