"""Real MCP clients no one here wrote, against a real `placet serve`.

- The official MCP Inspector CLI (`@modelcontextprotocol/inspector`, which validates a
  tool's structured content against its output schema, error results included) lists the
  tools with its schema portability check, makes proposals (its `roots/list` answer is
  empty, so the owner's roots apply), and shows each tool family's domain error as
  placet's own `code: message`, not the client's schema-validation message.
- Claude Code (`@anthropic-ai/claude-code`) accepts the server printed by
  `placet config claude` through `claude mcp add-json` and reports it connected in
  `claude mcp list` (no login is needed for either).

The clients are pinned in `clients/package.json` and its lockfile and installed with
`npm ci --prefix clients` (`.ci/run` does it). When they are missing or not the pinned
versions, the tests fail when the `CI` environment variable is set and are skipped
otherwise (the Makefile's rule for faketime). Every client runs with a temporary `HOME`,
so no user configuration is read or written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from placet.server.tools import all_tools
from tests.support.mcp import PLACET, Workspace, make_workspace


def _repo_root() -> Path:
    here = Path(__file__).resolve().parent
    for d in (here, *here.parents):
        if (d / "pyproject.toml").is_file():
            return d
    raise RuntimeError(f"no pyproject.toml above {here}")


CLIENTS = _repo_root() / "clients"
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
INSTALL_HINT = "install the pinned clients with `npm ci --prefix clients` (needs Node.js, npm)"
TOOL_IS_ERROR_EXIT = 5
"""The Inspector CLI's exit status when the tool answered `isError: true`."""
SCHEMA_MESSAGE = "must have required property"
"""What the Inspector prints (exit 1) when a result does not match the output schema."""
TIMEOUT_S = 60
PARALLEL = 3
"""Inspector runs at once: each starts a `placet serve` (about 1.5 s of CPU)."""

# All the Inspector runs happen in the first test's setup (about 16 s of CPU in all). On a
# machine busy with other work that setup can take longer than the suite's 120 s per test
# (104 s at a load of 19 on 2 cores); each client run keeps its own 60 s timeout.
pytestmark = pytest.mark.timeout(300)


def unavailable(reason: str) -> NoReturn:
    """Fail when CI is set (the real clients are part of the suite there), else skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the real-client tests must run", pytrace=False)
    pytest.skip(reason)


def client_bin(package: str, command: str) -> Path:
    """`clients/node_modules/.bin/<command>`, checked to be the version pinned for
    `package` in `clients/package.json` (fails or skips through `unavailable`)."""
    if shutil.which("node") is None:
        unavailable(f"node is not on PATH; the real MCP clients need Node.js ({INSTALL_HINT})")
    pinned = json.loads((CLIENTS / "package.json").read_text())["dependencies"][package]
    manifest = CLIENTS / "node_modules" / package / "package.json"
    binary = CLIENTS / "node_modules" / ".bin" / command
    if not manifest.is_file() or not binary.exists():
        unavailable(f"{package} is not installed in {CLIENTS}; {INSTALL_HINT}")
    installed = json.loads(manifest.read_text())["version"]
    if installed != pinned:
        unavailable(f"{package} {installed} is installed, {pinned} is pinned; {INSTALL_HINT}")
    return binary


@pytest.fixture
def client_home(tmp_path: Path) -> Path:
    """An empty `HOME` for the client process (its catalogs and settings land here)."""
    home = tmp_path / "client-home"
    home.mkdir()
    return home


def client_env(home: Path) -> dict[str, str]:
    """A minimal environment for a client: PATH (node, rclone), the temporary HOME, and
    Claude Code's switches that keep it off the network (no updater, no telemetry)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


# ---- MCP Inspector CLI --------------------------------------------------------------------


@dataclass
class InspectorRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        """The `result` of the `--format json` document on stdout."""
        assert self.stdout.strip(), f"no result (exit {self.returncode}): {self.stderr}"
        doc: dict[str, Any] = json.loads(self.stdout)
        return doc["result"]  # type: ignore[no-any-return]


def call_args(tool: str, args: dict[str, Any]) -> list[str]:
    return ["--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(args)]


# One domain error per tool family, each from a tool that declares an output schema: the
# Inspector validated such error results against it and printed its own message before.
# (tool, arguments, the error code, a piece of placet's message)
FAMILY_ERRORS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "drive": ("drive_read", {"path": "missing.txt"}, "not_found", "'missing.txt'"),
    "propose": (
        "propose_upload",
        {"local_path": "nope.txt", "remote_parent": "", "reason": "t"},
        "not_found",
        "'nope.txt' does not exist",
    ),
    "proposal": ("proposal_get", {"id": 999}, "not_found", "no proposal 999"),
    "sync": (
        "sync_plan",
        {"local_path": "", "remote_path": "../up"},
        "path_invalid",
        "refusing path '../up'",
    ),
    "argument": (
        "drive_list",
        {"path": "", "bogus": 1},
        "invalid_argument",
        "bogus: unknown argument",
    ),
}

INSPECTOR_RUNS: dict[str, list[str]] = {
    "list": ["--method", "tools/list", "--strict"],
    "mkdir": call_args("propose_mkdir", {"remote_parent": "", "name": "new", "reason": "t"}),
    "upload": call_args(
        "propose_upload", {"local_path": "hello.txt", "remote_parent": "shared", "reason": "t"}
    ),
    **{family: call_args(tool, args) for family, (tool, args, _, _) in FAMILY_ERRORS.items()},
}


@pytest.fixture(scope="module")
def inspector_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    base = tmp_path_factory.mktemp("inspector")
    return make_workspace(base, base / "placet-home")


@pytest.fixture(scope="module")
def inspected(
    inspector_ws: Workspace, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, InspectorRun]:
    """Every run of `INSPECTOR_RUNS`, `PARALLEL` at a time (each is its own Inspector
    process and its own `placet serve` on one workspace; one at a time they take 8 x the
    server's start): `inspector --cli --format json ARGS -- placet serve --root <root>`,
    the workspace's PLACET_HOME and drive passed to the server with `-e`."""
    binary = client_bin(INSPECTOR_PACKAGE, "inspector")
    ws = inspector_ws
    home = tmp_path_factory.mktemp("client-home")
    env_args = [a for k, v in ws.env.items() for a in ("-e", f"{k}={v}")]
    head = [str(binary), "--cli", "--format", "json", *env_args, "--cwd", str(ws.base)]
    head += ["--connect-timeout", str(TIMEOUT_S * 1000)]  # 15 s by default: a loaded machine
    tail = ["--", PLACET, "serve", "--root", str(ws.root)]

    def run(args: list[str]) -> InspectorRun:
        p = subprocess.run(
            [*head, *args, *tail],
            env=client_env(home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        return InspectorRun(p.returncode, p.stdout, p.stderr)

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return dict(zip(INSPECTOR_RUNS, pool.map(run, INSPECTOR_RUNS.values()), strict=True))


def test_inspector_lists_every_tool_with_portable_schemas(
    inspected: dict[str, InspectorRun],
) -> None:
    run = inspected["list"]
    # --strict exits 6 and explains on stderr when a tool schema has a portability error,
    # and lists every finding, warnings too (a `type` array, an untyped schema), here.
    assert run.returncode == 0, run.stderr
    assert "schemaFindings" not in json.loads(run.stdout), run.stderr
    tools = run.result["tools"]
    assert [t["name"] for t in tools] == [t.name for t in all_tools()]
    assert all(t.get("outputSchema") for t in tools)


def test_inspector_makes_proposals_from_the_owners_roots(
    inspected: dict[str, InspectorRun], inspector_ws: Workspace
) -> None:
    """propose_mkdir and propose_upload succeed and their results pass the Inspector's
    output-schema check; the upload reads a local file although the Inspector answers
    `roots/list` with no roots (docs/decisions/0013-scope-and-roots.md)."""
    ws = inspector_ws
    made = []
    for kind in ("mkdir", "upload"):
        run = inspected[kind]
        assert run.returncode == 0, run.stderr
        res = run.result
        assert res.get("isError") is not True, res
        sc = res["structuredContent"]
        assert sc["created"] is True and sc["proposal"]["kind"] == kind
        assert sc["proposal"]["status"] == "pending"
        assert sc["proposal"]["client_name"] == "inspector-cli"
        assert res["content"][0]["text"].startswith(f"proposed {kind} ")
        made.append(sc["proposal"]["id"])
    listed = ws.placet("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(p["id"] for p in json.loads(listed.stdout)) == sorted(made)
    assert not (ws.drive / "new").exists()  # a proposal is inert until accepted


@pytest.mark.parametrize("family", list(FAMILY_ERRORS))
def test_inspector_shows_placets_own_error(inspected: dict[str, InspectorRun], family: str) -> None:
    _, _, code, says = FAMILY_ERRORS[family]
    run = inspected[family]
    assert SCHEMA_MESSAGE not in run.stdout + run.stderr, run.stderr
    assert run.returncode == TOOL_IS_ERROR_EXIT, (run.returncode, run.stderr)
    assert json.loads(run.stderr)["error"]["code"] == "tool_is_error"
    res = run.result
    assert res["isError"] is True and "structuredContent" not in res
    line, body = (c["text"] for c in res["content"])
    err = json.loads(body)
    assert err["code"] == code and says in err["message"], err
    assert line == f"{code}: {err['message']}"


# ---- Claude Code --------------------------------------------------------------------------


def claude(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = client_bin(CLAUDE_PACKAGE, "claude")
    return subprocess.run(
        [str(binary), *args],
        env=client_env(home),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def claude_files(ws: Workspace, root: Path) -> dict[str, Any]:
    """What `placet config claude --root ROOT --json` prints: each file's path -> content."""
    p = ws.placet("config", "claude", "--root", str(root), "--json")
    assert p.returncode == 0, p.stderr
    return {f["path"]: f["content"] for f in json.loads(p.stdout)["files"]}


def server_lines(listing: str, names: set[str]) -> dict[str, str]:
    """`claude mcp list` output: server name -> its line (`name: command - status`)."""
    lines = (line.split(":", 1) for line in listing.splitlines() if ":" in line)
    return {name: f"{name}:{rest}" for name, rest in lines if name in names}


def test_claude_code_connects_with_the_printed_config(ws: Workspace, client_home: Path) -> None:
    """`claude mcp add-json` accepts the printed server and `claude mcp list` reports it
    connected; a copy naming a root that does not exist (`placet serve` refuses it)
    reports a failure, so the status line shows a real connection attempt. The printed
    `.mcp.json`, put in a project, is read by Claude Code as the same server (a project's
    servers wait for the owner's approval in an interactive `claude`)."""
    files = claude_files(ws, ws.root)
    server = files[".mcp.json"]["mcpServers"]["placet"]
    gone = str(ws.base / "gone")
    control = {**server, "args": [gone if a == str(ws.root) else a for a in server["args"]]}
    assert control != server
    servers = {"placet": server, "placet-gone": control}
    for name, entry in servers.items():
        added = claude(client_home, ws.base, "mcp", "add-json", name, json.dumps(entry))
        assert added.returncode == 0, added.stdout + added.stderr
    listed = claude(client_home, ws.base, "mcp", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    status = server_lines(listed.stdout, set(servers))
    assert set(status) == set(servers), listed.stdout
    assert f"{PLACET} serve --root {ws.root}" in status["placet"]
    assert status["placet"].endswith("Connected") and "Failed" not in status["placet"]
    assert "Failed to connect" in status["placet-gone"], status

    project = ws.base / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps(files[".mcp.json"], indent=2))
    listed = claude(client_home, project, "mcp", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    line = server_lines(listed.stdout, {"placet"}).get("placet", listed.stdout)
    assert f"{PLACET} serve --root {ws.root} - " in line and "Pending approval" in line
