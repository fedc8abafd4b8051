"""Stateful test of the lifecycle: random sequences of every store operation, on a real
SQLite file, never make a transition docs/design.md section 4 lacks; every status change has
exactly one audit event; the audit chain verifies after every step.

The allowed transitions are written out here from the diagram, on purpose not imported
from `placet.store.lifecycle`, so a wrong table in the store cannot make this test agree
with it.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from placet.config import load_settings
from placet.errors import Expired, LimitExceeded, PolicyRefused, WrongState
from placet.store import LeaseHolder, ProposalRecord, open_store
from tests.support.postgres import PgServer, drop_database, migrated_database
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")

# docs/design.md section 4, transcribed by hand. (None, pending) is creation; (pending, pending)
# is the owner extending the TTL (audited, no status change).
ALLOWED = {
    (None, "pending"),
    ("pending", "approved"),
    ("pending", "discarded"),
    ("pending", "expired"),
    ("pending", "withdrawn"),
    ("pending", "pending"),
    ("approved", "executing"),
    ("executing", "succeeded"),
    ("executing", "failed"),
    ("executing", "interrupted"),
    ("interrupted", "approved"),
    ("failed", "approved"),
}

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ME = LeaseHolder.current()
HOLDERS = [
    ME,  # alive on this host: only a lapsed lease recovers it
    LeaseHolder("another-host.example", 4242, 7),  # elsewhere: only a lapsed lease
    LeaseHolder(socket.gethostname(), os.getpid(), ME.start_time + 1),  # pid reused: dead
]
OUTCOMES = ["done", "already_done", "stale", "failed", "skipped"]


def _any(m: Lifecycle) -> bool:
    return bool(m.seen)


class Lifecycle(RuleBasedStateMachine):
    server: PgServer | None = None
    """When set, each example runs on a fresh database of this PostgreSQL server."""

    def __init__(self) -> None:
        super().__init__()
        self.home = tempfile.mkdtemp(prefix="placet-lifecycle-")
        env = {"PLACET_HOME": self.home}
        self.url: str | None = None
        if self.server is not None:
            env["PLACET_DB"] = self.url = migrated_database(self.server)
        s = load_settings(env)
        s = s.model_copy(update={"pending_per_session": 3, "pending_total": 5})
        self.store = open_store(s)
        self.now = T0
        self.seen: dict[int, str] = {}
        self.last_event = 0
        self.steps = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.home, ignore_errors=True)
        if self.server is not None and self.url is not None:
            drop_database(self.server, self.url)

    def _get(self, pid: int) -> ProposalRecord:
        return self.store.get(pid)

    def _pick(self, data: st.DataObject, *statuses: str) -> int:
        """Mostly a proposal in one of `statuses` (so real transitions happen), sometimes
        any proposal (so refusals are exercised too)."""
        fitting = sorted(pid for pid, s in self.seen.items() if s in statuses)
        if fitting and data.draw(st.integers(0, 3), label="fitting?"):
            return data.draw(st.sampled_from(fitting), label="pid")
        return data.draw(st.sampled_from(sorted(self.seen)), label="pid")

    @initialize()
    def start(self) -> None:
        assert self.store.verify_audit().ok

    @rule(n=st.integers(0, 6), run=st.sampled_from(["r1", "r2"]), ttl=st.integers(1, 1800))
    def create(self, n: int, run: str, ttl: int) -> None:
        try:
            p, _created = propose_folder(
                self.store, f"dir{n}", reason=f"folder {n}", run_id=run, ttl=ttl, now=self.now
            )
        except LimitExceeded:
            return
        assert p.status == "pending" and p.expires_at > self.now

    @precondition(_any)
    @rule(data=st.data())
    def accept(self, data: st.DataObject) -> None:
        pid = self._pick(data, "pending", "failed", "interrupted")
        before = self._get(pid)
        try:
            after = self.store.accept(pid, now=self.now)
        except Expired:
            assert before.status == "pending" and before.expires_at <= self.now
            return
        except WrongState:
            assert before.status not in ("pending", "failed", "interrupted")
            return
        assert after.status == "approved"
        if before.status == "pending":
            assert before.expires_at > self.now, "an expired proposal was accepted"

    @precondition(_any)
    @rule(data=st.data(), holder=st.sampled_from(HOLDERS))
    def claim(self, data: st.DataObject, holder: LeaseHolder) -> None:
        pid = self._pick(data, "approved")
        try:
            p = self.store.claim(pid, holder=holder, now=self.now)
        except WrongState:
            return
        assert p.status == "executing" and p.lease_holder == str(holder)

    @precondition(_any)
    @rule(data=st.data(), outcomes=st.lists(st.sampled_from(OUTCOMES), max_size=3),
          right_holder=st.booleans())  # fmt: skip
    def finish(self, data: st.DataObject, outcomes: list[str], right_holder: bool) -> None:
        pid = self._pick(data, "executing")
        p = self._get(pid)
        holder = LeaseHolder.parse(p.lease_holder) if p.lease_holder else ME
        if not right_holder:
            holder = LeaseHolder("impostor.example", 1, 1)
        try:
            for i, outcome in enumerate(outcomes):
                self.store.record_op_result(
                    pid, op_index=i, op={"i": i}, outcome=outcome, detail={}, holder=holder
                )
            done = self.store.finish(pid, holder=holder, now=self.now)
        except WrongState:
            assert p.status != "executing" or not right_holder
            return
        good = all(o in ("done", "already_done") for o in outcomes)
        assert done.status == ("succeeded" if good else "failed")
        assert [r.outcome for r in self.store.op_results(pid)] == outcomes

    @precondition(_any)
    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        pid = self._pick(data, "pending")
        before = self._get(pid)
        try:
            self.store.discard(pid, reason="no", now=self.now)
        except WrongState:
            assert before.status != "pending"

    @precondition(_any)
    @rule(data=st.data(), run=st.sampled_from(["r1", "r2"]))
    def withdraw(self, data: st.DataObject, run: str) -> None:
        pid = self._pick(data, "pending")
        before = self._get(pid)
        try:
            self.store.withdraw(pid, run_id=run, now=self.now)
        except WrongState:
            assert before.status != "pending"
        except PolicyRefused:
            assert before.run_id != run

    @precondition(_any)
    @rule(data=st.data(), minutes=st.integers(1, 2000))
    def extend(self, data: st.DataObject, minutes: int) -> None:
        pid = self._pick(data, "pending")
        before = self._get(pid)
        try:
            after = self.store.extend(pid, minutes=minutes, now=self.now)
        except (WrongState, Expired, LimitExceeded):
            return
        assert after.expires_at > before.expires_at
        assert after.expires_at <= before.created_at + timedelta(hours=24)

    @precondition(_any)
    @rule(data=st.data())
    def interrupt(self, data: st.DataObject) -> None:
        pid = self._pick(data, "executing")
        before = self._get(pid)
        try:
            self.store.mark_interrupted(pid, actor="owner", now=self.now)
        except WrongState:
            assert before.status != "executing"

    @rule()
    def sweep(self) -> None:
        result = self.store.sweep(now=self.now)
        for pid in result.expired:
            assert self._get(pid).expires_at <= self.now

    @rule()
    def recover(self) -> None:
        for pid in self.store.recover_interrupted(now=self.now):
            assert self._get(pid).status == "interrupted"

    @rule(seconds=st.sampled_from([1, 29, 31, 600, 1801, 86400]))
    def advance_clock(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @invariant()
    def every_change_is_one_allowed_audited_transition(self) -> None:
        new_events = self.store.audit_events(after_id=self.last_event)
        per_proposal = Counter(e.proposal_id for e in new_events)
        assert all(n == 1 for n in per_proposal.values()), per_proposal
        current = {p.id: p.status for p in self.store.list(limit=10_000)}
        by_pid = {e.proposal_id: e for e in new_events}
        for pid, status in current.items():
            old = self.seen.get(pid)
            event = by_pid.get(pid)
            if old == status:
                # No change, or an extension (the only audited self-loop).
                assert event is None or (event.from_status, event.to_status) == (
                    "pending",
                    "pending",
                )
                continue
            assert event is not None, f"proposal {pid} went {old} -> {status} unaudited"
            assert (event.from_status, event.to_status) == (old, status)
            assert (old, status) in ALLOWED, f"transition {old} -> {status} is not in the diagram"
        for e in new_events:
            assert (e.from_status, e.to_status) in ALLOWED
        self.seen = current
        if new_events:
            self.last_event = new_events[-1].id
        verification = self.store.verify_audit()
        assert verification.ok, verification.message

    @invariant()
    def pending_tally_matches_the_rows(self) -> None:
        # Through the store's own pool: a new connection per step costs PostgreSQL's
        # password exchange each time.
        with self.store.engine.connect() as con:
            rows = con.exec_driver_sql("SELECT scope, n FROM pending_tally").all()
            tally = {k: n for k, n in rows if n}
            real = dict(
                con.exec_driver_sql(
                    "SELECT 'run:' || run_id, count(*) FROM proposal "
                    "WHERE status = 'pending' GROUP BY run_id"
                ).all()
            )
        if real:
            real["total"] = sum(real.values())
        assert tally == real


_HYPOTHESIS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PG_EXAMPLES = 15
"""Examples on PostgreSQL: the store's code is the same on both backends (what differs is
the SQL each driver runs, which every rule reaches within a few examples), and each step
there costs round trips to a server, so 60 would add over a minute to the suite."""


def test_lifecycle(store_backend: str, request: pytest.FixtureRequest) -> None:
    """The state machine above, on each backend (PGPASSWORD set by `store_backend`)."""
    on_pg = store_backend == "postgresql"

    class OnBackend(Lifecycle):
        server = request.getfixturevalue("pg_server") if on_pg else None

    examples = PG_EXAMPLES if on_pg else _HYPOTHESIS.max_examples
    run_state_machine_as_test(OnBackend, settings=settings(_HYPOTHESIS, max_examples=examples))
