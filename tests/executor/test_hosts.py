"""Two hosts on one machine: two data directories, so two host ids, on one
database. Host A's agent proposes; the owner accepts from host B; host B's executor never
touches it and shows "waiting for host A"; host A's executor (`placet executor`) runs it.
On both backends (PostgreSQL: a real server; SQLite: one file both hosts name)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.errors import PolicyRefused
from placet.executor import execute
from placet.executor.service import run_host_executor
from placet.store import open_store
from placet.store.host import host_label
from tests.support.rig import Rig, placet_cli, start_executor

pytestmark = pytest.mark.usefixtures("store_backend")


def _host_b_env(rig: Rig, tmp_path: Path) -> dict[str, str]:
    """Host B: its own data directory (its own host id), host A's database, `--yes`
    allowed, and a drive of its own (host A's drive is A's executor's business)."""
    home_b = tmp_path / "host-b"
    home_b.mkdir(mode=0o700)
    (home_b / "config.toml").write_text("allow_yes = true\n")
    db = rig.settings.database or str(rig.settings.db_path)
    return {**os.environ, "PLACET_HOME": str(home_b), "PLACET_DB": db}


def test_accepted_on_host_b_runs_only_on_host_a(configured_rig: Rig, tmp_path: Path) -> None:
    rig = configured_rig
    rig.write("report.txt", b"made on host A\n")
    rec = rig.upload("report.txt")
    assert rec.host_id == rig.store.host_id
    env_b = _host_b_env(rig, tmp_path)
    here_a = host_label(rec.host, rec.host_id)

    accepted = placet_cli("accept", str(rec.id), "--yes", env=env_b)
    assert accepted.returncode == 0, accepted.stderr
    assert f"made on host {here_a}" in accepted.stdout and "that host runs it" in accepted.stdout
    assert rig.store.get(rec.id).status == "approved"

    listed = placet_cli("list", env=env_b)
    assert f"[waiting for host {here_a}]" in listed.stdout, listed.stdout
    shown = placet_cli("show", str(rec.id), env=env_b)
    assert f"waiting for host {here_a}" in shown.stdout, shown.stdout
    # On host A itself nothing waits: it is this host's to run.
    assert "waiting for host" not in placet_cli("list", env=dict(os.environ)).stdout

    # Host B's executor never touches it, and neither does a direct execute there.
    once_b = placet_cli("executor", "--once", env=env_b)
    assert once_b.returncode == 0, once_b.stderr
    assert f"proposal {rec.id}" not in once_b.stdout
    settings_b = load_settings(
        {"PLACET_HOME": env_b["PLACET_HOME"], "PLACET_DB": env_b["PLACET_DB"]}
    )
    with open_store(settings_b) as store_b:
        assert store_b.host_id != rig.store.host_id
        assert store_b.approved_here() == []
        with pytest.raises(PolicyRefused) as refused:
            execute(store_b, settings_b, rec.id)
        assert refused.value.error_code == "other_host"
    assert rig.store.get(rec.id).status == "approved"
    assert [e.to_status for e in rig.store.audit_events(proposal_id=rec.id)] == [
        "pending",
        "approved",
    ]

    # Host A's executor runs it.
    once_a = placet_cli("executor", "--once", env=dict(os.environ))
    assert once_a.returncode == 0, once_a.stderr
    assert f"proposal {rec.id} succeeded" in once_a.stdout, once_a.stdout
    assert (rig.remote_dir or Path()).joinpath("report.txt").read_bytes() == b"made on host A\n"
    claim = [e for e in rig.store.audit_events(proposal_id=rec.id) if e.to_status == "executing"]
    assert len(claim) == 1 and claim[0].detail["holder"]["pid"] != os.getpid()
    assert rig.store.verify_audit().ok


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
def test_executor_wakes_on_an_accept_and_stops_cleanly_on_ctrl_c(
    store_backend: str, configured_rig: Rig, tmp_path: Path
) -> None:
    """`placet executor` (host A) sleeps until the owner accepts on host B, then runs the
    proposal; SIGINT ends it with exit 0. PostgreSQL only, where the accept's NOTIFY
    wakes it (SQLite's polling waiter: tests/store/test_changes.py)."""
    rig = configured_rig
    rig.write("late.txt", b"accepted later\n")
    rec = rig.upload("late.txt")
    proc = start_executor()
    try:
        accepted = placet_cli("accept", str(rec.id), "--yes", env=_host_b_env(rig, tmp_path))
        assert accepted.returncode == 0, accepted.stderr
        deadline = time.monotonic() + 60
        while rig.store.get(rec.id).status not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, "host A's executor did not run the proposal"
            time.sleep(0.05)
        assert rig.store.get(rec.id).status == "succeeded"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"proposal {rec.id} succeeded" in out and "executor stopped" in out


def test_the_host_loop_in_process_runs_only_this_hosts_proposals(rig: Rig, tmp_path: Path) -> None:
    """`run_host_executor` with `once`: this host's approved proposal runs; one made on
    another data directory (host) and approved stays approved."""
    rig.write("mine.txt", b"mine\n")
    mine = rig.accept(rig.upload("mine.txt"))
    db = rig.settings.database or str(rig.settings.db_path)
    other_home = tmp_path / "other-host"
    other = load_settings({"PLACET_HOME": str(other_home), "PLACET_DB": db})
    other = other.model_copy(update={"drive": rig.drive.spec})
    with open_store(other) as store_o:
        theirs, _ = store_o.create_proposal(
            kind="mkdir",
            request={"kind": "mkdir", "remote_parent": "", "name": "theirs"},
            evidence={"remote": {"exists": False}},
            reason="made on the other host",
            drive_spec=rig.drive.spec,
            run_id="run-other",
            ttl_seconds=600,
        )
    rig.store.accept(
        theirs.id, detail={"request_hash": theirs.request_hash, "via": "test", "tty": False}
    )
    ran = run_host_executor(rig.store, rig.settings, stop=threading.Event(), once=True)
    assert [(r.proposal_id, r.final.status if r.final else None) for r in ran] == [
        (mine.id, "succeeded")
    ]
    assert rig.store.get(theirs.id).status == "approved"
