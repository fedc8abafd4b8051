"""`placet serve` runs its host's executor loop: a proposal of this host
approved on another host runs in the server's process, with nothing on stdout but MCP
frames, and the server still exits at once when its client closes stdin. On both
backends."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.store import Store, open_store
from tests.support.mcp import PLACET, Raw, Workspace
from tests.support.processes import alive
from tests.support.rig import host_b_settings, temp_files

pytestmark = pytest.mark.usefixtures("store_backend")


def _propose_upload(server: Raw, call_id: int, local_path: str) -> int:
    """`propose_upload` of `local_path` to the drive's top folder; the proposal's id."""
    made = server.call(
        call_id, "propose_upload", {"local_path": local_path, "remote_parent": "", "reason": "r"}
    )
    return int(made["result"]["structuredContent"]["proposal"]["id"])


def _approve(store: Store, pid: int) -> None:
    rec = store.get(pid)
    store.accept(pid, detail={"request_hash": rec.request_hash, "via": "test"})


def _end(*servers: Raw) -> None:
    """Kill each of `servers` still running and reap it."""
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


@pytest.mark.timeout(120)
def test_serve_runs_what_another_host_approved_and_says_nothing_on_stdout(
    ws: Workspace, tmp_path: Path
) -> None:
    server = Raw(ws)
    try:
        assert "result" in server.init()
        pid = _propose_upload(server, 1, "hello.txt")
        with open_store(host_b_settings(load_settings(ws.env), tmp_path)) as store_b:
            assert store_b.get(pid).host_id != store_b.host_id
            _approve(store_b, pid)
            deadline = time.monotonic() + 60
            while store_b.get(pid).status in ("approved", "executing"):
                assert time.monotonic() < deadline, "placet serve did not run the proposal"
                time.sleep(0.05)
            assert store_b.get(pid).status == "succeeded"
            claims = [e for e in store_b.audit_events(proposal_id=pid) if e.detail.get("holder")]
            assert [e.detail["holder"]["pid"] for e in claims] == [server.proc.pid]
        assert (ws.drive / "hello.txt").read_text() == "hello from the agent\n"

        server.ping(2)  # the next frame is the answer: nothing else was written
        got = server.call(3, "proposal_get", {"id": pid})
        assert got["result"]["structuredContent"]["proposal"]["status"] == "succeeded"
        assert server.pending == b""

        server.stdin.close()  # the client leaves: the server and its loop stop
        started = time.monotonic()
        assert server.proc.wait(15) == 0
        assert time.monotonic() - started < 10
        fd = server.stdout.fileno()
        assert select.select([fd], [], [], 5)[0]
        assert os.read(fd, 1 << 16) == b""  # no byte after the last answer
    finally:
        _end(server)


def _descendants(pid: int) -> dict[int, str]:
    """Every live process under `pid` (pid -> command name), from /proc."""
    parents: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            data = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        name, rest = data[data.index(b"(") + 1 : data.rindex(b")")], data[data.rindex(b")") + 2 :]
        fields = rest.split()
        if fields[0] == b"Z":
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
        names[int(entry)] = name.decode(errors="replace")
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out[child] = names[child]
            todo.append(child)
    return out


def _big(path: Path) -> None:
    block = os.urandom(1024 * 1024)
    with path.open("wb") as f:
        for i in range(300):
            f.write(block[i:] + block[:i])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("leave", ["stdin", "sigterm"])
def test_the_host_leaving_mid_transfer_interrupts_the_loops_run_and_leaves_no_rclone(
    ws: Workspace, tmp_path: Path, leave: str
) -> None:
    """While serve's loop uploads, the agent still gets prompt answers and nothing else on
    stdout; the host quitting (stdin closed, or SIGTERM) ends serve promptly, the
    proposal `interrupted`, its temporary object gone and no rclone left running."""
    _big(ws.root / "big.bin")
    server = Raw(ws)
    try:
        assert "result" in server.init()
        pid = _propose_upload(server, 1, "big.bin")
        with open_store(host_b_settings(load_settings(ws.env), tmp_path)) as store_b:
            _approve(store_b, pid)
            deadline = time.monotonic() + 60
            while not any(t.stat().st_size >= 4 << 20 for t in temp_files(ws.drive)):
                assert time.monotonic() < deadline, "the loop did not start the upload"
                assert store_b.get(pid).status in ("approved", "executing")
                time.sleep(0.002)
            children = _descendants(server.proc.pid)
            assert "rclone" in children.values(), children  # the transfer runs in rclone
            server.ping(2)  # answered at once mid-transfer, the next frame on stdout
            got = server.call(3, "proposal_get", {"id": pid})
            assert got["result"]["structuredContent"]["proposal"]["status"] == "executing"
            assert server.pending == b""

            if leave == "stdin":
                server.stdin.close()
            else:
                server.proc.send_signal(signal.SIGTERM)
            started = time.monotonic()
            assert server.proc.wait(25) == 0
            took = time.monotonic() - started
            final = store_b.get(pid)
        assert final.status == "interrupted", final.status
        assert took < 20, f"serve took {took:.1f} s to stop mid-transfer"
        print(f"serve stopped {took:.3f} s after {leave} mid-transfer")
        assert [c for c in children if alive(c)] == [], children
        assert temp_files(ws.drive) == [] and not (ws.drive / "big.bin").exists()
        fd = server.stdout.fileno()
        assert select.select([fd], [], [], 5)[0]
        assert os.read(fd, 1 << 16) == b""
    finally:
        _end(server)


@pytest.mark.timeout(150)
def test_a_serve_killed_mid_transfer_is_recovered_and_its_proposal_run_again(
    yes_ws: Workspace, tmp_path: Path
) -> None:
    """Two `placet serve` on one host, a proposal approved elsewhere: one loop claims it.
    kill -9 of that server mid-transfer takes its rclone children with it; the owner's
    `placet accept` recovers the dead holder's lease at once (`interrupted`) and runs it
    again; the surviving server's loop leaves it to that live approver: one claim each."""
    ws = yes_ws
    _big(ws.root / "big.bin")
    servers = [Raw(ws), Raw(ws)]
    try:
        for s in servers:
            assert "result" in s.init()
        pid = _propose_upload(servers[0], 1, "big.bin")
        with open_store(host_b_settings(load_settings(ws.env), tmp_path)) as store_b:
            _approve(store_b, pid)
            deadline = time.monotonic() + 60
            while not any(t.stat().st_size >= 4 << 20 for t in temp_files(ws.drive)):
                assert time.monotonic() < deadline, "no loop started the upload"
                time.sleep(0.002)
            claims = [e for e in store_b.audit_events(proposal_id=pid) if e.detail.get("holder")]
            holder = claims[-1].detail["holder"]["pid"]
            killed = next(s for s in servers if s.proc.pid == holder)
            survivor = next(s for s in servers if s is not killed)
            children = _descendants(holder)
            assert "rclone" in children.values(), children
            killed.proc.kill()
            killed.proc.wait()
            deadline = time.monotonic() + 10  # PR_SET_PDEATHSIG: they die with it
            while any(alive(c) for c in children):
                assert time.monotonic() < deadline, "rclone outlived its killed server"
                time.sleep(0.02)
            survivor.ping(2)

            accepted = ws.placet("accept", str(pid), "--yes")
            assert accepted.returncode == 0, accepted.stderr
            final = store_b.get(pid)
            events = store_b.audit_events(proposal_id=pid)
        assert final.status == "succeeded", final.status
        holders = [e.detail["holder"]["pid"] for e in events if e.to_status == "executing"]
        assert len(holders) == 2 and holders[0] == holder and holders[1] != survivor.proc.pid
        assert [e.to_status for e in events].count("interrupted") == 1
        assert (ws.drive / "big.bin").stat().st_size == 300 << 20 and temp_files(ws.drive) == []
        survivor.ping(3)
        assert survivor.pending == b""
    finally:
        _end(*servers)


@pytest.mark.timeout(150)
def test_a_batch_decided_here_and_elsewhere_beside_two_serves_runs_each_once(
    yes_ws: Workspace, tmp_path: Path
) -> None:
    """Two `placet serve` on one host; the owner accepts eight proposals at once, half
    through parallel `placet accept` on this host (deciders: they run their own), half on
    another host (the loops run them): every proposal is claimed once, none stays
    approved, and each deciding `placet accept` ran its own."""
    ws = yes_ws
    servers = [Raw(ws), Raw(ws)]
    try:
        for s in servers:
            assert "result" in s.init()
        pids = []
        for i in range(8):
            (ws.root / f"f{i}.txt").write_text(f"file {i}\n")
            pids.append(_propose_upload(servers[i % 2], 10 + i, f"f{i}.txt"))
        here, elsewhere = pids[::2], pids[1::2]
        env = {**os.environ, **ws.env}
        with open_store(host_b_settings(load_settings(ws.env), tmp_path)) as store_b:
            deciders = {
                p: subprocess.Popen(
                    [PLACET, "accept", str(p), "--yes"],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for p in here
            }
            for p in elsewhere:
                _approve(store_b, p)
            for p, proc in deciders.items():
                out, err = proc.communicate(timeout=60)
                assert proc.returncode == 0, (p, out, err)
            deadline = time.monotonic() + 60
            while any(store_b.get(p).status in ("approved", "executing") for p in pids):
                assert time.monotonic() < deadline, "a proposal stayed approved"
                time.sleep(0.05)
            serve_pids = {s.proc.pid for s in servers}
            for p in pids:
                assert store_b.get(p).status == "succeeded", p
                events = store_b.audit_events(proposal_id=p)
                claims = [e.detail["holder"]["pid"] for e in events if e.to_status == "executing"]
                assert len(claims) == 1, (p, claims)
                who = deciders[p].pid if p in deciders else None
                assert claims[0] == who if who else claims[0] in serve_pids, (p, claims)
            assert store_b.verify_audit().ok
        for s in servers:
            s.ping(99)
            assert s.pending == b""
    finally:
        _end(*servers)
