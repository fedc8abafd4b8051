"""`placet serve` as a process: refusals before serving, clean exits, client roots,
import hygiene; and `placet config` for each host.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ListRootsResult, Root

from placet.server.tools import all_tools
from tests.support.mcp import (
    CLIENT_INFO,
    PLACET,
    Workspace,
    connect,
    error_of,
    ok,
    rclone_children,
)

# ---- refusals before the first MCP byte -------------------------------------------------


@pytest.mark.parametrize(
    ("roots", "reason"),
    [
        ([], "no --root given"),
        (["/"], "filesystem root"),
        (["HOME"], "home directory"),
        (["HOMEPARENT"], "home directory or contains it"),
        (["DATADIR"], "data directory"),
        (["MISSING"], "cannot be opened"),
    ],
)
def test_serve_refuses_bad_roots_with_a_reason(
    ws: Workspace, tmp_path: Path, roots: list[str], reason: str
) -> None:
    home = tmp_path / "userhome"
    (home / "work").mkdir(parents=True)
    ws.home.mkdir(parents=True, exist_ok=True)
    subst = {
        "HOME": str(home),
        "HOMEPARENT": str(tmp_path),
        "DATADIR": str(ws.home),
        "MISSING": str(tmp_path / "nope"),
    }
    args = [PLACET, "serve"]
    for r in roots:
        args += ["--root", subst.get(r, r)]
    env = {**os.environ, **ws.env, "HOME": str(home)}
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, input="")
    assert r.returncode == 2, r
    assert r.stdout == ""  # nothing on the MCP channel
    assert reason in r.stderr and "root" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1  # one line, no traceback


def test_serve_refuses_a_multiline_label(ws: Workspace) -> None:
    r = ws.placet("serve", "--root", str(ws.root), "--label", "a\nb", input="")
    assert r.returncode == 2 and "label" in r.stderr and r.stdout == ""


# ---- clean exits ------------------------------------------------------------------------


def _start(ws: Workspace) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PLACET, "serve", "--root", str(ws.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **ws.env},
    )


def _rpc(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> dict[str, Any] | None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()
    if "id" not in msg:
        return None
    while True:
        line = proc.stdout.readline()
        assert line, "server closed stdout"
        reply = json.loads(line)
        if reply.get("id") == msg["id"]:
            return dict(reply)


def _handshake_and_list_drive(proc: subprocess.Popen[bytes]) -> None:
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    assert _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "drive_list", "arguments": {"path": ""}}
    reply = _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    assert reply is not None and reply["result"]["isError"] is False  # rclone is running now


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); it is gone for our purpose
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


@pytest.mark.parametrize("how", ["stdin-close", "sigterm", "sigint"])
def test_exits_cleanly_and_stops_its_rclone_child(ws: Workspace, how: str) -> None:
    proc = _start(ws)
    try:
        _handshake_and_list_drive(proc)
        children = rclone_children(proc.pid)
        assert children, "expected an rclone rcd child after a drive call"
        assert proc.stdin is not None
        if how == "stdin-close":
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        rc = proc.wait(timeout=20)
        assert rc == 0
        deadline = time.monotonic() + 10
        while not all(_gone(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(c) for c in children)
        assert proc.stdout is not None and proc.stderr is not None
        rest = proc.stdout.read()
        assert all(json.loads(line) for line in rest.splitlines())  # only frames, if any
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- MCP client roots only narrow ------------------------------------------------------


def _roots_client(ws: Workspace, paths: list[Path]) -> Client:
    async def list_roots(ctx: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=p.as_uri(), name=p.name) for p in paths])

    # Roots are answered only on handshake-era connections (deprecated as of 2026-07-28).
    return Client(
        ws.params(), client_info=CLIENT_INFO, mode="legacy", list_roots_callback=list_roots
    )


@pytest.mark.anyio
async def test_client_roots_narrow_the_owner_roots(ws: Workspace) -> None:
    docs = ws.root / "docs"
    async with _roots_client(ws, [docs, ws.outside]) as client:
        roots = ok(await client.call_tool("roots_list", {}))
        assert roots["client_roots"] == [str(docs), str(ws.outside)]
        assert roots["roots"][0]["usable"] == [str(docs)]  # proj-evil widens nothing
        ok(
            await client.call_tool(
                "propose_upload",
                {"local_path": "docs/guide.md", "remote_parent": "", "reason": "inside both"},
            )
        )
        err = error_of(
            await client.call_tool(
                "propose_upload",
                {"local_path": "hello.txt", "remote_parent": "", "reason": "outside client root"},
            )
        )
        assert err["code"] == "path_outside_root" and "MCP client" in err["message"]
        err = error_of(
            await client.call_tool(
                "propose_upload",
                {
                    "local_path": str(ws.outside / "secret.txt"),
                    "remote_parent": "",
                    "reason": "client root outside --root",
                },
            )
        )
        assert err["code"] == "path_outside_root"


@pytest.mark.anyio
async def test_client_root_above_the_owner_root_keeps_it_whole(ws: Workspace) -> None:
    async with _roots_client(ws, [ws.base]) as client:
        roots = ok(await client.call_tool("roots_list", {}))
        assert roots["roots"][0]["usable"] == [str(ws.root)]
        ok(
            await client.call_tool(
                "propose_upload", {"local_path": "hello.txt", "remote_parent": "", "reason": "r"}
            )
        )


@pytest.mark.anyio
async def test_without_client_roots_the_owner_roots_apply(ws: Workspace) -> None:
    async with connect(ws) as client:
        roots = ok(await client.call_tool("roots_list", {}))
        assert roots["client_roots"] is None and roots["roots"][0]["usable"] is None
        assert roots["roots"][0] | {"usable": None} == {
            "name": "proj",
            "path": str(ws.root),
            "default": True,
            "downloads": "new-only",
            "usable": None,
        }


@pytest.mark.anyio
async def test_an_empty_client_roots_list_leaves_the_owner_roots(ws: Workspace) -> None:
    """The MCP Inspector declares roots and answers with none: the owner's roots apply."""
    async with _roots_client(ws, []) as client:
        roots = ok(await client.call_tool("roots_list", {}))
        assert roots["client_roots"] is None and roots["roots"][0]["usable"] is None
        ok(
            await client.call_tool(
                "propose_upload", {"local_path": "hello.txt", "remote_parent": "", "reason": "r"}
            )
        )


@pytest.mark.anyio
async def test_client_roots_none_usable_give_no_local_access(ws: Workspace) -> None:
    async def list_roots(ctx: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file://fileserver/share", name="remote host")])

    async with Client(
        ws.params(), client_info=CLIENT_INFO, mode="legacy", list_roots_callback=list_roots
    ) as client:
        err = error_of(
            await client.call_tool(
                "propose_upload", {"local_path": "hello.txt", "remote_parent": "", "reason": "r"}
            )
        )
    assert err["code"] == "path_outside_root"


@pytest.mark.anyio
async def test_drive_flag_overrides_the_configured_drive(ws: Workspace, tmp_path: Path) -> None:
    other = tmp_path / "other-drive"
    other.mkdir()
    (other / "only-here.txt").write_text("x")
    async with connect(ws, "--drive", str(other)) as client:
        assert ok(await client.call_tool("roots_list", {}))["drive"] == str(other)
        listing = ok(await client.call_tool("drive_list", {}))
        assert [e["name"] for e in listing["entries"]] == ["only-here.txt"]


# ---- import hygiene ---------------------------------------------------------------------


def test_proposing_core_does_not_import_mcp() -> None:
    code = (
        "import sys, placet.proposals.making, placet.paths.local, placet.local.atomic;"
        "import placet.store;"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_importing_the_cli_does_not_start_the_sdk() -> None:
    code = "import sys, placet.cli; placet.cli.build_parser(); print('mcp' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


# ---- placet config ----------------------------------------------------------------------

TOOL_NAMES = [t.name for t in all_tools()]


def _config(ws: Workspace, host: str, *extra: str) -> dict[str, Any]:
    r = ws.placet(
        "config", host, "--root", f"work={ws.root}", "--label", "laptop", "--json", *extra
    )
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_config_uses_the_absolute_placet_and_checked_roots(ws: Workspace) -> None:
    doc = _config(ws, "generic")
    assert doc["command"] == PLACET and Path(doc["command"]).is_absolute()
    assert doc["args"] == ["serve", "--root", f"work={ws.root}", "--label", "laptop"]
    assert doc["env"]["PLACET_HOME"] == str(ws.home)
    assert doc["env"]["PLACET_DRIVE"] == str(ws.drive)
    r = ws.placet("config", "claude", "--root", "/")
    assert r.returncode == 2 and "filesystem root" in r.stderr and r.stdout == ""
    r = ws.placet("config", "codex", "--root", str(ws.root), "--drive", ":s3,secret_access_key=x:b")
    assert r.returncode == 2 and "secret" in r.stderr and r.stdout == ""


def test_config_claude_has_server_and_per_tool_allowlist(ws: Workspace) -> None:
    files = {f["path"]: f["content"] for f in _config(ws, "claude")["files"]}
    server = files[".mcp.json"]["mcpServers"]["placet"]
    assert server["type"] == "stdio" and server["command"] == PLACET
    allow = files[".claude/settings.json"]["permissions"]["allow"]
    assert allow == [f"mcp__placet__{t}" for t in TOOL_NAMES]
    assert "mcp__placet__propose_upload" in allow


def test_config_codex_toml_parses_and_preapproves_each_tool(ws: Workspace) -> None:
    (f,) = _config(ws, "codex")["files"]
    conf = tomllib.loads(f["content"])["mcp_servers"]["placet"]
    assert conf["command"] == PLACET and conf["args"][0] == "serve"
    assert conf["enabled_tools"] == TOOL_NAMES
    assert conf["env"]["PLACET_HOME"] == str(ws.home)
    assert {t: v["approval_mode"] for t, v in conf["tools"].items()} == dict.fromkeys(
        TOOL_NAMES, "approve"
    )


def test_config_vscode_shape(ws: Workspace) -> None:
    (f,) = _config(ws, "vscode")["files"]
    assert f["path"] == ".vscode/mcp.json"
    server = f["content"]["servers"]["placet"]
    assert server["type"] == "stdio" and server["args"][:2] == ["serve", "--root"]


def test_config_human_output_is_pasteable_and_writes_nothing(ws: Workspace, tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    env = {**os.environ, **ws.env}
    r = subprocess.run(
        [PLACET, "config", "claude", "--root", str(ws.root)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    blocks = [b for b in r.stdout.split("\n\n") if b.strip()]
    assert len(blocks) == 2
    for block in blocks:
        body = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
        json.loads(body)
    assert list(cwd.iterdir()) == []  # nothing written where it ran
