"""The demo end to end, with real parts: the scripted agent (examples/agent_session.py)
over stdio MCP against a real `placet serve` subprocess, the review UI driven by Pilot,
the real executor and rclone, and the bytes checked by SHA-256 where they landed.

The workspace and the data directory are laid out by the demo's own `set_up` (a
`workspace/` root beside a `placet-home/` data directory, the drive seeded with
`shared/readme-from-drive.txt`), so these tests exercise what `make demo` runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from placet.config import Settings
from placet.store import ProposalRecord, Store, open_store

try:
    from placet.executor import execute
    from placet.tui import make_app
    from placet.tui.confirm import AcceptScreen
except ImportError as e:  # pragma: no cover - only while those modules are being built
    pytest.skip(
        f"the review UI or the executor is not importable yet ({e}); the demo needs both",
        allow_module_level=True,
    )

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLACET = str(Path(sys.executable).parent / "placet")
FINAL = {"succeeded", "failed", "interrupted", "discarded", "expired", "withdrawn"}


def load_example(name: str) -> ModuleType:
    """Import examples/<name>.py as module `name` (demo.py imports agent_session by name)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


agent = load_example("agent_session")
demo = load_example("demo")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def demo_ws(tmp_path: Path, placet_home: Path) -> tuple[Path, Settings]:
    """The demo's layout under tmp_path; its data dir is the test's PLACET_HOME."""
    workspace, settings = demo.set_up(tmp_path)
    assert settings.data_dir == placet_home
    return workspace, settings


def assert_landed(workspace: Path, settings: Settings, made: list[Any]) -> None:
    """The drive and the workspace hold exactly the approved bytes."""
    upload, _, download = made
    drive = settings.default_drive_dir
    report = drive / "shared" / "report.md"
    assert report.is_file()
    assert sha256(report) == upload.local_sha256 == sha256(workspace / "notes" / "report.md")
    assert (drive / "reports").is_dir()
    landed = workspace / "readme-from-drive.txt"
    assert landed.is_file()
    seeded = drive / "shared" / "readme-from-drive.txt"
    assert sha256(landed) == sha256(seeded) == download.local_sha256
    assert landed.read_text(encoding="utf-8") == demo.DRIVE_TEXT
    leftovers = [p.name for p in drive.rglob("*") if p.name.startswith(".")]
    leftovers += [p.name for p in workspace.rglob("*") if p.name.startswith(".")]
    assert leftovers == []  # no temp file left under any name


async def settle_until(pilot: Any, done: Any, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        await pilot.pause(0.05)


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_agent_proposes_over_mcp_and_the_owner_accepts_in_review(
    demo_ws: tuple[Path, Settings],
) -> None:
    workspace, settings = demo_ws
    env = demo.demo_env(settings.data_dir)
    lines: list[str] = []
    made, outcomes = await agent.run(workspace, placet=PLACET, env=env, say=lines.append)

    assert outcomes == []
    assert [p.kind for p in made] == ["upload", "mkdir", "download"]
    assert all(p.created for p in made)
    upload, _, download = made
    assert upload.local_sha256 == sha256(workspace / "notes" / "report.md")
    assert upload.evidence_sha256 == upload.local_sha256
    seeded = settings.default_drive_dir / "shared" / "readme-from-drive.txt"
    assert download.local_sha256 == sha256(seeded)
    assert any("matches mine" in line for line in lines)
    # Proposing changed nothing.
    assert not (settings.default_drive_dir / "shared" / "report.md").exists()
    assert not (settings.default_drive_dir / "reports").exists()
    assert not (workspace / "readme-from-drive.txt").exists()

    store = open_store(settings)
    try:
        pending = store.list(["pending"])
        assert [r.id for r in pending] == [p.id for p in made]
        assert {r.label for r in pending} == {"demo-agent"}
        assert {r.client_name for r in pending} == {"placet-demo-agent"}

        app = make_app(settings, store)
        async with app.run_test(size=(160, 50)) as pilot:
            table = app.queue_table
            await settle_until(pilot, lambda: table.order == [p.id for p in made], "the queue")
            for p in made:
                assert table.selected_id() == p.id
                await pilot.press("a")
                await settle_until(pilot, lambda: isinstance(app.screen, AcceptScreen), "modal")
                screen = app.screen
                assert isinstance(screen, AcceptScreen)
                assert screen.record.id == p.id
                await pilot.pause(0.6)  # past the 0.5 s key guard
                if screen.typed_required:
                    await pilot.press(*str(p.id), "enter")
                else:
                    await pilot.press("y")

                def finished(pid: int = p.id) -> bool:
                    # Run, and gone from the queue (the cursor then sits on the next one).
                    return (
                        app.transfer is None
                        and store.get(pid).status in FINAL
                        and pid not in table.order
                    )

                await settle_until(pilot, finished, f"proposal {p.id} to run")
                assert store.get(p.id).status == "succeeded"
            await settle_until(pilot, lambda: table.order == [], "an empty queue")
            await pilot.press("q")

        final = [store.get(p.id) for p in made]
        assert [r.status for r in final] == ["succeeded"] * 3
        assert [r.resolved_by for r in final] == ["owner"] * 3
        for r in final:
            assert approval_hash(store, r) == r.request_hash
            assert [o.outcome for o in store.op_results(r.id)] == ["done"]
        assert store.verify_audit().ok
    finally:
        store.close()

    assert_landed(workspace, settings, made)

    # A fresh agent session learns the outcomes and checks the digests itself.
    lines.clear()
    learned = await agent.report(workspace, made, placet=PLACET, env=env, say=lines.append)
    assert [o.status for o in learned] == ["succeeded"] * 3
    assert [o.ops for o in learned] == [
        [("upload", "done")],
        [("mkdir", "done")],
        [("download", "done")],
    ]
    assert sum("matches" in line for line in lines) == 2, lines


def approval_hash(store: Store, record: ProposalRecord) -> str | None:
    """The request hash recorded with the owner's approval of `record`."""
    events = store.audit_events(proposal_id=record.id)
    approved = [e for e in events if e.to_status == "approved" and e.actor == "owner"]
    assert len(approved) == 1
    return approved[0].detail.get("request_hash") if approved[0].detail else None


def accept_and_execute(store: Store, settings: Settings, pid: int) -> ProposalRecord:
    record = store.get(pid)
    store.accept(pid, actor="owner", detail={"request_hash": record.request_hash, "tty": False})
    return execute(store, settings, pid)


@pytest.mark.timeout(180)
def test_standalone_agent_waits_and_reports_per_op_results(
    demo_ws: tuple[Path, Settings],
) -> None:
    """`agent_session.py --wait` as its own process: proposal_wait until the owner acts."""
    workspace, settings = demo_ws
    env = {**demo.demo_env(settings.data_dir), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, str(EXAMPLES / "agent_session.py"), "--root", str(workspace)]
    proc = subprocess.Popen(
        [*cmd, "--placet", PLACET, "--wait"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = open_store(settings)
    try:
        deadline = time.monotonic() + 60
        while len(store.list(["pending"])) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agent did not propose within 60 s"
            time.sleep(0.1)
        ids = [r.id for r in store.list(["pending"])]
        results = [accept_and_execute(store, settings, pid) for pid in ids]
        assert [r.status for r in results] == ["succeeded"] * 3
    finally:
        store.close()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    for pid, kind in zip(ids, ("upload", "mkdir", "download"), strict=True):
        assert f"#{pid} {kind}: succeeded ({kind} done)" in stdout
    assert "matches mine" in stdout and "matches the drive's" in stdout
    assert (settings.default_drive_dir / "reports").is_dir()
    seeded = settings.default_drive_dir / "shared" / "readme-from-drive.txt"
    assert sha256(workspace / "readme-from-drive.txt") == sha256(seeded)


def test_standalone_agent_exits_non_zero_on_a_tool_error(
    demo_ws: tuple[Path, Settings],
) -> None:
    """The folder it proposes already exists on the drive: placet refuses, the agent says so."""
    workspace, settings = demo_ws
    (settings.default_drive_dir / "reports").mkdir()
    env = {**os.environ, **demo.demo_env(settings.data_dir)}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "agent_session.py"), "--root", str(workspace)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "propose_mkdir failed: already_exists" in done.stderr
    store = open_store(settings)
    try:
        assert [r.kind for r in store.list(["pending"])] == ["upload"]
    finally:
        store.close()


@pytest.mark.timeout(180)
def test_demo_without_a_terminal_accepts_everything(tmp_path: Path) -> None:
    """`make demo` in CI: stdin is not a tty, so the demo accepts through the executor."""
    base = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py"), "--dir", str(base)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PLACET_HOME"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "accepting every proposal through the executor" in out
    home = base / "placet-home"
    drive = home / "drive"
    report = drive / "shared" / "report.md"
    digest = sha256(base / "workspace" / "notes" / "report.md")
    assert sha256(report) == digest
    assert any("shared/report.md" in line and digest in line for line in out.splitlines())
    assert (drive / "reports").is_dir()
    assert sha256(base / "workspace" / "readme-from-drive.txt") == sha256(
        drive / "shared" / "readme-from-drive.txt"
    )
    verify = [line for line in out.splitlines() if line.startswith("placet audit --verify:")]
    assert len(verify) == 1 and "12 events" in verify[0], verify
    assert "pending -> approved" in out and "executing -> succeeded" in out
    assert f"PLACET_HOME   {home}" in out
