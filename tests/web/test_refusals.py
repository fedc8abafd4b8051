"""What `placet web` refuses: an assertion made for one proposal used on another, a
proposal whose request changed after it was shown, a replayed assertion, a foreign
Origin or Host, a change with no session, a pairing link used twice or after 10
minutes, a revoked passkey, and a listen address other than loopback without TLS.
Each refusal approves nothing."""

from __future__ import annotations

import sqlite3
import subprocess
from typing import Any

import pytest

from placet.errors import UsageError
from placet.store import Store
from placet.store.passkeys import open_pairing_link
from placet.web import check_listen
from placet.web.app import CSP
from tests.support.review import add_upload
from tests.support.rig import PLACET, Rig
from tests.support.web import (
    Served,
    Tab,
    browser,
    pair,
    serve,
    session_token,
    tab,
    visit,
)

__all__ = ["browser", "tab"]

SIGN = """async ([pid, hash, skip]) => {
  const opts = await post("/p/" + pid + "/challenge", {request_hash: hash, skip_ops: skip});
  const cred = await navigator.credentials.get(requestOptions(opts));
  return {nonce: opts.nonce, request_hash: hash, skip_ops: skip, credential: assertionJSON(cred)};
}"""
SEND = """async ([pid, body]) => {
  const r = await authed("/p/" + pid + "/accept", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  return {status: r.status, text: await r.text()};
}"""

SIGN_IN = """async () => {
  const opts = await post("/signin/options");
  const cred = await navigator.credentials.get(requestOptions(opts));
  try { await post("/signin", {nonce: opts.nonce, credential: assertionJSON(cred)}); }
  catch (e) { return e.message; }
  return "signed in";
}"""


def sign(tab: Tab, pid: int, request_hash: str, skip: list[int] | None = None) -> dict[str, Any]:
    """A user-verified assertion for accepting `pid` as shown with `request_hash`."""
    return dict(tab.page.evaluate(SIGN, [pid, request_hash, skip or []]))


def send(tab: Tab, pid: int, body: dict[str, Any]) -> dict[str, Any]:
    return dict(tab.page.evaluate(SEND, [pid, body]))


def approvals(quiet_store: Store, pid: int) -> int:
    return sum(1 for e in quiet_store.audit_events(proposal_id=pid) if e.to_status == "approved")


def test_an_assertion_for_one_proposal_is_refused_on_another(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    b = add_upload(quiet_store, local_path="b.txt", now=served.clock())
    pair(tab, served)
    visit(tab, served.url(f"/p/{a.id}"))
    body = sign(tab, a.id, a.request_hash)
    got = send(tab, b.id, {**body, "request_hash": b.request_hash})
    assert got["status"] == 409 and "challenge_invalid" in got["text"], got
    assert quiet_store.get(a.id).status == quiet_store.get(b.id).status == "pending"
    assert approvals(quiet_store, a.id) == approvals(quiet_store, b.id) == 0


def test_a_request_changed_after_it_was_shown_is_refused(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    pair(tab, served)
    visit(tab, served.url(f"/p/{a.id}"))
    body = sign(tab, a.id, a.request_hash)
    con = sqlite3.connect(quiet_store.db_path)
    con.execute(
        "UPDATE proposal SET request = replace(request, 'a.txt', 'b.txt'), request_hash = ? "
        "WHERE id = ?",
        ("f" * 64, a.id),
    )
    con.commit()
    con.close()
    got = send(tab, a.id, body)
    assert got["status"] == 409 and "not_approved_as_shown" in got["text"], got
    assert quiet_store.get(a.id).status == "pending" and approvals(quiet_store, a.id) == 0


def test_ops_cannot_be_unticked_on_a_single_op_proposal(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    pair(tab, served)
    visit(tab, served.url(f"/p/{a.id}"))
    with pytest.raises(Exception, match="skip_invalid"):
        sign(tab, a.id, a.request_hash, [0])


def test_a_page_shown_before_a_change_cannot_ask_for_a_challenge(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    pair(tab, served)
    visit(tab, served.url(f"/p/{a.id}"))
    with pytest.raises(Exception, match="not_approved_as_shown"):
        sign(tab, a.id, "0" * 64)


def test_a_replayed_assertion_is_refused(tab: Tab, rig: Rig) -> None:
    rig.write("one.txt", b"1\n")
    rec = rig.upload("one.txt")
    with serve(rig.store, rig.settings) as served:
        pair(tab, served)
        visit(tab, served.url(f"/p/{rec.id}"))
        body = sign(tab, rec.id, rec.request_hash)
        assert send(tab, rec.id, body)["status"] == 200
        visit(tab, served.url(f"/p/{rec.id}"))
        tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")
        again = send(tab, rec.id, body)
        assert again["status"] == 409 and "challenge_invalid" in again["text"], again
    assert approvals(rig.store, rec.id) == 1
    assert rig.store.get(rec.id).status == "succeeded"
    rig.store.close()


def test_a_change_with_a_foreign_or_missing_origin_is_refused(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    pair(tab, served)
    token = session_token(tab)
    for origin in ("http://evil.example", None, "null", f"http://127.0.0.1:{served.config.port}"):
        status, text = served.post(f"/p/{a.id}/discard", origin=origin, session=token)
        assert status == 403 and "origin_refused" in text, (origin, status, text)
        status, _ = served.post(f"/p/{a.id}/extend", origin=origin, session=token)
        assert status == 403
    assert quiet_store.get(a.id).status == "pending"
    assert quiet_store.get(a.id).expires_at == a.expires_at
    status, _ = served.post(f"/p/{a.id}/extend", session=token)  # its own origin: allowed
    assert status in (200, 303) and quiet_store.get(a.id).expires_at > a.expires_at


def test_a_foreign_host_is_refused_and_loopback_is_sent_to_localhost(served: Served) -> None:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(served.url("/"), headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 421

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a: Any, **k: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(f"http://127.0.0.1:{served.config.port}/audit", timeout=10)
    assert e.value.code == 307 and e.value.headers["Location"] == served.url("/audit")


def test_no_session_no_page_and_no_change(quiet_store: Store, served: Served) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    body = {"nonce": "x", "request_hash": a.request_hash, "skip_ops": [], "credential": {}}
    for path in (f"/p/{a.id}/accept", f"/p/{a.id}/challenge"):
        status, text = served.post(path, body)
        assert status == 403 and "not_signed_in" in text
    status, text = served.post(f"/p/{a.id}/discard")
    assert status == 403 and "not_signed_in" in text
    status, text = served.post(f"/p/{a.id}/extend", session="forged")
    assert status == 403 and "not_signed_in" in text
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(served.url(f"/p/{a.id}"), timeout=10)
    page = e.value.read().decode()
    assert e.value.code == 401 and e.value.headers["Content-Security-Policy"] == CSP
    assert a.request_hash not in page and "placet web pair" in page and "not_signed_in" in page
    assert quiet_store.get(a.id).status == "pending" and approvals(quiet_store, a.id) == 0


def test_a_pairing_link_works_once(
    tab: Tab, browser: Any, quiet_store: Store, served: Served
) -> None:
    token = open_pairing_link(quiet_store, now=served.clock())
    tab.page.goto(served.url(f"/pair/{token}"))
    tab.page.click("#pair")
    tab.page.wait_for_url(served.url("/"))
    again = tab.page.goto(served.url(f"/pair/{token}"))
    assert again is not None and again.status == 410
    assert "already used" in tab.page.content()
    status, text = served.post(f"/pair/{token}/options")
    assert status == 410 and "pairing_invalid" in text
    assert len(quiet_store.passkeys()) == 1


def test_a_pairing_link_lapses_after_ten_minutes(
    tab: Tab, quiet_store: Store, served: Served
) -> None:
    token = open_pairing_link(quiet_store, now=served.clock())
    served.clock.advance(minutes=9, seconds=59)
    assert tab.page.goto(served.url(f"/pair/{token}")).status == 200  # type: ignore[union-attr]
    served.clock.advance(seconds=1)
    tab.page.click("#pair")
    tab.page.wait_for_selector("#status:has-text('pairing_invalid')")
    assert "expired" in tab.page.locator("#status").inner_text()
    assert tab.page.goto(served.url(f"/pair/{token}")).status == 410  # type: ignore[union-attr]
    assert quiet_store.passkeys() == []


def test_a_revoked_passkey_signs_nothing_more(tab: Tab, quiet_store: Store, served: Served) -> None:
    a = add_upload(quiet_store, local_path="a.txt", now=served.clock())
    pair(tab, served)
    visit(tab, served.url(f"/p/{a.id}"))
    body = sign(tab, a.id, a.request_hash)
    quiet_store.revoke_passkey(quiet_store.passkeys()[0].id)
    got = send(tab, a.id, body)
    assert got["status"] == 403 and "not_signed_in" in got["text"]  # its session ended
    tab.page.goto(served.url("/"))
    assert "placet web pair" in tab.page.content()  # no active passkey: pair one
    refused = tab.page.evaluate(SIGN_IN)
    assert "passkey_refused" in refused and "revoked" in refused
    assert approvals(quiet_store, a.id) == 0


def test_listening_off_loopback_needs_tls() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        check_listen(host, tls=False)
    check_listen("0.0.0.0", tls=True)
    for host in ("0.0.0.0", "192.168.1.20", "::", "example.org"):
        with pytest.raises(UsageError) as e:
            check_listen(host, tls=False)
        assert e.value.error_code == "insecure_listen"
    r = subprocess.run(
        [str(PLACET), "web", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "insecure_listen" in r.stderr and "--cert and --key" in r.stderr
