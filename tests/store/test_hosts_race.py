"""4 processes on 2 hosts (two data directories, one database) propose at once:
nothing lost, no duplicate pending proposal, each proposal carries its host's id, and
the audit chain verifies (its head had one writer at a time)."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.store import open_store

pytestmark = pytest.mark.usefixtures("store_backend")

PER_PROC = 60
SHARED = 20
"""Requests every process proposes too: each must end as exactly one pending proposal."""


def _env(tmp: str, host: str) -> dict[str, str]:
    db = os.environ.get("PLACET_DB") or str(Path(tmp) / "shared.db")
    return {"PLACET_HOME": str(Path(tmp) / host), "PLACET_DB": db}


def _request(name: str) -> dict[str, object]:
    return {"kind": "mkdir", "remote_parent": "hosts", "name": name}


def _worker(tmp: str, host: str, who: int, barrier: object, out: str) -> None:
    store = open_store(load_settings(_env(tmp, host)))
    made: list[tuple[int, bool, str | None]] = []
    errors: list[str] = []
    barrier.wait(timeout=60)  # type: ignore[attr-defined]
    names = [f"w{who}-{i}" for i in range(PER_PROC)] + [f"shared-{i}" for i in range(SHARED)]
    for name in names:
        try:
            rec, created = store.create_proposal(
                kind="mkdir",
                request=_request(name),
                evidence={"remote": {"exists": False}},
                reason="two hosts",
                drive_spec="local:/tmp/x",
                run_id=f"run-{who}",
                ttl_seconds=600,
            )
            made.append((rec.id, created, rec.host_id))
        except Exception as e:  # anything escaping is a failure of the test
            errors.append(f"{type(e).__name__}: {e}")
    Path(out).write_text(json.dumps({"made": made, "errors": errors, "host_id": store.host_id}))
    store.close()


@pytest.mark.timeout(120)
def test_four_processes_on_two_hosts_propose_at_once(tmp_path: Path) -> None:
    for host in ("a", "b"):
        (tmp_path / host).mkdir(mode=0o700)
        (tmp_path / host / "config.toml").write_text("pending_per_session = 1000\n")
    open_store(load_settings(_env(str(tmp_path), "a"))).close()  # migrate once
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    hosts = ["a", "b", "a", "b"]
    outs = [tmp_path / f"out{w}.json" for w in range(4)]
    procs = [
        ctx.Process(target=_worker, args=(str(tmp_path), hosts[w], w, barrier, str(outs[w])))
        for w in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=100)
        assert p.exitcode == 0
    results = [json.loads(o.read_text()) for o in outs]
    assert [r["errors"] for r in results] == [[]] * 4
    host_ids = {hosts[w]: r["host_id"] for w, r in enumerate(results)}
    assert len(set(host_ids.values())) == 2  # two hosts, and both processes of one agree
    for w, r in enumerate(results):
        assert all(h == host_ids[hosts[w]] for _, created, h in r["made"] if created)
    created = Counter(pid for r in results for pid, new, _ in r["made"] if new)
    assert set(created.values()) == {1}  # no proposal was created twice
    assert len(created) == 4 * PER_PROC + SHARED  # none lost, shared ones made once

    with open_store(load_settings(_env(str(tmp_path), "b"))) as store:
        pending = store.list(["pending"], limit=10_000)
        assert {p.id for p in pending} == set(created)
        assert Counter(p.host_id for p in pending).keys() == set(host_ids.values())
        v = store.verify_audit()
        assert v.ok and v.count == len(created), v.message
