"""Audit chain: tampering with the database is found and named by `placet audit --verify`
(the real entry point, in a subprocess); a removed tail is found through the anchor file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from placet.config import Settings
from placet.store import LeaseHolder, Store, open_store
from placet.store.audit import GENESIS_HASH, chain_hash, event_content
from placet.store.db import UTCDateTime
from placet.store.records import EventFacts
from tests.support.db import raw_db, sql, stored_datetime
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")

PLACET = str(Path(sys.executable).with_name("placet"))


def _populate(settings: Settings) -> int:
    """Three proposals through several transitions; returns the number of events."""
    with open_store(settings) as store:
        ids = []
        for i in range(3):
            p, _ = propose_folder(store, f"d{i}", reason="audit test", run_id="run-1", ttl=600)
            ids.append(p.id)
        store.accept(ids[0])
        holder = LeaseHolder.current()
        store.claim(ids[0], holder=holder)
        store.record_op_result(
            ids[0], op_index=0, op={"kind": "mkdir"}, outcome="done", detail={}, holder=holder
        )
        store.finish(ids[0], holder=holder)
        store.discard(ids[1], reason="not needed")
        store.extend(ids[2], minutes=10)
        count = len(store.audit_events())
        assert store.verify_audit().ok
        return count


def _sql(settings: Settings, statement: str, *params: object) -> None:
    sql(settings, statement, *params)


def _verify_cli(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLACET, "audit", "--verify", *extra], capture_output=True, text=True, timeout=60
    )


def test_verify_passes_on_an_untouched_log(settings: Settings) -> None:
    n = _populate(settings)
    r = _verify_cli()
    assert r.returncode == 0, r.stderr
    assert f"{n} events verified" in r.stdout


def test_edited_detail_fails_and_names_that_event(settings: Settings) -> None:
    n = _populate(settings)
    assert n == 8
    _sql(settings, "UPDATE audit_event SET detail = ? WHERE id = 5", '{"reason":"edited"}')
    r = _verify_cli()
    assert r.returncode == 6
    assert "event 5 was altered" in r.stdout
    assert "at event 5" in r.stderr and "Traceback" not in r.stderr
    j = _verify_cli("--json")
    assert j.returncode == 6
    doc = json.loads(j.stdout)
    assert doc["ok"] is False and doc["first_bad_event_id"] == 5


def test_removing_the_last_three_events_is_detected(settings: Settings) -> None:
    n = _populate(settings)
    _sql(settings, "DELETE FROM audit_event WHERE id > ?", n - 3)
    r = _verify_cli("--json")
    assert r.returncode == 6
    doc = json.loads(r.stdout)
    assert doc["first_bad_event_id"] == n - 2  # the first missing event
    assert f"events {n - 2}..{n} were removed" in doc["message"]


def test_a_rewritten_consistent_chain_is_caught_by_the_anchor(settings: Settings) -> None:
    """Edit event 4 and recompute every hash after it: the chain is self-consistent, but
    the anchor file outside the database still holds the original hashes."""
    n = _populate(settings)
    with raw_db(settings) as con:
        rows = con.execute(
            "SELECT id, proposal_id, request_hash, actor, from_status, to_status, at, detail "
            "FROM audit_event ORDER BY id"
        ).fetchall()
        prev = GENESIS_HASH
        to_utc = UTCDateTime()
        for eid, pid, rh, actor, frm, to, at, detail in rows:
            if eid == 4:
                actor = "sweeper"  # pretend the sweeper, not the owner, did it
            at_dt = to_utc.process_result_value(stored_datetime(at), None)  # type: ignore[arg-type]
            assert at_dt is not None
            facts = EventFacts(pid, rh, actor, frm, to, at_dt)
            content = event_content(event_id=eid, facts=facts, detail_json=detail)
            digest = chain_hash(prev, content)
            con.execute(
                "UPDATE audit_event SET actor = ?, prev_hash = ?, hash = ? WHERE id = ?",
                (actor, prev, digest, eid),
            )
            prev = digest
    with open_store(settings) as store:
        v = store.verify_audit()
    assert not v.ok and v.first_bad_event_id == 4, v.message
    assert "anchor" in v.message and v.count == n


def test_status_changed_outside_the_store_is_detected(settings: Settings) -> None:
    _populate(settings)
    _sql(settings, "UPDATE proposal SET status = 'approved' WHERE id = 3")
    with open_store(settings) as store:
        v = store.verify_audit()
        last = store.audit_events(proposal_id=3)[-1]
    assert not v.ok and v.first_bad_event_id == last.id
    assert "changed outside the store" in v.message


# (proposal, from, to) forged with valid hashes and anchored, as a store that skipped a
# check would have written them; `_populate` leaves 1 succeeded, 2 discarded, 3 pending.
FORGED = [
    (3, "approved", "executing"),  # 3 is pending: an approval never recorded
    (2, None, "pending"),  # a second creation
    (99, "pending", "approved"),  # a proposal's first event that is no creation
    (3, "pending", "succeeded"),  # follows on, but no such arrow
]


@pytest.mark.parametrize(("pid", "frm", "to"), FORGED)
def test_events_that_do_not_follow_on_are_detected(
    settings: Settings, pid: int, frm: str | None, to: str
) -> None:
    from placet.store.audit import append_anchor, append_event

    n = _populate(settings)
    with raw_db(settings, autocommit=False) as con:
        if con.postgres:  # a forger with the server's rights skips the foreign key checks
            con.execute("SET session_replication_role = replica")
        con.begin(write=True)
        at = datetime(2030, 1, 1, tzinfo=UTC)
        head = append_event(con, EventFacts(pid, "0" * 64, "executor", frm, to, at), detail={})
        con.execute("UPDATE proposal SET status = ? WHERE id = ?", (to, pid))
        con.commit()
    append_anchor(settings.audit_anchor_path, [head])
    r = _verify_cli("--json")
    assert r.returncode == 6, r.stdout
    doc = json.loads(r.stdout)
    assert doc["first_bad_event_id"] == n + 1, doc
    assert f"event {n + 1}" in doc["message"] and f"proposal {pid}" in doc["message"]


def test_edited_request_is_detected(settings: Settings) -> None:
    _populate(settings)
    _sql(settings, "UPDATE proposal SET request = ? WHERE id = 2", '{"name":"evil"}')
    with open_store(settings) as store:
        v = store.verify_audit()
        created = store.audit_events(proposal_id=2)[0]
    assert not v.ok and v.first_bad_event_id == created.id
    assert "no longer hashes" in v.message


def test_missing_anchor_file_is_reported(settings: Settings) -> None:
    _populate(settings)
    settings.audit_anchor_path.unlink()
    with open_store(settings) as store:
        v = store.verify_audit()
    assert not v.ok and "anchor file" in v.message and "missing" in v.message


def test_anchor_lines_name_each_event_in_order(settings: Settings) -> None:
    n = _populate(settings)
    lines = settings.audit_anchor_path.read_text().splitlines()
    with open_store(settings) as store:
        events = store.audit_events()
    assert lines == [f"{e.id} {e.hash}" for e in events] and len(lines) == n
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    assert events[0].prev_hash == GENESIS_HASH


def test_empty_log_verifies(store_empty: Store) -> None:
    v = store_empty.verify_audit()
    assert v.ok and v.count == 0 and v.first_bad_event_id is None


@pytest.fixture
def store_empty(settings: Settings) -> Iterator[Store]:
    with open_store(settings) as store:
        yield store


def test_extend_event_names_its_action(settings: Settings) -> None:
    with open_store(settings) as store:
        p, _ = propose_folder(store, "ext", reason="audit test", run_id="run-1", ttl=600)
        after = store.extend(p.id, minutes=15)
        (ev,) = [e for e in store.audit_events(proposal_id=p.id) if e.from_status == "pending"]
        assert (ev.from_status, ev.to_status) == ("pending", "pending")
        assert ev.detail["action"] == "extend" and ev.detail["minutes"] == 15
        assert ev.detail["to_expires_at"] == after.expires_at.isoformat()
        assert store.verify_audit().ok
    out = subprocess.run(
        [PLACET, "audit", "--proposal", str(p.id)], capture_output=True, text=True, timeout=60
    )
    assert "action=extend" in out.stdout, out.stderr
