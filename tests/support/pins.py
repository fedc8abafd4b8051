"""Pinning a passkey registered straight through the store, as the registration ceremony
of `placet web` pins the keys it registers (`placet.config.pins`)."""

from __future__ import annotations

from datetime import UTC, datetime

from placet.config.pins import editing_pins
from placet.store import Store
from placet.store.passkeys import PasskeyRecord


def register_pinned(
    store: Store, credential_id: str, public_key: bytes, name: str
) -> PasskeyRecord:
    """Register a passkey in `store` (through a pairing of its own) and pin it in the
    owner's pins file beside the store's `config.toml`: the owner's key."""
    key = store.register_passkey(
        store.create_pairing(), credential_id=credential_id, public_key=public_key,
        sign_count=0, name=name,
    )  # fmt: skip
    with editing_pins(store.settings.config_file) as pins:
        pins.pin(key.credential_id, key.public_key, key.name, datetime.now(UTC))
    return key
