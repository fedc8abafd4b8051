"""The hostile-path table, through one real `placet serve` (docs/design.md section 6).

Every path an agent could use to escape a root or smuggle an rclone option goes through
the MCP tools that take it, against a single server process: each is refused with its
specific code, the server keeps answering, and neither the local root nor the drive
changes. Local paths are tried as an upload source, a download target, a folder to index
and a sync's local side; remote paths as a folder to list, a file to read, an upload
parent, a mkdir parent and name, a download source, a folder to diff and a sync's remote
side.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.support.mcp import Workspace, connect, error_of, ok, snapshot

pytestmark = pytest.mark.anyio


@pytest.fixture
def linked_ws(ws: Workspace) -> Workspace:
    """`ws` with symlinks in its root: out of the root, inside it, and a linked folder."""
    os.symlink(ws.outside / "secret.txt", ws.root / "link_out")  # points outside the root
    os.symlink("hello.txt", ws.root / "link_in")  # points inside: refused all the same
    os.symlink(ws.root / "docs", ws.root / "linkdir")  # a parent folder that is a symlink
    return ws


def _local_table(ws: Workspace) -> list[tuple[str, str, str]]:
    """(label, local path, code) for both upload sources and download targets."""
    return [
        ("dotdot", "../x", "path_invalid"),
        ("absolute outside", "/etc/passwd", "path_outside_root"),
        ("dotdot inside", "a/../../b", "path_invalid"),
        ("drive letter", "C:\\x", "path_invalid"),
        ("unc", "\\\\server\\share", "path_invalid"),
        ("backslash", "a\\b", "path_invalid"),
        ("nul", "a\x00b", "path_invalid"),
        ("device name", "CON", "path_invalid"),
        ("device name with extension", "nul.txt", "path_invalid"),
        ("300-char name", "a" * 300, "path_invalid"),
        ("20 deep", "/".join(["d"] * 20), "path_invalid"),
        ("symlink to outside", "link_out", "path_outside_root"),
        ("symlink inside to inside", "link_in", "symlink_refused"),
        ("parent is a symlink", "linkdir/guide.md", "symlink_refused"),
        ("sibling root-evil", str(ws.outside / "secret.txt"), "path_outside_root"),
        ("escape char", "a\x1bb", "path_invalid"),
        ("reserved temp prefix", ".placet-tmp-0a1b-x.txt", "path_reserved"),
        ("reserved temp prefix in a folder", "docs/.placet-tmp-x/y.txt", "path_reserved"),
    ]


REMOTE_TABLE: list[tuple[str, str, str]] = [
    ("leading dash", "-flag", "path_invalid"),
    ("on-the-fly backend", ":local:/etc", "path_invalid"),
    ("another remote", "other:x", "path_invalid"),
    ("dotdot", "a/../b", "path_invalid"),
    ("escape char", "a\x1bb", "path_invalid"),
    ("absolute", "/etc", "path_invalid"),
    ("nul", "a\x00b", "path_invalid"),
    ("reserved temp prefix", ".placet-tmp-0a1b-x", "path_reserved"),
]


def _remote_calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("drive_list", {"path": path}),
        ("drive_read", {"path": path}),
        ("propose_upload", {"local_path": "hello.txt", "remote_parent": path, "reason": "r"}),
        ("propose_mkdir", {"remote_parent": path, "name": "ok", "reason": "r"}),
        ("propose_mkdir", {"remote_parent": "", "name": path, "reason": "r"}),
        ("propose_download", {"remote_path": path, "local_path": "new.txt", "reason": "r"}),
        ("drive_changes", {"path": path}),
        ("sync_plan", {"local_path": "", "remote_path": path}),
    ]


async def test_hostile_paths_refused_with_specific_codes_by_one_server(
    linked_ws: Workspace,
) -> None:
    before = (snapshot(linked_ws.root), snapshot(linked_ws.drive))
    failures: list[str] = []
    calls = 0
    async with connect(linked_ws) as client:

        async def expect(label: str, tool: str, args: dict[str, Any], code: str) -> None:
            nonlocal calls
            calls += 1
            result = await client.call_tool(tool, args)
            if not result.is_error:
                failures.append(f"{label} via {tool}: accepted {result.structured_content}")
                return
            err = error_of(result)
            if err["code"] != code:
                failures.append(f"{label} via {tool}: {err['code']} (want {code}): {err}")
            # the server is still serving after every refusal
            ok(await client.call_tool("roots_list", {}))

        for label, path, code in _local_table(linked_ws):
            await expect(
                label,
                "propose_upload",
                {"local_path": path, "remote_parent": "", "reason": "hostile"},
                code,
            )
            await expect(
                label,
                "propose_download",
                {"remote_path": "remote.txt", "local_path": path, "reason": "hostile"},
                code,
            )
            await expect(label, "local_index", {"path": path}, code)
            await expect(label, "sync_plan", {"local_path": path, "remote_path": ""}, code)
        for label, path, code in REMOTE_TABLE:
            for tool, args in _remote_calls(path):
                await expect(f"remote {label}", tool, args, code)
        # A sane call still works on the same server, and nothing was proposed.
        listed = ok(await client.call_tool("proposal_list", {}))
        assert listed["proposals"] == []
    assert not failures, "\n".join(failures)
    assert calls == 4 * len(_local_table(linked_ws)) + 8 * len(REMOTE_TABLE)
    assert (snapshot(linked_ws.root), snapshot(linked_ws.drive)) == before


async def test_messages_say_what_to_do_and_escape_control_characters(linked_ws: Workspace) -> None:
    async with connect(linked_ws) as client:
        err = error_of(
            await client.call_tool(
                "propose_upload",
                {"local_path": "a\x1b[2Jb", "remote_parent": "", "reason": "r"},
            )
        )
        assert "\x1b" not in err["message"] and "\\x1b" in err["message"]
        err = error_of(
            await client.call_tool(
                "propose_upload", {"local_path": "link_in", "remote_parent": "", "reason": "r"}
            )
        )
        assert "symbolic link" in err["message"] and "real path" in err["message"]
        err = error_of(
            await client.call_tool(
                "propose_upload",
                {"local_path": "hello.txt", "remote_parent": "", "reason": "r", "root": "nope"},
            )
        )
        assert err["code"] == "root_unknown" and "proj" in err["message"]


async def test_reserved_temp_prefix_in_any_remote_segment_is_refused(linked_ws: Workspace) -> None:
    calls = [
        ("propose_upload", {"local_path": "hello.txt", "remote_parent": "docs/.placet-tmp-a"}),
        ("propose_mkdir", {"remote_parent": ".placet-tmp-a/b", "name": "ok"}),
        ("propose_download", {"remote_path": "a/.placet-tmp-b/c.txt", "local_path": "n.txt"}),
        (
            "propose_upload",
            {"local_path": "hello.txt", "remote_parent": "", "name": ".placet-tmp-1"},
        ),
    ]
    async with connect(linked_ws) as client:
        for tool, args in calls:
            err = error_of(await client.call_tool(tool, {**args, "reason": "r"}))
            assert err["code"] == "path_reserved", (tool, err)
            assert "reserved for placet's temporary files" in err["message"]
        assert ok(await client.call_tool("proposal_list", {}))["proposals"] == []


async def test_missing_remote_parents_are_recorded_shown_and_created_on_accept(
    linked_ws: Workspace,
) -> None:
    """An upload or mkdir below folders the drive lacks records them in the evidence
    (outermost first), `placet show` names them, and accepting creates them; one that
    appeared meanwhile is fine (creating a folder that exists is a no-op)."""
    linked_ws.write_config(allow_yes=True)
    hello = (linked_ws.root / "hello.txt").read_bytes()
    async with connect(linked_ws) as client:

        async def propose(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            return ok(await client.call_tool(tool, {**args, "reason": "r"}))["proposal"]

        deep = await propose(
            "propose_upload", {"local_path": "hello.txt", "remote_parent": "a/b/c"}
        )
        mkdir = await propose("propose_mkdir", {"remote_parent": "x/y", "name": "z"})
        there = await propose(
            "propose_upload", {"local_path": "hello.txt", "remote_parent": "shared"}
        )
        top = await propose("propose_upload", {"local_path": "docs/guide.md", "remote_parent": ""})
    assert deep["evidence"]["missing_parents"] == ["a", "a/b", "a/b/c"]
    assert mkdir["evidence"]["missing_parents"] == ["x", "x/y"]
    assert there["evidence"]["missing_parents"] == []  # checked: nothing to create
    assert "missing_parents" not in top["evidence"]  # the drive's top: nothing to check
    assert not (linked_ws.drive / "a").exists() and not (linked_ws.drive / "x").exists()  # inert

    shown = {p["id"]: linked_ws.placet("show", str(p["id"])) for p in (deep, mkdir, there, top)}
    assert all(r.returncode == 0 for r in shown.values()), shown
    assert "creates missing folders: a, a/b, a/b/c\n" in shown[deep["id"]].stdout
    assert "creates missing folders: x, x/y\n" in shown[mkdir["id"]].stdout
    for pid in (there["id"], top["id"]):
        assert "creates missing folders" not in shown[pid].stdout
    assert not any("not checked when proposed" in r.stdout for r in shown.values())

    (linked_ws.drive / "x").mkdir()  # a missing parent appears before the owner accepts
    for p in (deep, mkdir, there, top):
        r = linked_ws.placet("accept", str(p["id"]), "--yes")
        assert r.returncode == 0, (p["id"], r.stdout, r.stderr)
    assert (linked_ws.drive / "a" / "b" / "c" / "hello.txt").read_bytes() == hello
    assert (linked_ws.drive / "x" / "y" / "z").is_dir()
    assert (linked_ws.drive / "shared" / "hello.txt").read_bytes() == hello
    assert (linked_ws.drive / "guide.md").read_bytes() == (
        linked_ws.root / "docs" / "guide.md"
    ).read_bytes()
    async with connect(linked_ws) as client:
        for p in (deep, mkdir, there, top):
            got = ok(await client.call_tool("proposal_get", {"id": p["id"]}))["proposal"]
            assert got["status"] == "succeeded", got


async def test_a_remote_parent_below_a_file_is_refused_naming_the_file(
    linked_ws: Workspace,
) -> None:
    before = snapshot(linked_ws.drive)
    async with connect(linked_ws) as client:
        for tool, args in (
            ("propose_upload", {"local_path": "hello.txt", "remote_parent": "remote.txt/sub"}),
            ("propose_mkdir", {"remote_parent": "remote.txt/sub/deeper", "name": "n"}),
            ("propose_mkdir", {"remote_parent": "remote.txt", "name": "n"}),
        ):
            err = error_of(await client.call_tool(tool, {**args, "reason": "r"}))
            assert err["code"] == "not_a_directory", (tool, err)
            assert "'remote.txt'" in err["message"] and "is a file" in err["message"]
            assert err["details"]["file"] == "remote.txt"
        assert ok(await client.call_tool("proposal_list", {}))["proposals"] == []
    assert snapshot(linked_ws.drive) == before
