"""Store execution, recovery, TTL extension, attribution and robustness, on real files and
real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from placet.config import Settings
from placet.errors import Expired, LimitExceeded, PolicyRefused, StoreError, WrongState
from placet.store import LeaseHolder, ProposalRecord, Store, open_store
from placet.store.sweeper import SWEEP_BATCH
from tests.support.db import raw_db
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ME = LeaseHolder.current()
ELSEWHERE = LeaseHolder("another-host.example", 4242, 7)


def _make(store: Store, n: int = 0, *, run_id: str = "run-a", ttl: int = 600,
          now: datetime = T0) -> ProposalRecord:  # fmt: skip
    p, _ = propose_folder(store, f"d{n}", reason="test", run_id=run_id, ttl=ttl, now=now)
    return p


def test_claim_journal_finish_and_reaccept(store: Store) -> None:
    p = _make(store)
    store.accept(p.id, now=T0)
    claimed = store.claim(p.id, holder=ME, now=T0)
    assert (claimed.status, claimed.attempt, claimed.lease_holder) == ("executing", 1, str(ME))
    assert claimed.lease_expires_at == T0 + timedelta(seconds=store.settings.lease_seconds)
    with pytest.raises(WrongState):
        store.claim(p.id, holder=ELSEWHERE, now=T0)  # already claimed
    with pytest.raises(WrongState):
        store.record_op_result(p.id, op_index=0, op={}, outcome="done", detail={},
                               holder=ELSEWHERE)  # fmt: skip
    store.record_op_result(p.id, op_index=0, op={"i": 0}, outcome="done", detail={}, holder=ME)
    store.record_op_result(p.id, op_index=1, op={"i": 1}, outcome="stale",
                           detail={"expected": "a", "found": "b"}, holder=ME)  # fmt: skip
    failed = store.finish(p.id, holder=ME, now=T0, summary={"done": 1, "stale": 1})
    assert failed.status == "failed" and failed.lease_holder is None
    assert failed.summary == {"done": 1, "stale": 1}
    assert [r.outcome for r in store.op_results(p.id)] == ["done", "stale"]

    # Re-accepting a failed proposal needs no unexpired TTL (docs/design.md section 9).
    again = store.accept(p.id, now=T0 + timedelta(days=3))
    assert again.status == "approved"
    second = store.claim(p.id, holder=ME, now=T0 + timedelta(days=3))
    assert second.attempt == 2 and store.op_results(p.id) == []  # latest attempt only
    store.record_op_result(p.id, op_index=0, op={"i": 0}, outcome="already_done", detail={},
                           holder=ME)  # fmt: skip
    store.record_op_result(p.id, op_index=1, op={"i": 1}, outcome="done", detail={}, holder=ME)
    assert store.finish(p.id, holder=ME).status == "succeeded"
    assert [(r.attempt, r.outcome) for r in store.op_results(p.id)] == [
        (2, "already_done"),
        (2, "done"),
    ]
    with pytest.raises(WrongState):
        store.accept(p.id)  # succeeded is terminal


def test_op_results_having_a_detail_key(store: Store) -> None:
    """`having=` keeps the results whose detail holds the key with a value (the temps a
    crashed run left): the same on both backends (PostgreSQL has no `json_extract`)."""
    p = _make(store)
    store.accept(p.id, now=T0)
    store.claim(p.id, holder=ME, now=T0)
    for i, detail in enumerate([{"temps": [".placet-tmp-a"]}, {}, {"temps": None}, {"x": 1}]):
        store.record_op_result(p.id, op_index=i, op={"i": i}, outcome="failed", detail=detail,
                               holder=ME)  # fmt: skip
    assert [r.op_index for r in store.op_results(p.id, having="temps")] == [0]
    assert [r.op_index for r in store.op_results(p.id, having="x")] == [3]
    with pytest.raises(ValueError):
        store.op_results(p.id, having="temps') OR 1=1 --")


def test_finish_with_missing_ops_fails(store: Store) -> None:
    p = _make(store)
    store.accept(p.id, now=T0)
    store.claim(p.id, holder=ME, now=T0)
    store.record_op_result(p.id, op_index=0, op={}, outcome="done", detail={}, holder=ME)
    assert store.finish(p.id, holder=ME, expected_ops=2).status == "failed"


def test_heartbeat_and_lapsed_lease_recovery(store: Store) -> None:
    mine, other = _make(store, 1), _make(store, 2)
    for p, h in ((mine, ME), (other, ELSEWHERE)):
        store.accept(p.id, now=T0)
        store.claim(p.id, holder=h, now=T0)
    lease = timedelta(seconds=store.settings.lease_seconds)
    # Alive here, or elsewhere: nothing is recovered before the lease lapses.
    assert store.recover_interrupted(now=T0 + lease / 2) == []
    assert store.heartbeat(mine.id, holder=ME, now=T0 + lease / 2)
    assert not store.heartbeat(mine.id, holder=ELSEWHERE, now=T0 + lease / 2)
    # `other`'s lease lapses at T0 + lease; `mine` was renewed until T0 + 1.5 lease.
    assert store.recover_interrupted(now=T0 + lease) == [other.id]
    assert store.recover_interrupted(now=T0 + lease * 1.5) == [mine.id]
    assert not store.heartbeat(mine.id, holder=ME)  # the lease is gone
    events = store.audit_events(proposal_id=other.id)
    assert (events[-1].actor, events[-1].to_status) == ("sweeper", "interrupted")
    assert events[-1].detail["why"] == "lease lapsed"
    assert events[-1].detail["holder"]["host"] == "another-host.example"
    with pytest.raises(WrongState):
        store.finish(mine.id, holder=ME)


def test_dead_holder_on_this_host_is_recovered_at_once(settings: Settings, store: Store) -> None:
    """A real process claims the proposal and exits; its lease is still valid by time, but
    the same host can see that its pid is gone. The real clock throughout: the other
    process claims with it."""
    p = _make(store, now=datetime.now(UTC))
    store.accept(p.id)
    script = textwrap.dedent(
        f"""
        from placet.config import load_settings
        from placet.store import LeaseHolder, open_store
        with open_store(load_settings()) as store:
            store.claim({p.id}, holder=LeaseHolder.current())
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    claimed = store.get(p.id)
    assert claimed.status == "executing" and claimed.lease_holder != str(ME)
    assert store.sweep().interrupted == [p.id]
    assert store.audit_events(proposal_id=p.id)[-1].detail["why"] == "holder process is gone"


def test_extend_is_capped_from_creation(store: Store) -> None:
    p = _make(store, ttl=1800)
    cap = p.created_at + timedelta(hours=store.settings.max_extend_hours)
    longer = store.extend(p.id, minutes=60, now=T0 + timedelta(minutes=10))
    assert longer.expires_at == p.expires_at + timedelta(minutes=60)
    capped = store.extend(p.id, minutes=100_000, now=T0 + timedelta(minutes=10))
    assert capped.expires_at == cap
    with pytest.raises(LimitExceeded):
        store.extend(p.id, minutes=1, now=T0 + timedelta(minutes=10))
    event = store.audit_events(proposal_id=p.id)[-1]
    assert (event.from_status, event.to_status, event.detail["capped"]) == (
        "pending",
        "pending",
        True,
    )
    with pytest.raises(Expired):
        store.extend(p.id, minutes=5, now=cap)
    q = _make(store, 2)
    store.discard(q.id, now=T0)
    with pytest.raises(WrongState):
        store.extend(q.id, minutes=5, now=T0)


def test_withdraw_only_by_the_proposing_session(store: Store) -> None:
    p = _make(store, run_id="session-1")
    with pytest.raises(PolicyRefused):
        store.withdraw(p.id, run_id="session-2", now=T0)
    w = store.withdraw(p.id, run_id="session-1", now=T0)
    assert (w.status, w.resolved_by) == ("withdrawn", "agent:session-1")


def test_duplicate_of_an_unswept_expired_proposal_creates_a_new_one(store: Store) -> None:
    old = _make(store, ttl=60)
    new = _make(store, ttl=60, now=T0 + timedelta(seconds=61))
    assert new.id != old.id
    assert store.get(old.id).status == "expired"
    ev = store.audit_events(proposal_id=old.id)[-1]
    assert (ev.actor, ev.to_status) == ("sweeper", "expired")


def test_expire_due_in_batches(settings: Settings) -> None:
    s = settings.model_copy(update={"pending_per_session": 2000, "pending_total": 2000})
    with open_store(s) as store:
        ids = [_make(store, i, ttl=60).id for i in range(SWEEP_BATCH + 20)]
        keep = _make(store, 99_999, ttl=600)
        assert store.expire_due(T0 + timedelta(seconds=60)) == ids
        assert store.expire_due(T0 + timedelta(seconds=60)) == []
        assert store.get(keep.id).status == "pending"
        assert store.verify_audit().ok


def test_datetimes_are_utc_aware_and_naive_is_refused(store: Store) -> None:
    plus2 = timezone(timedelta(hours=2))
    p = _make(store, now=datetime(2030, 1, 1, 12, 0, tzinfo=plus2))
    got = store.get(p.id)
    assert got.created_at.tzinfo is UTC
    assert got.created_at == datetime(2030, 1, 1, 10, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="naive"):
        store.accept(p.id, now=datetime(2030, 1, 1))


def test_data_version_moves_when_another_process_commits(settings: Settings, store: Store) -> None:
    before = store.data_version()
    assert store.data_version() == before
    p = _make(store)
    subprocess.run(
        [str(Path(sys.executable).with_name("placet")), "discard", str(p.id)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert store.data_version() != before
    assert store.get(p.id).status == "discarded"


def test_a_lock_held_too_long_is_a_retryable_store_error(settings: Settings) -> None:
    with open_store(settings) as s:
        p = _make(s)
    with raw_db(settings, autocommit=False) as blocker:
        blocker.begin(write=True)  # the write lock, held past the busy timeout
        try:
            with open_store(settings, busy_timeout_ms=20) as store:
                with pytest.raises(StoreError) as e:
                    store.discard(p.id)
                assert e.value.error_code == "store_busy" and e.value.retryable
                assert "database is locked" not in e.value.message
                # Reads are not blocked by a writer (WAL; PostgreSQL's MVCC).
                assert store.get(p.id).status == "pending"
        finally:
            blocker.rollback()


def test_threads_share_one_store(store: Store) -> None:
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(20):
                p = _make(store, k * 100 + i, run_id=f"t{k}")
                store.discard(p.id, now=T0)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.counts()["discarded"] == 80
    assert store.verify_audit().ok
