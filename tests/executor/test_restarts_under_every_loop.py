"""PostgreSQL restarted five times under every placet process that runs a host's
executor loop, once mid-transfer (placet.store.reconnect): three hosts on one database,
host A running `placet executor`, host B `placet serve` (its agent proposing over MCP),
host C `placet web`; the owner approves from a fourth. Every approved proposal runs
exactly once, on its own host, and `placet audit --verify` is ok on every host.

The restarts: one while all wait; one while host A uploads 8 MiB (its rclone slowed to
4 MiB/s by --bwlimit, through `rclone_path`); one just before approvals (made while the
loops may still be reconnecting: their NOTIFY may reach no one, the rescan runs them);
two back to back, before the agent proposes again."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from placet.config import Settings, load_settings
from placet.drive import RcloneDrive
from placet.store import ProposalRecord, Store, open_store
from tests.support.drives import RCLONE
from tests.support.mcp import Raw, Workspace
from tests.support.postgres import PgServer, listening, pg_server_down, restart_pg_server
from tests.support.rig import PLACET, Rig, make_rig, placet_cli, sha256, temp_files, write_config
from tests.support.web import free_port

pytestmark = pytest.mark.usefixtures("store_backend")
postgresql_only = pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)

BIG = 8 * 1024 * 1024
LISTENERS = 4
"""LISTEN sessions once every process waits: host A's executor, the host loops of
`placet serve` and `placet web`, and the web page's change feed."""


def _until(what: str, done: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


def _home(tmp_path: Path, name: str, db: str) -> Settings:
    home = tmp_path / name
    home.mkdir(mode=0o700)
    return load_settings({"PLACET_HOME": str(home), "PLACET_DB": db})


def _env(settings: Settings) -> dict[str, str]:
    return {**os.environ, "PLACET_HOME": str(settings.data_dir)}


@contextmanager
def _process(argv: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """`argv` running (stdin closed, output piped), stopped with SIGTERM at the end."""
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


class _Agent:
    """Host B's agent: `placet serve` spoken to over MCP; a call that a restart made fail
    retryably is made again, as an agent does."""

    def __init__(self, server: Raw) -> None:
        self.server = server
        self.ids = iter(range(1, 1_000_000))
        self.retried = 0

    def upload(self, name: str) -> int:
        while True:
            args = {"local_path": name, "remote_parent": "", "reason": "restarts"}
            made = self.server.call(next(self.ids), "propose_upload", args)
            content = made["result"].get("structuredContent") or {}
            if "proposal" in content:
                return int(content["proposal"]["id"])
            assert made["result"].get("isError"), made
            assert '"retryable": true' in made["result"]["content"][1]["text"], made
            self.retried += 1
            assert self.retried < 20, made
            time.sleep(0.2)


@postgresql_only
@pytest.mark.timeout(240)
def test_five_restarts_under_executor_serve_and_web_run_each_approval_once(
    store_backend: str,
    configured_rig: Rig,
    tmp_path: Path,
    pg_server: PgServer,
    make_drive: Callable[..., RcloneDrive],
) -> None:
    a = configured_rig
    db = a.settings.database
    assert db is not None and a.remote_dir is not None
    slow = tmp_path / "slow-rclone"
    slow.write_text(f'#!/bin/sh\nexec "{RCLONE}" --bwlimit 4M "$@"\n')
    slow.chmod(0o755)
    write_config(a.settings, drive=a.drive.spec, rclone_path=str(slow))
    owner_settings = _home(tmp_path, "owner", db)

    b_settings = _home(tmp_path, "host-b", db)
    ws_b = Workspace(
        base=tmp_path / "host-b-ws", home=b_settings.data_dir, root=tmp_path / "host-b-root",
        drive=tmp_path / "host-b-drive", outside=tmp_path / "host-b-outside",
    )  # fmt: skip
    for d in (ws_b.root, ws_b.drive, ws_b.outside):
        d.mkdir(parents=True)

    c_settings = _home(tmp_path, "host-c", db)
    c_remote = tmp_path / "host-c-drive"
    c_remote.mkdir()
    c = make_rig(c_settings, make_drive(str(c_remote)), tmp_path / "host-c-work", c_remote)
    write_config(c.settings, drive=c.drive.spec)

    made: dict[str, tuple[str, int]] = {}  # name -> (host, proposal id)
    restarts = 0

    def restart() -> None:
        nonlocal restarts
        restart_pg_server(pg_server)
        restarts += 1

    with ExitStack() as stack:
        owner = stack.enter_context(open_store(owner_settings))
        executor = stack.enter_context(_process([str(PLACET), "executor"], _env(a.settings)))
        web = stack.enter_context(
            _process([str(PLACET), "web", "--port", str(free_port())], _env(c.settings))
        )
        server = Raw(ws_b)
        stack.callback(lambda: server.proc.poll() is None and server.proc.kill())
        assert "result" in server.init()
        agent = _Agent(server)
        holders = {"A": executor.pid, "B": server.proc.pid, "C": web.pid}

        def propose(host: str, name: str) -> ProposalRecord:
            data = f"{name} on host {host}\n".encode()
            if host == "A":
                a.write(name, data)
                pid = a.upload(name).id
            elif host == "B":
                (ws_b.root / name).write_bytes(data)
                pid = agent.upload(name)
            else:
                c.write(name, data)
                pid = c.upload(name).id
            made[name] = (host, pid)
            return owner.get(pid)

        def approve(*recs: ProposalRecord) -> None:
            for rec in recs:
                owner.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "test"})

        def ran(*recs: ProposalRecord, seconds: float = 30) -> None:
            for rec in recs:
                _until(
                    f"proposal {rec.id} ran",
                    lambda rec=rec: owner.get(rec.id).status not in ("approved", "executing"),
                    seconds,
                )

        _until("every loop listens", lambda: len(listening(pg_server, db)) >= LISTENERS)

        # 1: a restart while every loop waits
        restart()
        first = [propose(h, f"one-{h}.txt") for h in "ABC"]
        approve(*first)
        ran(*first)

        # 2: a restart mid-transfer on host A
        big = os.urandom(BIG)
        a.write("big.bin", big)
        rec_big = a.upload("big.bin")
        made["big.bin"] = ("A", rec_big.id)
        approve(rec_big)
        _until(
            "host A's upload is under way",
            lambda: any(t.stat().st_size >= 512 * 1024 for t in temp_files(a.remote_dir)),
        )
        with pg_server_down(pg_server):
            [temp] = temp_files(a.remote_dir)
            assert temp.stat().st_size < BIG  # the bytes still flowing
        restarts += 1
        ran(rec_big, seconds=60)

        # 3: approvals made right after a restart, while the loops reconnect
        third = [propose(h, f"three-{h}.txt") for h in "ABC"]
        restart()
        approve(*third)
        ran(*third)

        # 4 and 5: back to back, then the agent proposes again at once
        restart()
        restart()
        fifth = [propose(h, f"five-{h}.txt") for h in "BAC"]
        approve(*fifth)
        ran(*fifth)
        assert restarts == 5

        for name, proc in (("executor", executor), ("web", web), ("serve", server.proc)):
            assert proc.poll() is None, f"placet {name} ended"
        _until("every loop listens again", lambda: len(listening(pg_server, db)) >= LISTENERS)

        for name, (host, pid) in made.items():
            rec = owner.get(pid)
            assert rec.status == "succeeded", (name, rec.status, rec.summary)
            assert _claims(owner, pid) == [holders[host]], name
        drives = {"A": a.remote_dir, "B": ws_b.drive, "C": c_remote}
        for name, (host, _) in made.items():
            assert (drives[host] / name).exists(), name
        assert sha256((a.remote_dir / "big.bin").read_bytes()) == sha256(big)

        server.stdin.close()
        assert server.proc.wait(30) == 0
        web.send_signal(signal.SIGTERM)
        executor.send_signal(signal.SIGTERM)
        _, executor_err = executor.communicate(timeout=30)
        _, web_err = web.communicate(timeout=30)
        assert executor.returncode == 0 and web.returncode == 0, (executor_err, web_err)
        assert "Traceback" not in executor_err, executor_err
        assert "database connection lost: " in executor_err, executor_err
        assert "reconnected; rescanning" in executor_err, executor_err

    for settings in (a.settings, b_settings, c.settings, owner_settings):
        verified = placet_cli("audit", "--verify", env=_env(settings))
        assert verified.returncode == 0, (settings.data_dir, verified.stdout, verified.stderr)


def _claims(store: Store, pid: int) -> list[int]:
    """The holder pid of each claim of proposal `pid`."""
    events = store.audit_events(proposal_id=pid)
    return [int(e.detail["holder"]["pid"]) for e in events if e.to_status == "executing"]
