"""What every passkey ceremony of `placet web` checks (`placet.web.ceremonies`), with
real signatures from a software passkey (`tests.support.passkey`): user verification is
required to register, to sign in and to accept; the origin must be placet's exactly,
port included (a page on another localhost port, or on 127.0.0.1, signs its own origin);
and an answer that verifies but whose sign count does not grow past the passkey's is
refused and recorded, shown by `placet keys` and on the audit page."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from placet.store import Store
from placet.store.passkeys import open_pairing_link
from tests.support.passkey import AT, UP, SoftKey
from tests.support.pins import register_pinned
from tests.support.review import add_upload
from tests.support.rig import PLACET
from tests.support.web import Served, get

CID = "c29mdC1wYXNza2V5"


def _wrong_origins(served: Served) -> list[str]:
    port = served.config.port
    return [
        f"http://localhost:{port + 1}",  # another local port: same site, another origin
        f"http://127.0.0.1:{port}",
        "http://localhost",
        f"https://localhost:{port}",
    ]


def _options(served: Served, path: str, body: dict[str, Any] | None = None, **kw: Any) -> Any:
    status, text = served.post(path, body, **kw)
    assert status == 200, (path, status, text)
    return json.loads(text)


def test_registration_needs_user_verification_and_placets_exact_origin(
    quiet_store: Store, served: Served
) -> None:
    key = SoftKey()
    token = open_pairing_link(quiet_store, now=served.clock())
    wrong: list[dict[str, Any]] = [{"flags": UP | AT}]  # present, not verified
    wrong += [{"origin": o} for o in _wrong_origins(served)]
    for case in wrong:
        opts = _options(served, f"/pair/{token}/options")
        credential = key.registration(opts, CID, **{"origin": served.origin, **case})
        body = {"nonce": opts["nonce"], "name": "soft", "credential": credential}
        status, text = served.post(f"/pair/{token}", body)
        assert status == 410 and "passkey_refused" in text, (case, status, text)
    assert quiet_store.passkeys() == []
    opts = _options(served, f"/pair/{token}/options")  # the link is still unused
    credential = key.registration(opts, CID, origin=served.origin)
    status, text = served.post(f"/pair/{token}", {"nonce": opts["nonce"], "credential": credential})
    assert status == 200 and json.loads(text)["session"], text


def test_sign_in_needs_user_verification_and_placets_exact_origin(
    quiet_store: Store, served: Served
) -> None:
    key = SoftKey()
    register_pinned(quiet_store, CID, key.cose(), "soft")
    wrong: list[dict[str, Any]] = [{"flags": UP}]
    wrong += [{"origin": o} for o in _wrong_origins(served)]
    for case in wrong:
        opts = _options(served, "/signin/options")
        credential = key.assertion(opts, CID, **{"origin": served.origin, **case})
        status, text = served.post("/signin", {"nonce": opts["nonce"], "credential": credential})
        assert status == 403 and "passkey_refused" in text, (case, status, text)
        assert "session" not in json.loads(text)
    opts = _options(served, "/signin/options")
    credential = key.assertion(opts, CID, origin=served.origin)
    status, text = served.post("/signin", {"nonce": opts["nonce"], "credential": credential})
    assert status == 200 and json.loads(text)["session"], text


def test_an_accept_needs_user_verification_and_placets_exact_origin(
    quiet_store: Store, served: Served
) -> None:
    key = SoftKey()
    passkey = register_pinned(quiet_store, CID, key.cose(), "soft")
    session = quiet_store.open_session(passkey.id)
    rec = add_upload(quiet_store, now=served.clock())
    path = f"/p/{rec.id}"
    wrong: list[dict[str, Any]] = [{"flags": UP}]
    wrong += [{"origin": o} for o in _wrong_origins(served)]
    for case in wrong:
        shown = {"request_hash": rec.request_hash, "skip_ops": []}
        opts = _options(served, f"{path}/challenge", shown, session=session)
        credential = key.assertion(opts, CID, **{"origin": served.origin, **case})
        body = {**shown, "nonce": opts["nonce"], "credential": credential}
        status, text = served.post(f"{path}/accept", body, session=session)
        assert status == 409 and "passkey_refused" in text, (case, status, text)
    assert quiet_store.get(rec.id).status == "pending"
    assert [e.to_status for e in quiet_store.audit_events(proposal_id=rec.id)] == ["pending"]


def test_a_sign_count_that_goes_backwards_is_refused_and_recorded(
    quiet_store: Store, served: Served
) -> None:
    key = SoftKey()
    passkey = register_pinned(quiet_store, CID, key.cose(), "soft")

    def sign_in(count: int | None, *, forged: bool = False) -> tuple[int, str]:
        opts = _options(served, "/signin/options")
        credential = key.assertion(opts, CID, origin=served.origin, count=count)
        if forged:  # another key's signature: proves nothing, so no alarm
            credential["response"]["signature"] = SoftKey().assertion(
                opts, CID, origin=served.origin
            )["response"]["signature"]
        return served.post("/signin", {"nonce": opts["nonce"], "credential": credential})

    assert sign_in(7)[0] == 200
    assert quiet_store.passkeys()[0].sign_count == 7
    status, text = sign_in(3, forged=True)
    assert status == 403 and "passkey_refused" in text, text
    assert quiet_store.counter_alarms() == []
    for count in (3, 7, 0):  # below, equal, and back to none
        status, text = sign_in(count)
        assert status == 403 and "passkey_counter" in text, (count, text)
        assert "another copy of this passkey may be in use" in text
    alarms = quiet_store.counter_alarms()
    assert [(a.passkey_id, a.stored_count, a.new_count) for a in alarms] == [
        (passkey.id, 7, 0), (passkey.id, 7, 7), (passkey.id, 7, 3),
    ]  # fmt: skip
    assert quiet_store.passkeys()[0].sign_count == 7  # no refused answer moved it

    # an accept signed with a count gone back is refused and recorded the same way
    rec = add_upload(quiet_store, now=served.clock())
    session = quiet_store.open_session(passkey.id)
    shown = {"request_hash": rec.request_hash, "skip_ops": []}
    opts = _options(served, f"/p/{rec.id}/challenge", shown, session=session)
    credential = key.assertion(opts, CID, origin=served.origin, count=5)
    body = {**shown, "nonce": opts["nonce"], "credential": credential}
    status, text = served.post(f"/p/{rec.id}/accept", body, session=session)
    assert status == 409 and "passkey_counter" in text, text
    assert quiet_store.get(rec.id).status == "pending"
    assert quiet_store.counter_alarms()[0].what == f"refusing to accept proposal {rec.id}"

    # shown where the owner looks: `placet keys` and the audit page
    keys = subprocess.run(
        [str(PLACET), "keys"], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
    assert keys.returncode == 0, keys.stderr
    assert f"WARNING: passkey {passkey.id} signed with sign count 5 after 7" in keys.stdout
    status, page = get(served.url("/audit"), session)
    assert status == 200 and 'id="passkey-alarms"' in page
    assert f"placet keys revoke {passkey.id}" in page
