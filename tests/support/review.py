"""Fixed data and helpers for the review UI tests (imported directly, not a conftest).

Proposals are written through the real store with requests and evidence dumped from the
real `placet.schema` models, at a fixed time, so ids, hashes and the screen are
deterministic for snapshot tests. The local root path is fixed too (the store never
looks at it); tests that execute use `placet.proposals.making` against a real root instead.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from placet.config import Settings
from placet.schema import (
    DownloadEvidence,
    DownloadRequest,
    LocalFileEvidence,
    MkdirEvidence,
    MkdirRequest,
    RemoteEvidence,
    RootRef,
    UploadEvidence,
    UploadRequest,
)
from placet.store import ProposalRecord, Store
from tests.support.proposals import ABSENT_REMOTE

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
ROOT = RootRef(name="proj", path="/home/owner/proj", device=2049, inode=131073)
DRIVE = "protondrive:Agents"


@dataclass
class Clock:
    """A settable clock: tests stand anywhere in time without sleeping."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now = self.now + timedelta(seconds=seconds)


def quiet(settings: Settings, **changes: Any) -> Settings:
    """Settings with the sweep far away (tests sweep on purpose), roomy caps, and the
    configured drive set to `DRIVE`, the drive the `add_*` proposals are made against
    (so the review UI's binding check, `placet.executor.check_binding`, passes; a test
    that executes for real passes its own `drive=`, or `drive=None` for the default)."""
    values: dict[str, Any] = {
        "drive": DRIVE,
        "sweep_seconds": 3600.0,
        "pending_total": 100_000,
        "pending_per_session": 100_000,
    }
    values.update(changes)
    return settings.model_copy(update=values)


def _local(size: int, seed: str) -> LocalFileEvidence:
    digest = (seed.encode().hex() * 64)[:64]
    return LocalFileEvidence(
        size=size,
        mtime_ns=1_764_000_000_000_000_000,
        sha256=digest,
        digest_type="sha1",
        digest=digest[:40],
    )


def _add(
    store: Store,
    kind: str,
    request: BaseModel,
    evidence: BaseModel,
    reason: str,
    now: datetime,
    ttl: int,
    **fields: Any,
) -> ProposalRecord:
    """Store a proposal from its request and evidence models; `fields` default to the
    second agent (`codex` 0.9, run `run-b`) on `DRIVE`."""
    values = {"drive_spec": DRIVE, "run_id": "run-b", "client_name": "codex",
              "client_version": "0.9"} | fields  # fmt: skip
    rec, _ = store.create_proposal(
        kind=kind,
        request=request.model_dump(mode="json"),
        evidence=evidence.model_dump(mode="json"),
        reason=reason,
        ttl_seconds=ttl,
        now=now,
        **values,
    )
    return rec


def add_upload(
    store: Store,
    *,
    local_path: str = "notes/report.md",
    remote_parent: str = "docs",
    name: str | None = None,
    size: int = 12_345,
    reason: str = "publish the weekly report",
    client_name: str | None = "claude-code",
    label: str | None = None,
    run_id: str = "run-a",
    exists: bool = False,
    now: datetime = T0,
    ttl: int = 1800,
    drive_spec: str = DRIVE,
) -> ProposalRecord:
    name = name if name is not None else local_path.rsplit("/", 1)[-1]
    req = UploadRequest(
        root=ROOT,
        local_path=local_path,
        remote_parent=remote_parent,
        name=name,
        replace_existing=exists,
    )
    remote = (
        RemoteEvidence(exists=True, size=99, digest_type="sha1", digest="ab" * 20)
        if exists
        else RemoteEvidence(exists=False)
    )
    ev = UploadEvidence(local=_local(size, local_path), remote=remote)
    return _add(
        store,
        "upload",
        req,
        ev,
        reason,
        now,
        ttl,
        drive_spec=drive_spec,
        run_id=run_id,
        client_name=client_name,
        client_version="1.0",
        label=label,
    )


def add_mkdir(
    store: Store,
    *,
    remote_parent: str = "docs",
    name: str = "archive",
    reason: str = "a folder for old reports",
    now: datetime = T0,
    ttl: int = 1800,
) -> ProposalRecord:
    req = MkdirRequest(remote_parent=remote_parent, name=name)
    ev = MkdirEvidence(remote=RemoteEvidence(exists=False))
    return _add(store, "mkdir", req, ev, reason, now, ttl)


def add_download(
    store: Store,
    *,
    remote_path: str = "shared/conftest.py",
    local_path: str = "conftest.py",
    reason: str = "fetch the shared test config",
    now: datetime = T0,
    ttl: int = 1800,
    remote: RemoteEvidence | None = None,
) -> ProposalRecord:
    req = DownloadRequest(remote_path=remote_path, root=ROOT, local_path=local_path)
    ev = DownloadEvidence(
        remote=remote
        or RemoteEvidence(exists=True, size=2048, digest_type="sha1", digest="cd" * 20)
    )
    return _add(store, "download", req, ev, reason, now, ttl)


class Recorder:
    """A `run_test(message_hook=...)` that keeps every notification the app raised."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, str, str]] = []  # (title, message, severity)

    def __call__(self, message: Any) -> None:
        from textual.notifications import Notify

        if isinstance(message, Notify):
            n = message.notification
            self.notifications.append((n.title, n.message, n.severity))

    def titles(self) -> list[str]:
        return [t for t, _, _ in self.notifications]

    def text(self) -> str:
        return "\n".join(f"{t}: {m}" for t, m, _ in self.notifications)


async def settle(pilot: Any, rounds: int = 3) -> None:
    """Let workers finish and their messages be handled (a cancelled worker is fine:
    exclusive workers cancel the previous run of their group)."""
    from textual.worker import WorkerCancelled

    for _ in range(rounds):
        with contextlib.suppress(WorkerCancelled):
            await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def until(pilot: Any, predicate: Any, timeout: float = 10.0) -> bool:
    """Pause in small steps (no key press) until `predicate()` holds or `timeout` passes."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(0.05)
    return bool(predicate())


def screen_text(app: Any) -> str:
    """What the current screen shows, as plain text lines (for assertions)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def plain(renderable: Any, width: int = 150) -> str:
    """A Rich renderable as plain text, `width` columns wide."""
    from rich.console import Console

    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


BIG_SYNC_OPS = 100_000
BIG_SYNC_ROOT = {"name": "proj", "path": "/home/owner/proj", "device": 1, "inode": 2}


def big_sync(store: Store, n: int = BIG_SYNC_OPS) -> ProposalRecord:
    """A pending sync of `n` ops: a folder, then uploads (one named `.bashrc`: a flag)."""
    absent = ABSENT_REMOTE
    ops: list[dict[str, Any]] = [
        {"index": 0, "kind": "mkdir", "local_path": None, "remote_path": "big", "size": None,
         "expected_local": None, "expected_remote": absent, "replace": False, "reason": "new"}
    ]  # fmt: skip
    for i in range(1, n):
        path = f"big/f{i:06d}.txt" if i != n // 2 else "big/.bashrc"
        ops.append({
            "index": i, "kind": "upload", "local_path": path, "remote_path": path,
            "size": 100 + i, "replace": False, "reason": "new here", "expected_remote": absent,
            "expected_local": {"size": 100 + i, "mtime_ns": 1, "sha256": f"{i:064x}",
                               "digest_type": None, "digest": None},
        })  # fmt: skip
    request = {"kind": "sync", "plan_id": 1, "root": BIG_SYNC_ROOT, "local_path": "",
               "remote_path": "", "decisions": {}, "ops": ops}  # fmt: skip
    rec, _ = store.create_proposal(
        kind="sync", request=request, evidence={"plan": {"id": 1}}, reason="sync everything",
        drive_spec=DRIVE, run_id="run-big", ttl_seconds=1800, now=T0,
    )  # fmt: skip
    return rec


async def confirm_accept(pilot: Any, pid: int, *, decide: bool = True) -> Any:
    """Open the accept confirmation of the selected proposal (`a`; a large sync's ops are
    read first) and wait until it is drawn; type proposal `pid`'s id where it asks for
    it, and, with `decide`, confirm (Enter, else `y`). Returns the `AcceptScreen`."""
    from textual.widgets import Input

    from placet.tui.confirm import AcceptScreen

    app = pilot.app
    await pilot.press("a")
    assert await until(pilot, lambda: isinstance(app.screen, AcceptScreen), 600)
    screen = app.screen
    if screen.typed_required:
        screen.query_one("#typed", Input).focus()
        await pilot.press(*str(pid))
    await pilot.pause()  # drawn, as the owner reads it
    if decide:
        await pilot.press("enter" if screen.typed_required else "y")
    return screen
