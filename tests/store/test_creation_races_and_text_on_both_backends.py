"""Creation and the write transactions under attack, with a real server and real
processes: a database whose default isolation is REPEATABLE READ, hostile agent strings,
creators racing for one request or the last slot under a cap, a server that drops its
connections between two creations, a proposer killed mid-call. Each must end as on SQLite:
the same records, a chain that verifies, or the same typed refusal."""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from placet.config import Settings, load_settings
from placet.errors import LimitExceeded, StoreError
from placet.store import open_store
from tests.support.db import raw_db
from tests.support.postgres import PG_USER, PgServer, drop_database, restart_pg_server
from tests.support.proposals import propose_folder

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TTL = 600
BEFORE = T0 + timedelta(seconds=TTL - 1)


def _env(home: str) -> dict[str, str]:
    """The settings' environment for a worker process: the home and `store_backend`'s
    database (the workers inherit `PGPASSWORD`)."""
    db = os.environ.get("PLACET_DB")
    return {"PLACET_HOME": home, **({"PLACET_DB": db} if db else {})}


def _default_isolation(settings: Settings, level: str) -> None:
    """Set the PostgreSQL database's default isolation (new sessions take it)."""
    with raw_db(settings) as db:
        db.execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET "
            f"default_transaction_isolation = %L', current_database(), '{level}'); END $$"
        )


def _transition_worker(home: str, who: int, barrier: object, out: str) -> None:
    from placet.errors import WrongState

    store = open_store(load_settings(_env(home)))
    ids = [p.id for p in store.list(["pending"], limit=1000)]
    rng = random.Random(who)
    wins: list[int] = []
    errors: list[str] = []
    barrier.wait(timeout=60)  # type: ignore[attr-defined]
    # Extend its own share first (pending -> pending: only the chain head is contended),
    # then accept or discard every proposal (the same rows contended: WrongState).
    for pid in ids:
        if pid % 4 == who:
            try:
                store.extend(pid, minutes=1, now=T0)
            except Exception as e:  # anything fails the test
                errors.append(f"extend: {type(e).__name__}: {e}")
    for pid in ids:
        try:
            if rng.random() < 0.5:
                store.accept(pid, now=BEFORE)
            else:
                store.discard(pid, now=BEFORE, reason=f"worker {who}")
            wins.append(pid)
        except WrongState:
            pass
        except Exception as e:  # anything else fails the test
            errors.append(f"{type(e).__name__}: {e}")
    store.close()
    Path(out).write_text(json.dumps({"wins": wins, "errors": errors}))


def _spawn(jobs: list[tuple[Callable[..., None], tuple[object, ...]]]) -> None:
    """Each (target, args) in a forked process (fork: no re-import, ~0.1 s a process
    where spawn took ~1.5 s on a loaded box); each must exit 0 within 80 s. Any still
    running after a failure is killed."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=target, args=args) for target, args in jobs]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=80)
            assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()


@pytest.mark.parametrize("level", ["repeatable read", "serializable"])
@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
@pytest.mark.timeout(90)
def test_transitions_race_on_a_database_whose_default_is_not_read_committed(
    store_backend: str, settings: Settings, tmp_path: Path, level: str
) -> None:
    """Each write transaction's snapshot must be taken after the write lock is granted,
    which only READ COMMITTED gives; at a REPEATABLE READ or SERIALIZABLE default a
    transition read the chain head of before the lock (a duplicate audit id, a
    unique-key error). Reads keep their REPEATABLE READ snapshot."""
    _default_isolation(settings, level)
    n, procs = 40, 4
    with open_store(settings) as store:
        for i in range(n):
            propose_folder(store, f"d{i}", run_id="racer", ttl=TTL, now=T0)
    home = os.environ["PLACET_HOME"]
    barrier = multiprocessing.get_context("fork").Barrier(procs)
    outs = [tmp_path / f"out{w}.json" for w in range(procs)]
    _spawn([(_transition_worker, (home, w, barrier, str(outs[w]))) for w in range(procs)])
    results = [json.loads(o.read_text()) for o in outs]
    assert [r["errors"] for r in results] == [[]] * procs
    assert sorted(pid for r in results for pid in r["wins"]) == list(range(1, n + 1))
    with open_store(settings) as store:
        verification = store.verify_audit()
        assert verification.ok and verification.count == 3 * n, verification.message
        with store.engine.connect() as conn, conn.begin():
            (read,) = conn.exec_driver_sql("SHOW transaction_isolation").one()
        with store.engine.connect() as conn:
            conn.execution_options(placet_begin="IMMEDIATE")
            with conn.begin():
                (write,) = conn.exec_driver_sql("SHOW transaction_isolation").one()
    assert (read, write) == ("repeatable read", "read committed")


# Text every backend must store and hash alike: line breaks, quotes, backslashes, dollar
# quoting, control and format characters, separators, non-BMP, and a very long string.
HOSTILE = {
    "crlf": "a\r\nb\rc\n",
    "quotes": "'\"` ''; DROP TABLE proposal; --",
    "backslashes": "\\ \\\\ \\x00 \\u0000 \\n",
    "dollars": "$$ $x$ $1 $$; END $$",
    "controls": "\x01\x1b[2J\x7f\x9b",
    "format": "\ufeff\u200b\u202e\u2028\u2029",
    "non-bmp": "🙂𝄞\U0010fffd",
    "long": "é" * 100_000,
}
TEXT_FIELDS = ("reason", "client_name", "client_version", "label", "run_id", "drive_spec")


def _expected_first_hash(text: str, fields: dict[str, str]) -> str:
    """The first creation event's hash as Python's chain computes it (`placet.store.audit`),
    for `propose_folder(store, text, **fields, ttl=TTL, now=T0)` on an empty store: the same
    on both backends."""
    from placet.schema import canonical_json, request_hash
    from placet.store.audit import GENESIS_HASH, chain_hash, event_content
    from placet.store.records import EventFacts

    evidence = {"remote": {"exists": False}}
    rh = request_hash("mkdir", {"kind": "mkdir", "remote_parent": "", "name": text}, evidence)
    detail = {
        "kind": "mkdir",
        "expires_at": (T0 + timedelta(seconds=TTL)).isoformat(),
        "client_name": fields["client_name"],
        "client_version": fields["client_version"],
    }
    facts = EventFacts(1, rh, f"agent:{fields['run_id']}", None, "pending", T0)
    content = event_content(event_id=1, facts=facts, detail_json=canonical_json(detail))
    return chain_hash(GENESIS_HASH, content)


@pytest.mark.usefixtures("store_backend")
@pytest.mark.parametrize("what", list(HOSTILE))
def test_hostile_text_is_stored_and_hashed_alike_on_both_backends(
    settings: Settings, what: str
) -> None:
    text = HOSTILE[what]
    fields = {f: f"{f}:{text}" for f in TEXT_FIELDS}
    with open_store(settings) as store:
        made, created = propose_folder(store, text, ttl=TTL, now=T0, **fields)
        again, created_again = propose_folder(store, text, ttl=TTL, now=T0, **fields)
        assert created and not created_again and again.id == made.id
        stored = store.get(made.id)
        assert stored == made and stored.request["name"] == text
        assert {f: getattr(stored, f) for f in TEXT_FIELDS} == fields
        (event,) = store.audit_events()
        assert event.hash == _expected_first_hash(text, fields)
        assert event.detail["client_name"] == fields["client_name"]
        verification = store.verify_audit()
        assert verification.ok and verification.count == 1, verification.message


UNSTORABLE = {"nul": "a\x00b", "lone surrogate": "a\ud800b"}


@pytest.mark.usefixtures("store_backend")
@pytest.mark.parametrize("field", [*TEXT_FIELDS, "name"])
@pytest.mark.parametrize("what", list(UNSTORABLE))
def test_text_a_backend_cannot_store_is_refused_alike(
    settings: Settings, field: str, what: str
) -> None:
    """PostgreSQL's text cannot hold U+0000 and no UTF-8 holds a lone surrogate: such text
    is refused by a UsageError naming the field, on both backends, and nothing is written.
    (A NUL inside the request is stored as JSON's `\\u0000` escape: not refused.)"""
    from placet.errors import UsageError

    text = UNSTORABLE[what]
    kw = {} if field == "name" else {field: text}
    with open_store(settings) as store:
        if field == "name" and what == "nul":
            made, created = propose_folder(store, text, ttl=TTL, now=T0)
            assert created and store.get(made.id).request["name"] == text
            assert store.verify_audit().ok
            return
        with pytest.raises(UsageError) as refused:
            propose_folder(store, text if field == "name" else "n", ttl=TTL, now=T0, **kw)
        assert refused.value.details["field"] == ("request" if field == "name" else field)
        assert store.list() == [] and store.audit_events() == []
        made, created = propose_folder(store, "after", ttl=TTL, now=T0)
        assert created and store.verify_audit().ok


@pytest.mark.usefixtures("store_backend")
def test_a_lone_surrogate_in_an_op_stored_by_reference_is_refused(settings: Settings) -> None:
    from placet.errors import UsageError

    request = {"kind": "sync", "ops": [{"index": 0, "kind": "upload", "path": "a\udcffb"}]}
    with open_store(settings) as store:
        with pytest.raises(UsageError) as refused:
            store.create_proposal(
                kind="sync",
                request=request,
                evidence={},
                reason="r",
                drive_spec="local:/tmp/x",
                run_id="run-a",
                ttl_seconds=TTL,
            )
        assert refused.value.details == {"field": "request", "character": "\\udcff"}
        assert store.list() == [] and store.audit_events() == []


def _propose_worker(home: str, name: str, run_id: str, barrier: object, out: str) -> None:
    from placet.errors import LimitExceeded

    store = open_store(load_settings(_env(home)))
    barrier.wait(timeout=60)  # type: ignore[attr-defined]
    try:
        made, created = propose_folder(store, name, run_id=run_id, ttl=TTL, now=T0)
        result: dict[str, object] = {"id": made.id, "created": created}
    except LimitExceeded as e:
        result = {"limit": e.details["cap"]}
    except Exception as e:  # anything else fails the test
        result = {"error": f"{type(e).__name__}: {e}"}
    store.close()
    Path(out).write_text(json.dumps(result))


def _race(tmp_path: Path, args: list[tuple[str, str]]) -> list[dict[str, object]]:
    """`_propose_worker` in one process per (name, run id), released together."""
    home = os.environ["PLACET_HOME"]
    barrier = multiprocessing.get_context("fork").Barrier(len(args))
    outs = [tmp_path / f"out{w}.json" for w in range(len(args))]
    _spawn(
        [
            (_propose_worker, (home, name, run, barrier, str(out)))
            for (name, run), out in zip(args, outs, strict=True)
        ]
    )
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.usefixtures("store_backend")
@pytest.mark.timeout(90)
def test_eight_processes_proposing_the_same_request_make_one_proposal(
    settings: Settings, tmp_path: Path
) -> None:
    with open_store(settings):
        pass  # migrated before the race
    results = _race(tmp_path, [("same", f"run-{w}") for w in range(8)])
    assert not [r for r in results if "id" not in r]
    assert sorted(bool(r["created"]) for r in results) == [False] * 7 + [True]
    assert {r["id"] for r in results} == {1}
    with open_store(settings) as store:
        assert [p.id for p in store.list()] == [1]
        verification = store.verify_audit()
        assert verification.ok and verification.count == 1, verification.message


@pytest.mark.usefixtures("store_backend")
@pytest.mark.parametrize("cap", ["pending_per_session", "pending_total"])
@pytest.mark.timeout(90)
def test_eight_processes_race_for_the_last_slot_under_a_cap(
    settings: Settings, tmp_path: Path, cap: str
) -> None:
    """One slot left under `cap`: exactly one of 8 simultaneous creators gets it, the
    other 7 get LimitExceeded naming that cap; the tally and the chain stay right."""
    limit = 5
    home = Path(os.environ["PLACET_HOME"])
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.toml").write_text(f"{cap} = {limit}\n")
    per_run = cap == "pending_per_session"
    with open_store(load_settings()) as store:
        for i in range(limit - 1):
            propose_folder(store, f"old{i}", run_id="racer" if per_run else f"old-{i}",
                           ttl=TTL, now=T0)  # fmt: skip
    results = _race(tmp_path, [(f"new{w}", "racer" if per_run else f"run-{w}") for w in range(8)])
    assert not [r for r in results if "error" in r]
    assert sorted(str(r.get("limit")) for r in results if "id" not in r) == [cap] * 7
    assert [r["created"] for r in results if "id" in r] == [True]
    with open_store(load_settings()) as store:
        assert len(store.list(["pending"])) == limit
        verification = store.verify_audit()
        assert verification.ok and verification.count == limit, verification.message
        with raw_db(settings) as db:
            (total,) = db.execute("SELECT n FROM pending_tally WHERE scope = 'total'").fetchone()
        assert total == limit


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("then", ["create", "accept"])
def test_a_server_restart_between_two_writes_fails_retryable_or_succeeds(
    store_backend: str, settings: Settings, pg_server: PgServer, then: str
) -> None:
    """The server restarted (every session ended) within a second of the store's last
    use, so its pooled connections are not pinged: the next write either succeeds or
    fails with a retryable StoreError and writes nothing, and the one after succeeds."""
    with open_store(settings) as store:
        first, _ = propose_folder(store, "before", ttl=TTL, now=T0)
        restart_pg_server(pg_server)

        def write() -> object:
            if then == "accept":
                return store.accept(first.id, now=T0)
            return propose_folder(store, "after", ttl=TTL, now=T0)[0]

        try:
            write()
        except StoreError as e:
            assert e.retryable, e
            write()
        names = [p.request["name"] for p in store.list()]
        assert names == (["before"] if then == "accept" else ["before", "after"])
        verification = store.verify_audit()
        assert verification.ok and verification.count == 2, verification.message


def _proposer_loop(home: str, who: int) -> None:
    """Propose distinct folders until killed. A new session id every 50 proposals keeps a
    fast worker under the per-session cap (100 pending) however late the kill comes; a
    cap reached all the same is a clean refusal, and the worker waits for its kill."""
    store = open_store(load_settings(_env(home)))
    for i in itertools.count():
        try:
            propose_folder(store, f"w{who}-{i}", run_id=f"run-{who}-{i // 50}", ttl=TTL, now=T0)
        except LimitExceeded:
            time.sleep(0.01)


def _assert_whole(settings: Settings) -> None:
    """Nothing half written: every proposal has exactly its creation event, the pending
    tally counts them, and the chain verifies."""
    with open_store(settings) as store:
        proposals = store.list(limit=100_000)
        events = store.audit_events()
        assert sorted(e.proposal_id for e in events) == sorted(p.id for p in proposals)
        assert all(e.from_status is None for e in events)
        with raw_db(settings) as db:
            row = db.execute("SELECT n FROM pending_tally WHERE scope = 'total'").fetchone()
        assert (row[0] if row else 0) == len(proposals)
        verification = store.verify_audit()
        assert verification.ok and verification.count == len(events), verification.message


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.usefixtures("store_backend")
@pytest.mark.timeout(90)
def test_proposers_killed_mid_call_leave_nothing_half_written(settings: Settings) -> None:
    with open_store(settings) as store:
        propose_folder(store, "first", ttl=TTL, now=T0)

    def count() -> int:
        with raw_db(settings) as db:
            return int(db.execute("SELECT count(*) FROM proposal").fetchone()[0])

    ctx = multiprocessing.get_context("fork")
    home = os.environ["PLACET_HOME"]
    for _ in range(3):
        procs = [ctx.Process(target=_proposer_loop, args=(home, w)) for w in range(3)]
        for p in procs:
            p.start()
        floor = count() + 15
        _wait_for(lambda floor=floor: count() >= floor, "proposals")  # type: ignore[misc]
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)  # type: ignore[arg-type]
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == -signal.SIGKILL
        _assert_whole(settings)


def _propose_one(home: str) -> None:
    store = open_store(load_settings(_env(home)))
    propose_folder(store, "blocked", ttl=TTL, now=T0)


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("first", [True, False], ids=["first-event", "later-event"])
@pytest.mark.timeout(60)
def test_a_proposer_killed_while_its_call_waits_for_the_lock(
    store_backend: str, settings: Settings, first: bool
) -> None:
    """Killed while the server runs its creation (waiting for the write lock): the server
    still completes it once the lock is free, but the proposer never anchors it. The
    chain must verify (an unanchored tail is no tampering, even of the first event), and
    proposing the same request again gives that proposal back."""
    with open_store(settings) as store:
        if not first:
            propose_folder(store, "before", ttl=TTL, now=T0)
    ctx = multiprocessing.get_context("fork")
    with raw_db(settings, autocommit=False) as blocker:
        blocker.begin(write=True)
        try:
            proc = ctx.Process(target=_propose_one, args=(os.environ["PLACET_HOME"],))
            proc.start()

            def waiting() -> bool:
                with raw_db(settings) as db:
                    return bool(
                        db.execute(
                            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                            "AND NOT granted"
                        ).fetchone()[0]
                    )

            _wait_for(waiting, "the proposer to wait for the write lock")
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
            proc.join(timeout=30)
        finally:
            blocker.rollback()
    _wait_for(lambda: not waiting(), "the killed proposer's call to end")
    _assert_whole(settings)
    with open_store(settings) as store:
        names = [p.request["name"] for p in store.list()]
        again, created = propose_folder(store, "blocked", ttl=TTL, now=T0)
        assert names[-1:] == ["blocked"] and not created and again.request["name"] == "blocked"
        assert store.verify_audit().ok


@pytest.mark.usefixtures("store_backend")
@pytest.mark.parametrize(
    "config", ["pending_total = 100000000000000000000", "pending_per_session = 9223372036854775808"]
)
def test_a_cap_beyond_64_bits_is_no_cap(config: str) -> None:
    """The config bounds the caps from below only; one past PostgreSQL's BIGINT made the
    creation function's call fail (no such function for a NUMERIC argument) on every
    proposal, where SQLite creates."""
    home = Path(os.environ["PLACET_HOME"])
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.toml").write_text(config + "\n")
    with open_store(load_settings()) as store:
        made, created = propose_folder(store, "x", ttl=TTL, now=T0)
        assert created and store.get(made.id) == made and store.verify_audit().ok


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
def test_a_creation_whose_server_session_is_killed_mid_call_is_retryable(
    store_backend: str, settings: Settings
) -> None:
    """The server session running the creation function is ended while the call waits
    for the write lock (`pg_terminate_backend`, as an administrator or a crash would):
    the proposer gets a retryable StoreError, nothing was written, and the next try
    creates."""
    import threading

    with open_store(settings) as store:
        propose_folder(store, "before", ttl=TTL, now=T0)
        outcome: list[BaseException | None] = []

        def propose() -> None:
            try:
                propose_folder(store, "killed", ttl=TTL, now=T0)
                outcome.append(None)
            except BaseException as e:  # handed to the test thread
                outcome.append(e)

        waiter = "FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        with raw_db(settings, autocommit=False) as blocker:
            blocker.begin(write=True)
            try:
                thread = threading.Thread(target=propose)
                thread.start()
                with raw_db(settings) as db:
                    _wait_for(
                        lambda: bool(db.execute(f"SELECT count(*) {waiter}").fetchone()[0]),
                        "the creation to wait for the write lock",
                    )
                    db.execute(f"SELECT pg_terminate_backend(pid) {waiter}")
                thread.join(timeout=30)
            finally:
                blocker.rollback()
        (error,) = outcome
        assert isinstance(error, StoreError) and error.retryable, error
        assert [p.request["name"] for p in store.list()] == ["before"]
        _, created = propose_folder(store, "killed", ttl=TTL, now=T0)
        assert created
        verification = store.verify_audit()
        assert verification.ok and verification.count == 2, verification.message


def _accept_loop(home: str, total: int) -> None:
    """Accept pending proposals as they come until `total` are approved."""
    from placet.errors import WrongState

    store = open_store(load_settings(_env(home)))
    while len(store.list(["approved"], limit=total + 1)) < total:
        for p in store.list(["pending"], limit=50):
            with contextlib.suppress(WrongState):  # the other acceptor was first
                store.accept(p.id, now=T0)


def _propose_n(home: str, who: int, n: int) -> None:
    store = open_store(load_settings(_env(home)))
    for i in range(n):
        propose_folder(store, f"w{who}-{i}", run_id=f"run-{who}", ttl=TTL, now=T0)


@pytest.mark.usefixtures("store_backend")
@pytest.mark.timeout(90)
def test_creations_and_transitions_interleave_on_one_chain(settings: Settings) -> None:
    """Two processes create (on PostgreSQL through the server-side function) while two
    accept (the general write path): one chain, each proposal created then approved."""
    with open_store(settings):
        pass
    home = os.environ["PLACET_HOME"]
    _spawn(
        [(_propose_n, (home, w, 60)) for w in range(2)]
        + [(_accept_loop, (home, 120)) for _ in range(2)]
    )
    with open_store(settings) as store:
        proposals = store.list(limit=1000)
        assert len(proposals) == 120 and {p.status for p in proposals} == {"approved"}
        verification = store.verify_audit()
        assert verification.ok and verification.count == 240, verification.message


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
def test_a_database_whose_default_client_encoding_is_not_utf8(
    store_backend: str, settings: Settings
) -> None:
    """`ALTER DATABASE ... SET client_encoding = 'LATIN1'`: psycopg would encode every
    parameter as Latin-1 and fail (a raw UnicodeEncodeError) on text SQLite stores; placet's
    sessions ask for UTF-8 whatever the default."""
    with raw_db(settings) as db:
        db.execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET client_encoding = %L', "
            "current_database(), 'LATIN1'); END $$"
        )
    fields = {f: f"{f}:{HOSTILE['non-bmp']}日本" for f in TEXT_FIELDS}
    with open_store(settings) as store:
        made, created = propose_folder(store, "日本🙂", ttl=TTL, now=T0, **fields)
        assert created and store.get(made.id) == made
        assert store.accept(made.id, now=T0).status == "approved"
        (event, _) = store.audit_events()
        assert event.hash == _expected_first_hash("日本🙂", fields)
        assert store.verify_audit().ok


@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII"])
def test_a_database_not_in_utf8_is_refused_at_open(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    """A LATIN1 database stored "Zoë" and failed on "日" (some creations only); SQL_ASCII
    stores bytes unchecked. Either is refused when the store opens, before migrating."""
    name = f"placet_{encoding.lower()}_{os.getpid()}"
    with psycopg.connect(
        host=pg_server.host, port=pg_server.port, user=PG_USER,
        password=pg_server.password, dbname="postgres", autocommit=True,
    ) as admin:  # fmt: skip
        admin.execute(f"CREATE DATABASE {name} ENCODING '{encoding}' TEMPLATE template0 LOCALE 'C'")
    url = pg_server.url(name)
    try:
        monkeypatch.setenv("PLACET_DB", url)
        monkeypatch.setenv("PGPASSWORD", pg_server.password)
        with pytest.raises(StoreError) as refused:
            open_store(load_settings())
        assert refused.value.details["server_encoding"] == encoding
        assert "ENCODING 'UTF8'" in str(refused.value)
    finally:
        drop_database(pg_server, url)
