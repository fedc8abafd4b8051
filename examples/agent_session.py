"""A scripted agent: what a coding agent does with placet, over the official MCP client.

It launches `placet serve --root DIR --label demo-agent` as a stdio child (exactly as an
agent host would, with `mcp.Client(StdioServerParameters(...))`), then:

1. lists the tools, the local roots and the drive (`roots_list`, `drive_list`);
2. reads the file it will propose to upload and computes its SHA-256 itself;
3. proposes three changes, each with a one-line reason: an upload of `notes/report.md`
   into the drive folder `shared`, a new drive folder `reports`, and a download of
   `shared/readme-from-drive.txt` into the root (skipped, with a message, when the
   drive has no such file);
4. prints the proposal ids and checks that the evidence placet recorded matches the
   digest it computed;
5. with `--wait`, calls `proposal_wait` (at most 50 s a call, repeated while the
   proposal is pending) and prints each proposal's final status and per-op results.

None of the calls changes anything: the proposals wait for the owner (`placet review`).

    python examples/agent_session.py --root DIR [--placet PATH] [--home DIR] [--wait]

`--home` sets `PLACET_HOME` for the server (default: inherited, as are `PLACET_DB` and
`PLACET_DRIVE`; `StdioServerParameters.env` is merged over a minimal environment, so
these are passed explicitly). Exit status: 0 when every tool call succeeded (with
`--wait`: and every proposal succeeded), 1 on a tool error or a failed proposal, 2 when
the server could not be started or spoken to.

`examples/demo.py` (what `make demo` runs) imports this module.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, Implementation

AGENT_INFO = Implementation(name="placet-demo-agent", version="1.0")
LABEL = "demo-agent"
UPLOAD = "notes/report.md"
UPLOAD_INTO = "shared"
MKDIR = "reports"
DOWNLOAD = "shared/readme-from-drive.txt"
DOWNLOAD_TO = "readme-from-drive.txt"
WAIT_CALL_S = 50
CALL_TIMEOUT_S = WAIT_CALL_S + 20.0
PLACET_ENV = ("PLACET_HOME", "PLACET_DB", "PLACET_DRIVE")

Say = Callable[[str], None]
T = TypeVar("T")


def say_stdout(line: str) -> None:
    print(f"agent: {line}", flush=True)


class ToolFailed(RuntimeError):
    """A tool answered with placet's structured error `{code, message, retryable, details}`."""

    def __init__(self, tool: str, code: str, message: str) -> None:
        super().__init__(f"{tool} failed: {code}: {message}")
        self.tool = tool
        self.code = code
        self.message = message


@dataclass
class Proposed:
    """One proposal the agent made.

    `local_sha256` is what the agent computed itself (upload: the source file; download:
    the drive's reported sha256 of the source, when it offers one); `evidence_sha256` is
    what placet recorded.
    """

    id: int
    kind: str
    target: str
    created: bool
    local_sha256: str | None = None
    evidence_sha256: str | None = None


@dataclass
class Outcome:
    """A proposal's state as the agent learned it: status and `(op kind, outcome)` pairs."""

    id: int
    kind: str
    status: str
    ops: list[tuple[str, str]] = field(default_factory=list)


def sha256_file(path: Path) -> str:
    """Lower-case hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_placet() -> str:
    """The `placet` entry point installed beside this interpreter (absolute path)."""
    return str(Path(sys.executable).absolute().parent / "placet")


def server_params(root: Path, *, placet: str, env: Mapping[str, str]) -> StdioServerParameters:
    """How the agent host launches placet: `placet serve --root ROOT --label demo-agent`."""
    return StdioServerParameters(
        command=placet,
        args=["serve", "--root", str(root), "--label", LABEL],
        env=dict(env),
    )


class AgentSession:
    """The agent's side of one MCP session with `placet serve` (see the module docstring)."""

    def __init__(self, client: Client, root: Path, say: Say = say_stdout) -> None:
        self.client = client
        self.root = root
        self.say = say
        self.top: list[dict[str, Any]] = []
        self.drive_files: set[str] = set()
        self.drive_sha256: dict[str, str] = {}

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        """Call `tool`; its structured result, or ToolFailed for placet's typed error."""
        result: CallToolResult = await self.client.call_tool(
            tool, args, read_timeout_seconds=CALL_TIMEOUT_S
        )
        if result.is_error:
            # placet's error result: the line `code: message`, then the JSON
            # {code, message, retryable, details}; no structured content.
            texts = [c.text for c in result.content if c.type == "text"]
            try:
                err = json.loads(texts[-1])
            except (IndexError, ValueError):
                err = {"code": "error", "message": texts[0] if texts else ""}
            raise ToolFailed(tool, str(err.get("code", "error")), str(err.get("message", "")))
        return result.structured_content or {}

    async def look_around(self) -> None:
        """What any agent does first: the tools, the roots, the drive."""
        info = self.client.server_info
        tools = [t.name for t in (await self.client.list_tools()).tools]
        name = f"{info.name} {info.version}" if info else "a server"
        self.say(f"connected to {name} over stdio; its {len(tools)} tools:")
        self.say(f"  {', '.join(tools[:5])},")
        self.say(f"  {', '.join(tools[5:])}")
        roots = await self.call("roots_list")
        for r in roots["roots"]:
            default = ", default" if r["default"] else ""
            self.say(f"local root {r['name']} = {r['path']} (downloads {r['downloads']}{default})")
        self.say(f"drive: {roots['drive']}")
        await self.list_folder("")
        parent = str(PurePosixPath(DOWNLOAD).parent)
        if any(e["is_dir"] and e["path"] == parent for e in self.top):
            await self.list_folder(parent)

    async def list_folder(self, path: str) -> None:
        listing = await self.call("drive_list", path=path, include_digest=True)
        entries = listing["entries"]
        if path == "":
            self.top = entries
        self.say(f"drive folder {path or '(top)'}: {len(entries)} entries")
        for e in entries:
            if e["is_dir"]:
                self.say(f"  {e['path']}/")
                continue
            self.drive_files.add(e["path"])
            sha = e["digests"].get("sha256")
            if sha:
                self.drive_sha256[e["path"]] = sha
            digest = f" sha256 {sha}" if sha else ""
            self.say(f"  {e['path']}  {e['size']} bytes{digest}")

    def _proposed(self, data: dict[str, Any], target: str) -> Proposed:
        p = data["proposal"]
        verb = "proposed" if data["created"] else "already pending:"
        self.say(f"{verb} #{p['id']} {p['kind']} {target}")
        self.say(f"  reason: {p['reason']}")
        return Proposed(id=p["id"], kind=p["kind"], target=target, created=data["created"])

    async def propose_upload(self) -> Proposed:
        source = self.root / UPLOAD
        # A missing file is placet's to refuse (not_found), like any other bad request.
        mine = sha256_file(source) if source.is_file() else None
        if mine:
            self.say(f"computed sha256 of {UPLOAD}: {mine} ({source.stat().st_size} bytes)")
        data = await self.call(
            "propose_upload",
            local_path=UPLOAD,
            remote_parent=UPLOAD_INTO,
            reason="Publish this week's report next to the shared readme for the team.",
        )
        out = self._proposed(data, f"{UPLOAD} -> drive {UPLOAD_INTO}/{PurePosixPath(UPLOAD).name}")
        out.local_sha256 = mine
        out.evidence_sha256 = data["proposal"]["evidence"]["local"]["sha256"]
        same = "matches" if out.evidence_sha256 == mine else "DIFFERS FROM"
        self.say(f"  placet recorded sha256 {out.evidence_sha256}: {same} mine")
        return out

    async def propose_mkdir(self) -> Proposed:
        data = await self.call(
            "propose_mkdir",
            remote_parent="",
            name=MKDIR,
            reason="A folder for the reports I will write in the coming weeks.",
        )
        out = self._proposed(data, f"drive folder {MKDIR}/")
        return out

    async def propose_download(self) -> Proposed | None:
        if DOWNLOAD not in self.drive_files:
            self.say(f"the drive has no {DOWNLOAD}; not proposing a download")
            return None
        read = await self.call("drive_read", path=DOWNLOAD, max_bytes=200)
        first = read["content"].splitlines()[0] if read["content"] else ""
        self.say(f"drive_read {DOWNLOAD}: first line {first!r} (untrusted data)")
        data = await self.call(
            "propose_download",
            remote_path=DOWNLOAD,
            local_path=DOWNLOAD_TO,
            reason="I need the team readme locally to follow its conventions.",
        )
        out = self._proposed(data, f"drive {DOWNLOAD} -> {DOWNLOAD_TO}")
        out.local_sha256 = self.drive_sha256.get(DOWNLOAD)
        remote = data["proposal"]["evidence"]["remote"]
        out.evidence_sha256 = (
            remote.get("digest") if remote.get("digest_type") == "sha256" else None
        )
        if out.local_sha256:
            self.say(f"  the drive reported sha256 {out.local_sha256} for {DOWNLOAD}")
        return out

    async def propose_all(self) -> list[Proposed]:
        made = [await self.propose_upload(), await self.propose_mkdir()]
        download = await self.propose_download()
        if download is not None:
            made.append(download)
        ids = ", ".join(f"#{p.id}" for p in made)
        self.say(f"proposal ids: {ids}; nothing changes until the owner accepts them")
        return made

    def _outcome(self, data: dict[str, Any]) -> Outcome:
        p = data["proposal"]
        ops = [(r["op"].get("kind", "?"), r["outcome"]) for r in data["op_results"]]
        return Outcome(id=p["id"], kind=p["kind"], status=p["status"], ops=ops)

    async def report(self, out: Outcome, proposed: Proposed | None = None) -> None:
        """Print the outcome; for a succeeded transfer, check the landed bytes' digest."""
        ops = ", ".join(f"{k} {o}" for k, o in out.ops) or "no ops ran"
        self.say(f"#{out.id} {out.kind}: {out.status} ({ops})")
        if proposed is None or out.status != "succeeded":
            return
        if proposed.kind == "download":
            landed = sha256_file(self.root / DOWNLOAD_TO)
            same = "matches" if landed == proposed.local_sha256 else "DIFFERS FROM"
            self.say(f"  {DOWNLOAD_TO} is here now, sha256 {landed}: {same} the drive's")
        elif proposed.kind == "upload":
            listing = await self.call("drive_list", path=UPLOAD_INTO, include_digest=True)
            name = PurePosixPath(UPLOAD).name
            entry = next((e for e in listing["entries"] if e["name"] == name), None)
            sha = entry["digests"].get("sha256") if entry else None
            same = "matches" if sha == proposed.local_sha256 else "DIFFERS FROM"
            self.say(f"  the drive now reports sha256 {sha} for {UPLOAD_INTO}/{name}: {same} mine")

    async def get(self, pid: int) -> Outcome:
        """The proposal as it is now (`proposal_get`)."""
        return self._outcome(await self.call("proposal_get", id=pid))

    async def wait(self, pid: int) -> Outcome:
        """`proposal_wait` in calls of at most 50 s until the proposal is decided."""
        while True:
            data = await self.call("proposal_wait", id=pid, timeout_s=WAIT_CALL_S)
            if not data["timed_out"]:
                return self._outcome(data)
            self.say(f"#{pid} is still {data['proposal']['status']}; waiting again")

    async def wait_all(self, made: list[Proposed]) -> list[Outcome]:
        self.say("waiting for the owner's decisions (placet review, or placet accept ID)")
        outcomes = []
        for p in made:
            out = await self.wait(p.id)
            await self.report(out, p)
            outcomes.append(out)
        return outcomes


async def in_session(
    root: Path,
    body: Callable[[AgentSession], Awaitable[T]],
    *,
    placet: str,
    env: Mapping[str, str],
    say: Say = say_stdout,
) -> T:
    """Start `placet serve`, run `body` with an `AgentSession`, close the session.

    Raises:
        ToolFailed: a tool answered with an error (re-raised as itself, not wrapped in
            the client's exception group).
        Exception: from the MCP client when the server cannot be started or spoken to.
    """
    failure: ToolFailed | None = None
    async with Client(server_params(root, placet=placet, env=env), client_info=AGENT_INFO) as c:
        try:
            return await body(AgentSession(c, root, say))
        except ToolFailed as e:
            failure = e
    assert failure is not None
    raise failure


async def run(
    root: Path,
    *,
    placet: str,
    env: Mapping[str, str],
    wait: bool = False,
    say: Say = say_stdout,
) -> tuple[list[Proposed], list[Outcome]]:
    """One whole session: look around, propose, and with `wait` wait for the outcomes.

    Raises:
        ToolFailed, Exception: see `in_session`.
    """

    async def body(session: AgentSession) -> tuple[list[Proposed], list[Outcome]]:
        await session.look_around()
        made = await session.propose_all()
        return made, (await session.wait_all(made) if wait else [])

    return await in_session(root, body, placet=placet, env=env, say=say)


async def report(
    root: Path,
    made: list[Proposed],
    *,
    placet: str,
    env: Mapping[str, str],
    say: Say = say_stdout,
) -> list[Outcome]:
    """A fresh session asks `proposal_get` for each proposal and prints what it learns."""

    async def body(session: AgentSession) -> list[Outcome]:
        outcomes = [await session.get(p.id) for p in made]
        for out, p in zip(outcomes, made, strict=True):
            await session.report(out, p)
        return outcomes

    return await in_session(root, body, placet=placet, env=env, say=say)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, type=Path, help="the local root to serve")
    parser.add_argument("--placet", default=default_placet(), help="path of the placet command")
    parser.add_argument("--home", type=Path, help="PLACET_HOME for the server")
    parser.add_argument("--wait", action="store_true", help="wait for the owner's decisions")
    args = parser.parse_args(argv)
    env = {k: os.environ[k] for k in PLACET_ENV if os.environ.get(k)}
    if args.home:
        env["PLACET_HOME"] = str(args.home.absolute())
    root = args.root.absolute()
    placet = shutil.which(args.placet) or args.placet
    try:
        _, outcomes = anyio.run(
            lambda: run(root, placet=str(Path(placet).absolute()), env=env, wait=args.wait)
        )
    except ToolFailed as e:
        print(f"agent: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        print(f"agent: could not talk to placet serve ({args.placet}): {e!r}", file=sys.stderr)
        return 2
    return 1 if any(o.status != "succeeded" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
