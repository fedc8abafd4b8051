"""Store basics: create/get/list/accept/discard, idempotency, caps, expiry, file modes."""

from __future__ import annotations

import stat
from datetime import timedelta

import pytest

from placet.config import Settings
from placet.errors import Expired, LimitExceeded, NotFound, WrongState
from placet.store import Store, open_store
from placet.store.db import utcnow
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")


def _create(store: Store, n: int = 0, run_id: str = "run-a", ttl: int = 600, **kw: object):
    return propose_folder(
        store,
        f"d{n}",
        reason=f"make folder {n}",
        drive_spec="local:/tmp/drive",
        run_id=run_id,
        ttl=ttl,
        **kw,
    )


def test_create_get_list_accept_discard(store: Store) -> None:
    a, created = _create(store, 1, client_name="claude-code", label="L")
    assert created and a.status == "pending" and a.client_name == "claude-code"
    assert a.created_at.tzinfo is not None and a.expires_at - a.created_at == timedelta(seconds=600)
    b, _ = _create(store, 2)
    assert store.get(a.id) == a
    assert [p.id for p in store.list()] == [a.id, b.id]
    assert [p.id for p in store.list(newest_first=True)] == [b.id, a.id]
    assert [p.id for p in store.list(after_id=a.id)] == [b.id]
    accepted = store.accept(a.id)
    assert (accepted.status, accepted.resolved_by) == ("approved", "owner")
    discarded = store.discard(b.id, reason="not now")
    assert discarded.status == "discarded"
    assert [p.id for p in store.list(["pending"])] == []
    with pytest.raises(WrongState):
        store.discard(a.id)
    with pytest.raises(NotFound):
        store.get(999)
    events = store.audit_events()
    assert [(e.proposal_id, e.from_status, e.to_status) for e in events] == [
        (a.id, None, "pending"),
        (b.id, None, "pending"),
        (a.id, "pending", "approved"),
        (b.id, "pending", "discarded"),
    ]
    assert events[3].detail == {"reason": "not now"}
    assert events[2].detail["request_hash"] == a.request_hash
    assert store.verify_audit().ok


def test_idempotent_create_returns_the_pending_one(store: Store) -> None:
    a, created = _create(store, 1)
    again, created_again = _create(store, 1, run_id="other-run")
    assert created and not created_again and again.id == a.id
    store.discard(a.id)
    fresh, created_fresh = _create(store, 1)
    assert created_fresh and fresh.id != a.id


def test_expired_but_unswept_cannot_be_accepted(store: Store) -> None:
    p, _ = _create(store, 1, ttl=60)
    later = utcnow() + timedelta(seconds=61)
    with pytest.raises(Expired):
        store.accept(p.id, now=later)
    assert store.get(p.id).status == "pending"  # nothing swept, nothing changed
    assert store.expire_due(later) == [p.id]
    expired = store.get(p.id)
    assert expired.status == "expired" and expired.request == p.request
    assert expired.evidence == p.evidence


def test_pending_caps(settings: Settings) -> None:
    capped = settings.model_copy(update={"pending_per_session": 2, "pending_total": 3})
    with open_store(capped) as store:
        _create(store, 1)
        _create(store, 2)
        with pytest.raises(LimitExceeded) as e:
            _create(store, 3)
        assert e.value.error_code == "limit_exceeded"
        assert e.value.details["cap"] == "pending_per_session"
        _create(store, 4, run_id="run-b")
        with pytest.raises(LimitExceeded) as e:
            _create(store, 5, run_id="run-c")
        assert e.value.details["cap"] == "pending_total"


def test_file_modes(settings: Settings, store_backend: str) -> None:
    with open_store(settings) as store:
        _create(store, 1)
        assert stat.S_IMODE(settings.data_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(settings.audit_anchor_path.stat().st_mode) == 0o600
        if store_backend == "postgresql":
            assert not settings.db_path.exists()  # no SQLite file beside the server
            return
        assert stat.S_IMODE(settings.db_path.stat().st_mode) == 0o600
        for side in ("-wal", "-shm"):
            p = settings.db_path.with_name(settings.db_path.name + side)
            assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_caps_count_only_unexpired_pending(settings: Settings) -> None:
    capped = settings.model_copy(update={"pending_per_session": 2, "pending_total": 3})
    t0 = utcnow()
    with open_store(capped) as store:
        _create(store, 1, ttl=60, now=t0)
        _create(store, 2, ttl=60, now=t0)
        with pytest.raises(LimitExceeded):
            _create(store, 3, ttl=60, now=t0 + timedelta(seconds=59))
        # Both expired (unswept): the session may propose again.
        p, created = _create(store, 3, ttl=60, now=t0 + timedelta(seconds=61))
        assert created and p.status == "pending"
        assert [x.status for x in store.list()] == ["pending", "pending", "pending"]
