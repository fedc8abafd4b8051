"""`placet config claude|codex|vscode|generic --root DIR`: print a host configuration.

The owner pastes what this prints into the host's own file; placet never writes a host's
files (docs/design.md section 1). The command is the absolute path of `placet`, the roots
are checked as `placet serve` will check them, a drive spec with an inline secret is
refused, and `PLACET_HOME`/`PLACET_DB`/`PLACET_DRIVE` are passed on when set.

Where the host has a per-tool allowlist (Claude Code `permissions.allow`, Codex
`enabled_tools`), every tool is listed by name, never a wildcard, so a tool added later
is not pre-approved (docs/decisions/0012-mcp-tools.md); VS Code's file has none. Each
host's format is in the function that prints it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from placet.config import load_settings
from placet.drive.spec import validate_spec
from placet.errors import EXIT_OK, ConfigError, UsageError
from placet.paths.roots import Root, parse_roots

HOSTS = ("claude", "codex", "vscode", "generic")
SERVER_NAME = "placet"
PASSED_ENV = ("PLACET_HOME", "PLACET_DB", "PLACET_DRIVE")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `config` to the `placet` parser."""
    p = subparsers.add_parser(
        "config",
        help="print an agent host's configuration for placet (writes nothing)",
        description="Print a ready MCP configuration for an agent host. Nothing is written.",
    )
    p.add_argument("host", choices=HOSTS, help="the agent host to configure: %(choices)s")
    p.add_argument(
        "--root", action="append", default=[], metavar="[NAME=]DIR", help="as for placet serve"
    )
    p.add_argument("--label", metavar="NAME", help="as for placet serve")
    p.add_argument("--drive", metavar="SPEC", help="as for placet serve")
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object: command, args, env and each file's content",
    )
    p.set_defaults(func=cmd_config)


def placet_executable() -> Path:
    """The absolute path of the running `placet` command.

    Tries, in order: `sys.argv[0]` when it is the `placet` script; `placet` beside the
    interpreter (the venv's bin); `placet` on PATH.

    Raises:
        ConfigError: none of them exists.
    """
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    candidates: list[Path] = []
    if argv0 is not None and argv0.name == "placet":
        found = shutil.which(str(argv0)) if argv0.parent == Path() else str(argv0)
        if found:
            candidates.append(Path(found))
    candidates.append(Path(sys.executable).parent / "placet")
    on_path = shutil.which("placet")
    if on_path:
        candidates.append(Path(on_path))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c.absolute()
    raise ConfigError(
        "cannot find the installed `placet` command (not beside the Python interpreter "
        f"{sys.executable} nor on PATH); reinstall placet (pip install placet)"
    )


def _root_arg(root: Root) -> str:
    return str(root.path) if root.name == root.path.name else f"{root.name}={root.path}"


def server_args(roots: list[Root], label: str | None, drive: str | None) -> list[str]:
    args = ["serve"]
    for r in roots:
        args += ["--root", _root_arg(r)]
    if drive:
        args += ["--drive", drive]
    if label:
        args += ["--label", label]
    return args


def tool_names() -> list[str]:
    from placet.server.tools import all_tools  # imports mcp: only this command needs it

    return [t.name for t in all_tools()]


def _toml_str(s: str) -> str:
    # A JSON string without ASCII-escaping is a valid TOML basic string (same escapes).
    return json.dumps(s, ensure_ascii=False)


def _toml_array(items: list[str]) -> str:
    return "[" + ", ".join(_toml_str(i) for i in items) + "]"


def codex_toml(command: str, args: list[str], env: dict[str, str], tools: list[str]) -> str:
    lines = [
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {_toml_str(command)}",
        f"args = {_toml_array(args)}",
        f"enabled_tools = {_toml_array(tools)}",
        "tool_timeout_sec = 60",
    ]
    if env:
        lines += ["", f"[mcp_servers.{SERVER_NAME}.env]"]
        lines += [f"{k} = {_toml_str(v)}" for k, v in env.items()]
    for t in tools:
        lines += ["", f"[mcp_servers.{SERVER_NAME}.tools.{t}]", 'approval_mode = "approve"']
    return "\n".join(lines) + "\n"


def host_files(
    host: str, command: str, args: list[str], env: dict[str, str], tools: list[str]
) -> list[dict[str, Any]]:
    """What to put in which of the host's files: `[{path, format, note, content}]`."""
    stdio: dict[str, Any] = {"type": "stdio", "command": command, "args": args}
    if env:
        stdio["env"] = env
    if host == "claude":
        return [
            {
                "path": ".mcp.json",
                "format": "json",
                "note": "Claude Code: the project's .mcp.json (merge into mcpServers)",
                "content": {"mcpServers": {SERVER_NAME: stdio}},
            },
            {
                "path": ".claude/settings.json",
                "format": "json",
                "note": "Claude Code: allow placet's tools without a prompt; they only read "
                "or queue inert proposals, and you accept each write in `placet review` "
                "(merge into permissions.allow; ~/.claude/settings.json for every project)",
                "content": {"permissions": {"allow": [f"mcp__{SERVER_NAME}__{t}" for t in tools]}},
            },
        ]
    if host == "codex":
        return [
            {
                "path": "~/.codex/config.toml",
                "format": "toml",
                "note": "Codex: ~/.codex/config.toml (or a trusted project's "
                ".codex/config.toml); placet's tools are inert, so they are pre-approved",
                "content": codex_toml(command, args, env, tools),
            }
        ]
    if host == "vscode":
        return [
            {
                "path": ".vscode/mcp.json",
                "format": "json",
                "note": "VS Code: the workspace's .vscode/mcp.json (merge into servers). "
                "VS Code asks before a tool runs; placet's tools are inert, so 'Always "
                "allow' is safe for them",
                "content": {"servers": {SERVER_NAME: stdio}},
            }
        ]
    return [
        {
            "path": "(your host's MCP configuration)",
            "format": "json",
            "note": "Any MCP host: a stdio server with this command and these arguments "
            f"(tools: {', '.join(tools)})",
            "content": {"mcpServers": {SERVER_NAME: stdio}},
        }
    ]


def _check_utf8(values: list[str]) -> None:
    for v in values:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise UsageError(
                f"a path is not valid UTF-8 ({v.encode('utf-8', 'backslashreplace')!r}); "
                "host configuration files need UTF-8: rename the folder"
            ) from e


def cmd_config(args: argparse.Namespace) -> int:
    """Print the configuration for `args.host`; write nothing."""
    from placet.cli.serve import check_label

    settings = load_settings()
    label = check_label(args.label)
    if not args.root:
        raise UsageError(
            f"no --root given; placet config {args.host} needs at least one --root (a "
            "folder the agent may use): --root DIR or --root NAME=DIR",
            code="root_refused",
        )
    roots = parse_roots(args.root, settings)
    for spec in (args.drive, os.environ.get("PLACET_DRIVE")):
        if spec:
            validate_spec(spec)  # an inline secret would land in the host's config file
    command = str(placet_executable())
    argv = server_args(roots, label, args.drive)
    env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
    if "PLACET_HOME" in env:
        env["PLACET_HOME"] = str(Path(env["PLACET_HOME"]).expanduser().absolute())
    _check_utf8([command, *argv, *env.values()])
    tools = tool_names()
    files = host_files(args.host, command, argv, env, tools)
    if args.json:
        doc = {"host": args.host, "command": command, "args": argv, "env": env, "files": files}
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return EXIT_OK
    for i, f in enumerate(files):
        if i:
            print()
        print(f"# {f['note']}")
        print(f"# file: {f['path']}")
        if f["format"] == "json":
            print(json.dumps(f["content"], indent=2, ensure_ascii=False))
        else:
            print(f["content"], end="")
    return EXIT_OK
