"""The store's passkeys, web sessions and pairing links (`placet.store.passkeys`): a
pairing link registers one passkey, once, within 10 minutes; sessions lapse and end with
their passkey; a sign count is recorded by compare-and-set; only hashes of tokens are
stored. Times are injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from placet.errors import NotFound, PolicyRefused
from placet.store import Store
from placet.store.passkeys import PAIRING_MINUTES, SESSION_HOURS, token_hash
from tests.support.db import dump

pytestmark = pytest.mark.usefixtures("store_backend")

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _register(store: Store, token: str, cid: str = "Y3JlZA", now: datetime = T0) -> int:
    key = store.register_passkey(
        token, credential_id=cid, public_key=b"\xa5\x01", sign_count=3, name="phone", now=now
    )
    return key.id


def test_a_pairing_link_registers_one_passkey_once_within_ten_minutes(store: Store) -> None:
    token = store.create_pairing(now=T0)
    late = T0 + timedelta(minutes=PAIRING_MINUTES)
    store.check_pairing(token, now=late - timedelta(microseconds=1))
    with pytest.raises(PolicyRefused, match="expired") as e:
        store.check_pairing(token, now=late)
    assert e.value.error_code == "pairing_invalid"
    with pytest.raises(PolicyRefused, match="expired"):
        _register(store, token, now=late)
    assert store.passkeys() == []

    fresh = store.create_pairing(now=T0)
    pid = _register(store, fresh, now=T0 + timedelta(minutes=9))
    with pytest.raises(PolicyRefused, match="already used"):
        _register(store, fresh, cid="b3RoZXI", now=T0 + timedelta(minutes=9))
    with pytest.raises(PolicyRefused, match="not known"):
        store.check_pairing("made-up", now=T0)
    keys = store.passkeys()
    assert [k.id for k in keys] == [pid] and keys[0].sign_count == 3
    assert store.passkey_by_credential("Y3JlZA") == keys[0]


def test_the_same_credential_cannot_be_registered_twice(store: Store) -> None:
    _register(store, store.create_pairing(now=T0))
    with pytest.raises(PolicyRefused) as e:
        _register(store, store.create_pairing(now=T0))
    assert e.value.error_code == "passkey_exists"
    assert len(store.passkeys()) == 1


def test_sessions_lapse_and_end_with_their_revoked_passkey(store: Store) -> None:
    pid = _register(store, store.create_pairing(now=T0))
    token = store.open_session(pid, now=T0)
    assert store.session_passkey(token, now=T0) is not None
    assert store.session_passkey(token, now=T0 + timedelta(hours=SESSION_HOURS)) is None
    assert store.session_passkey("forged", now=T0) is None
    other = store.open_session(pid, now=T0)
    store.close_session(other)
    assert store.session_passkey(other, now=T0) is None

    again = store.open_session(pid, now=T0)
    revoked = store.revoke_passkey(pid, now=T0)
    assert revoked.revoked_at == T0
    assert store.session_passkey(again, now=T0) is None
    assert store.passkeys() == [] and len(store.passkeys(include_revoked=True)) == 1
    assert store.passkey_by_credential("Y3JlZA") is not None  # kept for audit --verify
    with pytest.raises(NotFound):
        store.revoke_passkey(pid, now=T0)
    assert not store.use_passkey(pid, seen=3, new=4, now=T0)


def test_a_sign_count_is_used_once(store: Store) -> None:
    pid = _register(store, store.create_pairing(now=T0))
    assert store.use_passkey(pid, seen=3, new=4, now=T0)
    assert not store.use_passkey(pid, seen=3, new=5, now=T0)  # someone counted in between
    key = store.passkeys()[0]
    assert key.sign_count == 4 and key.last_used_at == T0


def test_only_hashes_of_tokens_are_stored(store: Store) -> None:
    token = store.create_pairing(now=T0)
    session = store.open_session(_register(store, token), now=T0)
    text = dump(store.settings)
    assert token not in text and session not in text
    assert token_hash(token) in text and token_hash(session) in text
