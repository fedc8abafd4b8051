"""Sign-in challenges cannot be flooded out (`placet.web.challenges`): `/signin/options`
needs no session, so a local process may ask it a thousand times while the owner's
passkey prompt is open; the owner's answer must still sign in. A sign-in answer is
accepted once, a forged or lapsed nonce never."""

from __future__ import annotations

import http.client
from typing import Any

import pytest

from placet.errors import PolicyRefused
from placet.web.challenges import CHALLENGE_SECONDS, Challenges
from tests.support.web import Clock, Served, Tab, browser, pair, tab

__all__ = ["browser", "tab"]

ANSWER = """async (opts) => {
  const nonce = opts.nonce;
  const cred = await navigator.credentials.get(requestOptions(opts));
  return {nonce: nonce, credential: assertionJSON(cred)};
}"""
SIGN_IN_WITH = """async (body) => {
  try { const done = await post("/signin", body); remember(done.session); }
  catch (e) { return e.message; }
  return "signed in";
}"""


def _flood(served: Served, n: int) -> None:
    """`n` sign-in options asked without a session, as any local process may (it sets
    placet's Origin itself), on one kept-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", served.config.port, timeout=10)
    headers = {"Host": served.config.authority, "Origin": served.origin}
    try:
        for _ in range(n):
            conn.request("POST", "/signin/options", body=b"{}", headers=headers)
            r = conn.getresponse()
            r.read()
            assert r.status == 200
    finally:
        conn.close()


@pytest.mark.timeout(180)
def test_a_flood_of_sign_in_options_leaves_the_owners_sign_in_open(
    tab: Tab, served: Served
) -> None:
    pair(tab, served)
    tab.page.evaluate("forget()")  # signed out: the owner signs in again
    opts: dict[str, Any] = tab.page.evaluate("post('/signin/options')")
    _flood(served, 1000)  # while the owner's prompt is open
    body = tab.page.evaluate(ANSWER, opts)
    assert tab.page.evaluate(SIGN_IN_WITH, body) == "signed in"
    # the same answer again (replayed) signs nobody in
    replayed = tab.page.evaluate(SIGN_IN_WITH, body)
    assert "already answered" in replayed or "challenge_invalid" in replayed, replayed


def test_a_sign_in_nonce_is_spent_once_and_lapses() -> None:
    clock = Clock()
    challenges = Challenges(clock)
    nonce, issued = challenges.issue_signin()
    assert challenges.take(nonce, "signin") == issued  # nothing kept: derived again
    assert challenges.spend(issued) and not challenges.spend(issued)
    with pytest.raises(PolicyRefused) as spent:
        challenges.take(nonce, "signin")
    assert spent.value.error_code == "challenge_invalid"

    stamp, rand, tag = challenges.issue_signin()[0].split(".")
    forged = [
        f"{stamp}.{rand}.{'0' * 32}",  # a tag this process never made
        f"{int(stamp) + 3600}.{rand}.{tag}",  # a later expiry under the same tag
        f"{stamp}.{rand}",
        "",
        None,
        7,
    ]
    for bad in forged:
        with pytest.raises(PolicyRefused):
            challenges.take(bad, "signin")
    with pytest.raises(PolicyRefused):  # another process's nonce (another key)
        challenges.take(Challenges(clock).issue_signin()[0], "signin")
    with pytest.raises(PolicyRefused):  # a sign-in nonce answers no accept
        challenges.take(nonce, "accept")

    fresh, _ = challenges.issue_signin()
    clock.advance(seconds=CHALLENGE_SECONDS)
    with pytest.raises(PolicyRefused):
        challenges.take(fresh, "signin")
    later, issued_later = challenges.issue_signin()
    assert challenges.spend(challenges.take(later, "signin"))
    assert challenges.spent == 1  # the lapsed spent nonce was let go
    assert issued_later.expires_at > clock()
