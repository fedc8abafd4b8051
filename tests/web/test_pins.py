"""Pinned passkeys in `placet web` (`placet.config.pins`): the registration ceremony pins
the key it registers, beside config.toml; a pairing link made in the database alone
registers nothing; a passkey whose pin was taken back signs in and approves nothing."""

from __future__ import annotations

import json
import stat

from placet.config.pins import editing_pins, key_sha256, pins_path, read_pins
from placet.store import Store
from tests.support.review import add_upload
from tests.support.web import Served, Tab, browser, pair, tab, visit
from tests.web.test_refusals import SIGN_IN, approvals, send, sign

__all__ = ["browser", "tab"]


def test_pairing_pins_the_key_beside_config_toml(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    pair(tab, served)
    (key,) = quiet_store.passkeys()
    path = pins_path(quiet_store.settings.config_file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    pins = read_pins(quiet_store.settings.config_file)
    pin = pins.pin_of(key.credential_id)
    assert pin is not None and pin.key_sha256 == key_sha256(key.public_key)
    assert pin.unpinned_at is None and pins.pairings == []  # the link was taken


def test_a_pairing_link_made_in_the_database_alone_registers_nothing(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    """A process that writes the database inserts a pairing link of its own; the page
    refuses it, since `placet web pair` did not record it in the pins file."""
    token = quiet_store.create_pairing(now=served.clock())
    page = tab.page.goto(served.url(f"/pair/{token}"))
    assert page is not None and page.status == 410
    assert "not made by" in tab.page.content()
    status, text = served.post(f"/pair/{token}/options")
    assert status == 410 and "pairing_invalid" in text and "placet web pair" in text
    assert quiet_store.passkeys() == []


def test_an_unpinned_passkey_signs_in_and_approves_nothing(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    pair(tab, served)  # signed in, pinned
    visit(tab, served.url(f"/p/{a.id}"))
    body = sign(tab, a.id, a.request_hash)
    (key,) = quiet_store.passkeys()
    with editing_pins(quiet_store.settings.config_file) as pins:
        assert pins.unpin(key.credential_id, served.clock())
    got = send(tab, a.id, body)
    assert got["status"] == 409 and "passkey_not_pinned" in got["text"], got
    assert "was unpinned" in got["text"]
    refused = tab.page.evaluate(SIGN_IN)
    assert "passkey_not_pinned" in refused, refused
    assert approvals(quiet_store, a.id) == 0


def test_a_corrupt_pins_file_refuses_sign_in_options_as_json(served: Served) -> None:
    """Bytes that are not UTF-8, JSON nested past the parser's depth, a pins file of
    another shape, a folder in its place: the sign-in options are refused as JSON naming
    ``config_error``, the file and what to do, and the file is left as it was."""
    path = pins_path(served.settings.config_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    for bad in (
        b"\xff\xfe not utf-8",
        b"[" * 200_000,
        b'{"placet_pinned_passkeys": 1, "passkeys": 7}',
    ):
        path.write_bytes(bad)
        status, text = served.post("/signin/options")
        assert status == 409, (status, text[:300])
        body = json.loads(text)
        assert body["ok"] is False and body["code"] == "config_error", body
        assert str(path) in body["message"] and "placet keys pin" in body["message"]
        assert path.read_bytes() == bad
    path.unlink()
    path.mkdir()
    status, text = served.post("/signin/options")
    assert status == 409 and json.loads(text)["code"] == "config_error", (status, text[:300])
