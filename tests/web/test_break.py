"""Adversarial probes of `placet web` (issue 15): malformed and oversized bodies from a
local process that forges any header, ids out of SQLite's range, a flood of sign-in
options, and a newcomer's missing certificate. Each must get a clear refusal (4xx or
exit 2 with a placet error code), never a 500 or a traceback, and change nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from placet.store import Store
from tests.support.review import add_upload
from tests.support.rig import PLACET
from tests.support.web import Served


def raw_post(served: Served, path: str, body: bytes) -> tuple[int, str]:
    """POST `body` as is (this server's Origin and Host), like a local process can."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(served.url(path), data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Origin", served.origin)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_deeply_nested_json_is_refused_not_a_server_error(served: Served) -> None:
    status, text = raw_post(served, "/signin", b"[" * 100_000 + b"]" * 100_000)
    assert status in (400, 403, 413), (status, text)
    assert "invalid_argument" in text


def test_an_oversized_body_is_refused_before_it_is_read(served: Served) -> None:
    status, text = raw_post(served, "/signin", b'{"nonce": "' + b"a" * 5_000_000 + b'"}')
    assert status == 413 and "limit_exceeded" in text, (status, text[:200])


def session(quiet_store: Store) -> str:
    """A signed-in session's cookie (a passkey registered through the quiet_store's own
    pairing; these probes need no signature)."""
    token = quiet_store.create_pairing()
    key = quiet_store.register_passkey(
        token, credential_id="c29tZS1rZXk", public_key=b"\x00", sign_count=0, name="probe"
    )
    return f"placet_session={quiet_store.open_session(key.id)}"


def get(served: Served, path: str, cookie: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(served.url(path), headers={"Cookie": cookie})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_an_id_beyond_sqlite_range_is_not_found(quiet_store: Store, served: Served) -> None:
    """`/p/<30 digits>` was a 500 (OverflowError binding the id); `placet show` and
    `placet accept` printed a traceback for the same id."""
    add_upload(quiet_store)
    cookie = session(quiet_store)
    big = "9" * 30
    assert get(served, f"/p/{big}", cookie)[0] == 404
    assert get(served, f"/p/{big}/status", cookie)[0] == 404
    for action in ("discard", "extend"):
        status, text = served.post(f"/p/{big}/{action}", cookie=cookie)
        assert status == 409 and "not_found" in text, (action, status, text[:200])
    status, text = served.post(f"/p/{big}/challenge", {"request_hash": "x"}, cookie=cookie)
    assert status == 409 and "not_found" in text, (status, text[:200])


def test_sign_in_options_flooded_do_not_drop_an_accept_challenge(
    quiet_store: Store, served: Served
) -> None:
    """`/signin/options` needs no session; asked 1,001 times (by a local process, which
    sets any Origin), it pushed the owner's open accept challenge out of the 1,000 kept,
    and the passkey answer was refused as challenge_invalid."""
    from placet.web.ceremonies import MAX_OPEN_CHALLENGES

    rec = add_upload(quiet_store)
    cookie = session(quiet_store)
    status, text = served.post(
        f"/p/{rec.id}/challenge", {"request_hash": rec.request_hash}, cookie=cookie
    )
    assert status == 200, text
    nonce = json.loads(text)["nonce"]
    for _ in range(MAX_OPEN_CHALLENGES + 1):
        assert served.post("/signin/options")[0] == 200
    # the answer is still awaited: a forged credential is refused as a bad signature,
    # not as an answer to no open request
    status, text = served.post(
        f"/p/{rec.id}/accept", {"nonce": nonce, "credential": {"id": "c29tZS1rZXk"}},
        cookie=cookie,
    )  # fmt: skip
    assert status == 409 and "passkey_refused" in text, text
    assert quiet_store.get(rec.id).status == "pending"


def test_a_missing_certificate_is_named_before_serving(tmp_path: Path) -> None:
    """Before: `placet web --cert MISSING --key MISSING` printed the page's https URL as
    if serving, then `placet: FileNotFoundError: [Errno 2] No such file or directory`
    (no file named, no placet error code)."""
    missing = tmp_path / "cert.pem"
    r = subprocess.run(
        [PLACET, "web", "--cert", str(missing), "--key", str(missing)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r
    assert "invalid_argument" in r.stderr and str(missing) in r.stderr
    assert "https://" not in r.stdout


HOSTILE = "</script><img src=x onerror=alert(1)>\u202egnp.exe\u200b\"'&<b>"


def test_agent_strings_are_inert_on_every_page(quiet_store: Store, served: Served) -> None:
    """Markup, a `</script>`, a javascript: name and bidi controls from the agent (client
    name, label, reason, names) and from a discard reason, on the queue, a proposal's
    page, the history and the audit: shown, never parsed, no raw control character."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    pending = add_upload(
        quiet_store, local_path=f"n/{HOSTILE}.md", name="javascript:alert(1)", reason=HOSTILE,
        client_name=HOSTILE, label=HOSTILE, now=now,
    )  # fmt: skip
    decided = add_upload(
        quiet_store, local_path="n/b.md", reason=HOSTILE, client_name=HOSTILE, now=now
    )
    cookie = session(quiet_store)
    import urllib.parse
    import urllib.request

    form = urllib.parse.urlencode({"reason": HOSTILE}).encode()
    req = urllib.request.Request(served.url(f"/p/{decided.id}/discard"), data=form)
    req.add_header("Origin", served.origin)
    req.add_header("Cookie", cookie)
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200  # the queue, after the redirect
    assert quiet_store.get(decided.id).status == "discarded"
    for path in ("/", f"/p/{pending.id}", f"/p/{decided.id}", "/history", "/audit"):
        code, page = get(served, path, cookie)
        assert code == 200, (path, code)
        body = page.split("<main>", 1)[1]
        assert "<img" not in body and "</script>" not in body and "&<b>" not in body, path
        assert not any(c in body for c in "\u202e\u200b"), path
        assert 'href="javascript:' not in body, path


def test_a_cursor_beyond_sqlite_range_is_an_empty_page(quiet_store: Store, served: Served) -> None:
    """`?after=<30 digits>` on the queue, the history and the audit was a 500
    (OverflowError binding the cursor)."""
    cookie = session(quiet_store)
    big = "9" * 30
    for path in (f"/?after={big}", f"/history?after={big}", f"/audit?after={big}"):
        code, _ = get(served, path, cookie)
        assert code == 200, (path, code)
