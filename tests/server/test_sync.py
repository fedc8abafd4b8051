"""Sync over MCP with the installed `placet serve` on stdio, a real rclone `local`
remote, and the owner accepting with `placet accept --yes` in another process.

The round trip: an uploaded file edited here is a conflict with no baseline; decided
keep_local and accepted, planning again gives only skips and both sides hash alike; the
next edit is a plain upload_revision (the baseline exists now); and a file edited
between that plan and the accept is reported stale and never uploaded. Then
drive_changes against another process's edits, long reads, and the refusals of
propose_sync.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from mcp import Client

from tests.support.mcp import (
    Workspace,
    connect,
    error_of,
    ok,
    plan_item_pages,
    plan_items,
    proposal_ops,
    sha256_of,
    snapshot,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


def accept(ws: Workspace, pid: int) -> None:
    r = ws.placet("accept", "--yes", str(pid))
    assert r.returncode in (0, 1), r.stderr  # 1: an op failed (checked by the caller)


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return ok(await client.call_tool(tool, args))


async def op_outcomes(client: Client, pid: int) -> list[tuple[str, str, str]]:
    return [(o["kind"], o["remote_path"], o["outcome"]) for o in await proposal_ops(client, pid)]


def only_skips(counts: dict[str, int]) -> bool:
    return all(v == 0 for k, v in counts.items() if k not in ("skip",) and not k.endswith("bytes"))


async def test_round_trip_conflict_keep_local_then_revision_then_stale(yes_ws: Workspace) -> None:
    work, remote = yes_ws.root / "work", yes_ws.drive / "work"
    (work / "sub").mkdir(parents=True)
    (remote / "sub").mkdir(parents=True)
    (work / "a.txt").write_text("first version\n")
    for rel, text in (("c.txt", "same on both\n"), ("sub/b.txt", "also the same\n")):
        (work / rel).write_text(text)
        (remote / rel).write_text(text)

    async with connect(yes_ws) as client:
        up = await call(client, "propose_upload", local_path="work/a.txt", remote_parent="work",
                        reason="share a.txt")  # fmt: skip
        accept(yes_ws, up["proposal"]["id"])
        assert (remote / "a.txt").read_text() == "first version\n"

        (work / "a.txt").write_text("edited here after the upload\n")
        p1 = await call(client, "sync_plan", local_path="work", remote_path="work")
        assert [c["path"] for c in p1["conflicts"]] == ["a.txt"]  # no baseline: a conflict
        assert p1["conflicts"][0]["allowed_decisions"] == ["keep_local", "keep_remote", "skip"]
        assert p1["counts"]["skip"] == 3 and p1["counts"]["conflict"] == 1  # c, sub, sub/b
        assert p1["examples"] == {}  # nothing but the conflict
        assert await plan_items(client, p1["plan_id"]) == [
            {"path": "a.txt", **{k: v for k, v in p1["conflicts"][0].items() if k != "path"},
             "kind": "conflict"}
        ]  # fmt: skip

        prop = await call(client, "propose_sync", plan_id=p1["plan_id"],
                          decisions={"a.txt": "keep_local"}, reason="keep my edit")  # fmt: skip
        pid = prop["proposal"]["id"]
        assert prop["proposal"]["kind"] == "sync" and prop["proposal"]["status"] == "pending"
        accept(yes_ws, pid)
        assert await op_outcomes(client, pid) == [("upload_revision", "work/a.txt", "done")]

        p2 = await call(client, "sync_plan", local_path="work", remote_path="work")
        assert only_skips(p2["counts"]) and p2["counts"]["skip"] == 4
        for rel in ("a.txt", "c.txt", "sub/b.txt"):
            assert sha256_of(work / rel) == sha256_of(remote / rel)

        # With a baseline, the next edit here is a fast-forward, not a conflict.
        (work / "a.txt").write_text("third version\n")
        p3 = await call(client, "sync_plan", local_path="work", remote_path="work")
        assert p3["conflicts"] == []
        items = await plan_items(client, p3["plan_id"])
        assert [(o["kind"], o["path"]) for o in items] == [("upload_revision", "a.txt")]
        assert p3["counts"]["skip"] == 3
        prop3 = await call(client, "propose_sync", plan_id=p3["plan_id"], reason="publish")
        pid3 = prop3["proposal"]["id"]

        # Edited between plan and accept: stale at execution, never uploaded.
        time.sleep(0.01)
        (work / "a.txt").write_text("fourth, after the plan\n")
        before = snapshot(remote)
        accept(yes_ws, pid3)
        assert await op_outcomes(client, pid3) == [("upload_revision", "work/a.txt", "stale")]
        got = await call(client, "proposal_get", id=pid3)
        assert got["proposal"]["status"] == "failed"
        assert got["proposal"]["sync"]["outcomes"] == {"stale": 1}
        assert (await proposal_ops(client, pid3))[0]["detail"]["code"] == "stale"
        assert snapshot(remote) == before
        assert (remote / "a.txt").read_text() == "edited here after the upload\n"


async def test_plan_pages_and_keep_remote(yes_ws: Workspace) -> None:
    src, dst = yes_ws.root / "many", yes_ws.drive / "many"
    src.mkdir()
    dst.mkdir()
    for i in range(230):
        (src / f"n{i:03d}.txt").write_text(f"new {i}\n")
    (src / "both.txt").write_text("local side\n")
    (dst / "both.txt").write_text("remote side\n")
    with (yes_ws.home / "config.toml").open("a") as f:  # keep_remote replaces both.txt
        f.write(f'[roots."{yes_ws.root.resolve()}"]\ndownloads = "allow-overwrite"\n')
    async with connect(yes_ws) as client:
        first = await call(client, "sync_plan", local_path="many", remote_path="many")
        assert first["counts"]["upload"] == 230
        assert [c["path"] for c in first["conflicts"]] == ["both.txt"]
        assert first["conflicts_cursor"] is None
        assert [e["path"] for e in first["examples"]["upload"]] == ["n000.txt", "n001.txt",
                                                                    "n002.txt"]  # fmt: skip
        pages = await plan_item_pages(client, first["plan_id"])
        assert len(pages) > 1 and {p["plan_id"] for p in pages} == {first["plan_id"]}
        seen = [(o["kind"], o["path"]) for p in pages for o in p["items"]]
        assert seen == [("conflict", "both.txt")] + [  # conflicts first, each item once
            ("upload", f"n{i:03d}.txt") for i in range(230)
        ]

        err = error_of(await client.call_tool(
            "propose_sync", {"plan_id": first["plan_id"], "reason": "x",
                             "decisions": {"n001.txt": "skip", "both.txt": "skip"}}))  # fmt: skip
        assert err["code"] == "decision_not_conflict" and err["details"]["path"] == "n001.txt"
        err = error_of(await client.call_tool(
            "propose_sync", {"plan_id": first["plan_id"], "reason": "x"}))  # fmt: skip
        assert err["code"] == "undecided_conflict"
        listed = await call(client, "proposal_list")
        assert listed["proposals"] == []  # both refused as a whole

        prop = await call(client, "propose_sync", plan_id=first["plan_id"], reason="all",
                          decisions={"both.txt": "keep_remote"})  # fmt: skip
        ops = await proposal_ops(client, prop["proposal"]["id"])
        assert len(ops) == 231 and ops[0]["kind"] == "download" and ops[0]["replace"] is True
        assert prop["proposal"]["sync"]["op_count"] == 231
        assert prop["proposal"]["sync"]["decisions"] == {"keep_remote": 1}


async def test_drive_changes_reports_another_process_edits(yes_ws: Workspace) -> None:
    shared = yes_ws.drive / "shared"
    (shared / "keep.txt").write_text("unchanged\n")
    (shared / "edit.txt").write_text("before\n")
    (shared / "gone.txt").write_text("to be removed\n")
    (shared / "deep").mkdir()
    async with connect(yes_ws) as client:
        first = await call(client, "drive_changes", path="shared")
        assert first["since"] is None and first["changes"] == [] and first["entry_count"] == 4
        anchor = first["anchor"]
        script = (
            "import os, sys; d = sys.argv[1]\n"
            "open(os.path.join(d, 'deep', 'new.txt'), 'w').write('added\\n')\n"
            "open(os.path.join(d, 'edit.txt'), 'w').write('after, longer\\n')\n"
            "os.remove(os.path.join(d, 'gone.txt'))\n"
        )
        subprocess.run([sys.executable, "-c", script, str(shared)], check=True, timeout=30)

        got = await call(client, "drive_changes", path="shared", since_anchor=anchor)
        assert got["counts"] == {"added": 1, "changed": 1, "removed": 1}
        assert got["changes"] == [] and got["listed"] is None  # a summary
        assert {k: [c["path"] for c in v] for k, v in got["examples"].items()} == {
            "added": ["deep/new.txt"], "changed": ["edit.txt"], "removed": ["gone.txt"]
        }  # fmt: skip
        listed = await call(client, "drive_changes", path="shared", cursor=got["next_cursor"])
        assert [(c["path"], c["change"]) for c in listed["changes"]] == [
            ("deep/new.txt", "added"),
            ("edit.txt", "changed"),
            ("gone.txt", "removed"),
        ]
        assert listed["changes"][1]["before"]["size"] == 7
        assert listed["changes"][1]["after"]["size"] == 14
        assert "before" not in listed["changes"][0]  # added: nothing before
        assert listed["next_cursor"] is None and listed["anchor"] == got["anchor"]
        changed = await call(client, "drive_changes", path="shared", since_anchor=anchor,
                             changes="changed")  # fmt: skip
        assert [c["path"] for c in changed["changes"]] == ["edit.txt"]
        assert "change" not in changed["changes"][0]  # the kind listed
        assert got["anchor"] != anchor

        quiet = await call(client, "drive_changes", path="shared", since_anchor=got["anchor"])
        assert quiet["changes"] == [] and quiet["counts"] == {"added": 0, "changed": 0,
                                                              "removed": 0}  # fmt: skip

        err = error_of(await client.call_tool(
            "drive_changes", {"path": "", "since_anchor": got["anchor"]}))  # fmt: skip
        assert err["code"] == "invalid_anchor"  # an anchor of another folder
        err = error_of(await client.call_tool(
            "drive_changes", {"path": "shared", "since_anchor": "junk"}))  # fmt: skip
        assert err["code"] == "invalid_anchor"


async def test_long_read_answers_in_progress_then_the_result(yes_ws: Workspace) -> None:
    yes_ws.write_config(allow_yes=True, long_read_seconds=0)  # never wait: always in_progress first
    for i in range(50):
        (yes_ws.root / "docs" / f"f{i}.txt").write_text(f"{i}\n")
    time.sleep(2.1)  # past the racily-clean window: the plan's digests may then be reused
    async with connect(yes_ws) as client:
        r = await client.call_tool("sync_plan", {"local_path": "docs", "remote_path": "docs"})
        err = error_of(r)
        assert err["code"] == "in_progress" and err["retryable"] is True
        assert "phase" in err["details"]["progress"]
        for _ in range(200):
            r = await client.call_tool("sync_plan", {"local_path": "docs", "remote_path": "docs"})
            if not r.is_error:
                break
            assert error_of(r)["code"] == "in_progress"
            time.sleep(0.05)
        plan = ok(r)
        assert plan["counts"]["upload"] == 51 and plan["remote_folder_missing"] is True

        r = await client.call_tool("local_index", {"path": "docs"})
        assert error_of(r)["code"] == "in_progress"
        for _ in range(200):
            r = await client.call_tool("local_index", {"path": "docs"})
            if not r.is_error:
                break
            time.sleep(0.05)
        idx = ok(r)
        assert idx["total_entries"] == 51 and idx["files_hashed"] == 0  # the plan's cache
        assert idx["counts"] == {"file": 51} and idx["entries"] == []  # a summary
        listed = await call(client, "local_index", path="docs", cursor=idx["next_cursor"])
        assert {e["path"] for e in listed["entries"]} == {"guide.md"} | {
            f"f{i}.txt" for i in range(50)
        }


async def test_local_index_pages_and_scope(yes_ws: Workspace) -> None:
    big = yes_ws.root / "big"
    big.mkdir()
    for i in range(1203):
        (big / f"x{i:04d}").write_text("x")
    (big / ".secret").write_text("hidden")
    async with connect(yes_ws) as client:
        page = await call(client, "local_index", path="big", entries="file")
        paths, first_cursor = [e["path"] for e in page["entries"]], page["next_cursor"]
        while page["next_cursor"]:
            page = await call(client, "local_index", path="big", entries="file",
                              cursor=page["next_cursor"])  # fmt: skip
            paths += [e["path"] for e in page["entries"]]
        assert paths == [f"x{i:04d}" for i in range(1203)]
        hidden = await call(client, "local_index", path="big", include_hidden=True)
        assert hidden["counts"] == {"file": 1204}
        assert hidden["examples"]["file"][0] == {
            "path": ".secret", "size": 6, "mtime_ns": (big / ".secret").stat().st_mtime_ns,
            "sha256": sha256_of(big / ".secret"),
        }  # fmt: skip
        bad = await client.call_tool(
            "local_index", {"path": "big", "entries": "dir", "cursor": first_cursor}
        )
        assert error_of(bad)["code"] == "invalid_cursor"  # a cursor of another kind
        err = error_of(await client.call_tool("local_index", {"path": str(yes_ws.outside)}))
        assert err["code"] == "path_outside_root"
        err = error_of(await client.call_tool("local_index", {"path": "hello.txt"}))
        assert err["code"] == "not_a_directory"
