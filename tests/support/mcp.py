"""Fixtures for talking to a real `placet serve` subprocess with the official MCP client.

Every server here is the installed `placet` entry point started as a child process over
stdio, with its environment passed explicitly (`StdioServerParameters.env` is merged over
a minimal safe env, not the test's `os.environ`): `PLACET_HOME` (the test's data dir)
and `PLACET_DRIVE` (a local folder, so the remote is a real rclone `local` backend).

`snapshot(path)` records a folder tree byte for byte (type, mode bits, size, SHA-256,
symlink target) so a test can show a tool left the drive and the local root unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, Implementation

PLACET = str(Path(sys.executable).parent / "placet")
CLIENT_INFO = Implementation(name="placet-tests", version="9.9")


@dataclass
class Workspace:
    """A data dir, one local root (`proj`), a sibling `proj-evil`, and a drive folder."""

    base: Path
    home: Path
    root: Path
    drive: Path
    outside: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        # The store backend `store_backend` chose (PostgreSQL: its URL and password).
        backend = {k: os.environ[k] for k in ("PLACET_DB", "PGPASSWORD") if os.environ.get(k)}
        return {
            "PLACET_HOME": str(self.home),
            "PLACET_DRIVE": str(self.drive),
            **backend,
            **self.extra_env,
        }

    def params(self, *args: str, roots: list[str] | None = None) -> StdioServerParameters:
        root_args: list[str] = []
        for r in roots if roots is not None else [str(self.root)]:
            root_args += ["--root", r]
        return StdioServerParameters(
            command=PLACET, args=["serve", *root_args, *args], env=self.env, cwd=str(self.base)
        )

    def write_config(self, **settings: Any) -> None:
        """Write `config.toml` in the data dir (simple scalars and strings only)."""
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
        (self.home / "config.toml").write_text("\n".join(lines) + "\n")

    def placet(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the `placet` CLI with this workspace's environment."""
        env = {**os.environ, **self.env}
        return subprocess.run(
            [PLACET, *args], env=env, input=input, capture_output=True, text=True, timeout=60
        )


def make_workspace(tmp_path: Path, placet_home: Path) -> Workspace:
    """A fresh workspace under `tmp_path` using the test's `PLACET_HOME` (the `ws` fixture
    of tests/server/conftest.py)."""
    base = tmp_path / "ws"
    root = base / "proj"
    drive = base / "drive"
    outside = base / "proj-evil"
    for d in (root, drive, outside):
        d.mkdir(parents=True)
    (root / "hello.txt").write_text("hello from the agent\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# guide\n")
    (outside / "secret.txt").write_text("not yours\n")
    (drive / "remote.txt").write_text("remote text\n")
    (drive / "shared").mkdir()
    return Workspace(base=base, home=placet_home, root=root, drive=drive, outside=outside)


@asynccontextmanager
async def connect(ws: Workspace, *args: str, **kw: Any) -> AsyncIterator[Client]:
    """A connected `mcp.Client` on a fresh `placet serve` child."""
    async with Client(ws.params(*args), client_info=CLIENT_INFO, **kw) as client:
        yield client


def snapshot(path: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under `path` (relative name -> type, mode, size, sha256 / link target)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = str(p.relative_to(path))
            st = p.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            else:
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
                out[rel] = ("file", mode, st.st_size, st.st_mtime_ns, digest)
    return out


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def error_payload(result: CallToolResult) -> dict[str, Any]:
    """The `{code, message, retryable, details}` of an error result: its second text
    block (error results carry no structured content; placet.server.framework)."""
    assert result.is_error, f"expected an error result, got {result.structured_content}"
    assert result.structured_content is None, result.structured_content
    assert len(result.content) == 2 and all(c.type == "text" for c in result.content)
    payload: dict[str, Any] = json.loads(result.content[1].text)  # type: ignore[union-attr]
    return payload


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The `{code, message, retryable, details}` of a domain-error result (asserts it is
    one: a one-line text summary, then the JSON)."""
    sc = error_payload(result)
    assert set(sc) == {"code", "message", "retryable", "details"}, sc
    line = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in line and line.startswith(f"{sc['code']}: "), line
    return sc


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful result (asserts it is one)."""
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    return result.structured_content


def rclone_children(pid: int) -> list[int]:
    """Pids of the live processes whose parent is `pid` (any of its threads), from /proc."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat_line.rsplit(") ", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


async def proposal_ops(client: Client, pid: int) -> list[dict[str, Any]]:
    """Every op of proposal `pid` through `proposal_ops`, page after page: each op's
    dict as stored, with `outcome` and `detail` of its latest result (None before)."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        args: dict[str, Any] = {"id": pid} if cursor is None else {"id": pid, "cursor": cursor}
        page = ok(await client.call_tool("proposal_ops", args))
        for v in page["ops"]:
            r = v["result"]
            out.append({**v["op"], "outcome": r and r["outcome"], "detail": r and r["detail"]})
        cursor = page["next_cursor"]
        if cursor is None:
            return out


async def plan_item_pages(client: Client, plan_id: int, **args: Any) -> list[dict[str, Any]]:
    """Every page of `sync_plan_ops(plan_id, **args)`, following next_cursor with the same
    arguments."""
    args = {"plan_id": plan_id, **args}
    pages = [ok(await client.call_tool("sync_plan_ops", args))]
    while cursor := pages[-1]["next_cursor"]:
        pages.append(ok(await client.call_tool("sync_plan_ops", {**args, "cursor": cursor})))
    return pages


async def plan_items(client: Client, plan_id: int, **args: Any) -> list[dict[str, Any]]:
    """Every item of `sync_plan_ops(plan_id, **args)` (all its pages)."""
    return [i for p in await plan_item_pages(client, plan_id, **args) for i in p["items"]]


class Raw:
    """A `placet serve` subprocess spoken to line by line."""

    def __init__(self, ws: Workspace) -> None:
        self.proc = subprocess.Popen(
            [PLACET, "serve", "--root", str(ws.root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **ws.env},
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.pending = b""

    def send(self, line: str | bytes) -> None:
        self.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.stdin.flush()

    def recv(self, timeout: float = 60) -> dict[str, Any]:
        """The next answer line (read unbuffered, so `select` sees what is pending)."""
        fd = self.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"no answer within {timeout} s"
            chunk = os.read(fd, 1 << 16)
            assert chunk, "server closed stdout"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return dict(json.loads(line))

    def init(self, client_info: str = '{"name": "raw", "version": "0"}') -> dict[str, Any]:
        self.send(
            '{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion":'
            f' "2025-11-25", "capabilities": {{}}, "clientInfo": {client_info}}}}}'
        )
        reply = self.recv()
        self.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        return reply

    def call(self, rid: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": tool, "arguments": arguments}
        self.send(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        )
        return self.recv()

    def ping(self, rid: int) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}))
        assert self.recv() == {"jsonrpc": "2.0", "id": rid, "result": {}}

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.stdin.close()
        self.stdout.close()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
