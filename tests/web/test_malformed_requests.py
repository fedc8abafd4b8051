"""`placet web` against bad requests: malformed and oversized bodies from a
local process that forges any header, ids out of SQLite's range, a flood of sign-in
options, and a newcomer's missing certificate. Each must get a clear refusal (4xx or
exit 2 with a placet error code), never a 500 or a traceback, and change nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from placet.store import Store
from placet.store.db import utcnow
from placet.web.session import SESSION_HEADER
from tests.support.pins import register_pinned
from tests.support.review import add_upload
from tests.support.rig import PLACET
from tests.support.web import Served
from tests.support.web import get as get_url


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


def _exchange(served: Served, head: bytes, body: bytes) -> tuple[int, str]:
    """Send a request's `head`, then `body`, on one socket, then read the whole answer.
    What is sent is never more than the server reads before it answers, so it closes
    with nothing unread and the answer cannot be lost to a reset
    (docs/decisions/0029-web-passkeys.md)."""
    import socket

    with socket.create_connection(("127.0.0.1", served.config.port), timeout=30) as s:
        s.sendall(head + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2].decode()


def _head(served: Served, extra: str) -> bytes:
    return (
        f"POST /signin HTTP/1.1\r\nHost: {served.config.authority}\r\n"
        f"Origin: {served.origin}\r\nContent-Type: application/json\r\n"
        f"Connection: close\r\n{extra}\r\n"
    ).encode()


def test_an_oversized_body_is_refused_before_it_is_read(served: Served) -> None:
    """A Content-Length over the cap is answered 413 before any of the body is sent."""
    status, text = _exchange(served, _head(served, "Content-Length: 5000000\r\n"), b"")
    assert status == 413 and "limit_exceeded" in text and "none of it was read" in text, (
        status,
        text[:200],
    )


def test_an_oversized_stream_is_cut_at_the_cap(served: Served) -> None:
    """A chunked body (no Content-Length) is read only until it passes the cap: one byte
    over it (the last thing sent: not even its chunk's line end) gets the 413."""
    from placet.web.app import BODY_MAX

    piece = b"a" * 65536
    body = b"%x\r\n%s\r\n" % (len(piece), piece) * (BODY_MAX // len(piece)) + b"1\r\na"
    status, text = _exchange(served, _head(served, "Transfer-Encoding: chunked\r\n"), body)
    assert status == 413 and "limit_exceeded" in text and "nothing was read" in text, (
        status,
        text[:200],
    )


def session(quiet_store: Store) -> str:
    """A signed-in session's token (a passkey registered through the quiet_store's own
    pairing, and pinned; these probes need no signature)."""
    key = register_pinned(quiet_store, "c29tZS1rZXk", b"\x00", "probe")
    return quiet_store.open_session(key.id)


def get(served: Served, path: str, token: str) -> tuple[int, str]:
    """GET `path` with the session `token` in placet's session header."""
    return get_url(served.url(path), token, timeout=30)


def test_an_id_beyond_sqlite_range_is_not_found(quiet_store: Store, served: Served) -> None:
    """`/p/<30 digits>` was a 500 (OverflowError binding the id); `placet show` and
    `placet accept` printed a traceback for the same id."""
    add_upload(quiet_store)
    token = session(quiet_store)
    big = "9" * 30
    assert get(served, f"/p/{big}", token)[0] == 404
    assert get(served, f"/p/{big}/status", token)[0] == 404
    for action in ("discard", "extend"):
        status, text = served.post(f"/p/{big}/{action}", session=token)
        assert status == 409 and "not_found" in text, (action, status, text[:200])
    status, text = served.post(f"/p/{big}/challenge", {"request_hash": "x"}, session=token)
    assert status == 409 and "not_found" in text, (status, text[:200])


def test_sign_in_options_flooded_do_not_drop_an_accept_challenge(
    quiet_store: Store, served: Served
) -> None:
    """`/signin/options` needs no session; asked 1,001 times (by a local process, which
    sets any Origin), it pushed the owner's open accept challenge out of the 1,000 kept,
    and the passkey answer was refused as challenge_invalid."""
    from placet.web.challenges import MAX_OPEN_CHALLENGES

    rec = add_upload(quiet_store, now=utcnow())  # the page's clock is the real one
    token = session(quiet_store)
    status, text = served.post(
        f"/p/{rec.id}/challenge", {"request_hash": rec.request_hash}, session=token
    )
    assert status == 200, text
    nonce = json.loads(text)["nonce"]
    for _ in range(MAX_OPEN_CHALLENGES + 1):
        assert served.post("/signin/options")[0] == 200
    # the answer is still awaited: a forged credential is refused as a bad signature,
    # not as an answer to no open request
    status, text = served.post(
        f"/p/{rec.id}/accept", {"nonce": nonce, "credential": {"id": "c29tZS1rZXk"}},
        session=token,
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
    token = session(quiet_store)
    import urllib.parse
    import urllib.request

    form = urllib.parse.urlencode({"reason": HOSTILE}).encode()
    req = urllib.request.Request(served.url(f"/p/{decided.id}/discard"), data=form)
    req.add_header("Origin", served.origin)
    req.add_header(SESSION_HEADER, token)
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200  # the queue, after the redirect
    assert quiet_store.get(decided.id).status == "discarded"
    for path in ("/", f"/p/{pending.id}", f"/p/{decided.id}", "/history", "/audit"):
        code, page = get(served, path, token)
        assert code == 200, (path, code)
        body = page.split("<main>", 1)[1]
        assert "<img" not in body and "</script>" not in body and "&<b>" not in body, path
        assert not any(c in body for c in "\u202e\u200b"), path
        assert 'href="javascript:' not in body, path


def test_a_cursor_beyond_sqlite_range_is_an_empty_page(quiet_store: Store, served: Served) -> None:
    """`?after=<30 digits>` on the queue, the history and the audit was a 500
    (OverflowError binding the cursor)."""
    token = session(quiet_store)
    big = "9" * 30
    for path in (f"/?after={big}", f"/history?after={big}", f"/audit?after={big}"):
        code, _ = get(served, path, token)
        assert code == 200, (path, code)
