"""Several proposals accepted on the queue page with one passkey assertion, in a real
Chromium with a virtual authenticator: three are approved and run, each approval event
keeps the assertion and the set it signed, and `audit --verify` re-verifies it for each;
the same assertion replayed, used for another set, or for a set where one proposal was
re-proposed under the same request hash, approves nothing."""

from __future__ import annotations

import time
from typing import Any

from placet.store import ProposalRecord
from tests.support.rig import Rig
from tests.support.web import Served, Tab, browser, pair, serve, tab, visit

__all__ = ["browser", "tab"]

SIGN_SET = """async (proposals) => {
  const opts = await post("/set/challenge", {proposals: proposals});
  const cred = await navigator.credentials.get(requestOptions(opts));
  return {nonce: opts.nonce, credential: assertionJSON(cred)};
}"""
SEND_SET = """async (body) => {
  const r = await authed("/set/accept", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  return {status: r.status, text: await r.text()};
}"""


def _uploads(rig: Rig, names: str) -> list[ProposalRecord]:
    out = []
    for n in names:
        rig.write(f"{n}.txt", f"the bytes of {n}\n".encode())
        out.append(rig.upload(f"{n}.txt", "team"))
    return out


def _items(*recs: ProposalRecord) -> list[dict[str, Any]]:
    return [{"proposal_id": r.id, "request_hash": r.request_hash} for r in recs]


def _approvals(rig: Rig, pid: int) -> list[dict[str, Any]]:
    return [e.detail for e in rig.store.audit_events(proposal_id=pid) if e.to_status == "approved"]


def _until(predicate: Any, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_three_selected_are_accepted_with_one_assertion(
    tab: Tab, rig: Rig, served_rig: Served
) -> None:
    recs = _uploads(rig, "abc")
    pair(tab, served_rig)
    visit(tab, served_rig.url("/"))
    page = tab.page
    for r in recs:
        page.check(f"input.pick[data-proposal='{r.id}']")
    summary = page.locator("#set-summary").inner_text()
    for r in recs:
        assert f"#{r.id} {r.request_hash[:12]}" in summary
    signs = len(tab.credentials()) and tab.credentials()[0]["signCount"]
    page.click("#accept-set")
    assert _until(lambda: all(rig.store.get(r.id).status == "succeeded" for r in recs))
    assert tab.credentials()[0]["signCount"] == signs + 1  # one assertion for the three
    details = [_approvals(rig, r.id) for r in recs]
    assert all(len(d) == 1 for d in details)
    nonces = {d[0]["passkey"]["nonce"] for d in details}
    assert len(nonces) == 1
    for r, [d] in zip(recs, details, strict=True):
        assert d["via"] == "web" and d["request_hash"] == r.request_hash
        assert [e["proposal_id"] for e in d["set"]] == [x.id for x in recs]
        assert {e["host_id"] for e in d["set"]} == {rig.store.host_id}
    assert rig.remote_dir is not None
    assert sorted(p.name for p in (rig.remote_dir / "team").iterdir()) == [
        "a.txt",
        "b.txt",
        "c.txt",
    ]
    v = rig.store.verify_audit()
    assert v.ok and "3 passkey-signed approval(s) re-verified" in v.message, v.message


def test_an_assertion_replayed_or_moved_to_another_set_approves_nothing(
    tab: Tab, rig: Rig, served_rig: Served
) -> None:
    a, b, c, d = _uploads(rig, "abcd")
    pair(tab, served_rig)
    visit(tab, served_rig.url("/"))
    page = tab.page
    signed = dict(page.evaluate(SIGN_SET, _items(a, b)))
    # the answer for {a, b} sent with the nonce of a challenge for {c, d}
    other = dict(page.evaluate(SIGN_SET, _items(c, d)))
    got = dict(page.evaluate(SEND_SET, {**other, "credential": signed["credential"]}))
    assert got["status"] == 409 and "passkey_refused" in got["text"], got
    # the genuine answer is used once; the same answer again is for no open request
    got = dict(page.evaluate(SEND_SET, signed))
    assert got["status"] == 200, got
    assert _until(lambda: rig.store.get(b.id).status == "succeeded")
    got = dict(page.evaluate(SEND_SET, signed))
    assert got["status"] == 409 and "challenge_invalid" in got["text"], got
    for r in (c, d):
        assert rig.store.get(r.id).status == "pending" and _approvals(rig, r.id) == []
    assert rig.store.verify_audit().ok


def test_a_proposal_re_proposed_under_the_same_hash_is_not_the_one_signed(
    tab: Tab, rig: Rig, served_rig: Served
) -> None:
    a, b = _uploads(rig, "ab")
    pair(tab, served_rig)
    visit(tab, served_rig.url("/"))
    page = tab.page
    signed = dict(page.evaluate(SIGN_SET, _items(a, b)))
    rig.store.withdraw(b.id, run_id="run-test")
    again = rig.upload("b.txt", "team")  # the same request, a new proposal
    assert again.id != b.id and again.request_hash == b.request_hash
    got = dict(page.evaluate(SEND_SET, signed))
    assert got["status"] == 409 and "set_refused" in got["text"], got
    assert f"#{b.id}" in got["text"] and "withdrawn" in got["text"]
    # the same answer for a set naming the new proposal: no challenge of that set
    moved = dict(page.evaluate(SIGN_SET, _items(a, again)))
    got = dict(page.evaluate(SEND_SET, {**moved, "credential": signed["credential"]}))
    assert got["status"] == 409 and "passkey_refused" in got["text"], got
    for r in (a, again):
        assert rig.store.get(r.id).status == "pending" and _approvals(rig, r.id) == []


def test_signed_mode_runs_a_set_and_each_proposal_spends_its_share(
    tab: Tab, signed_rig: Rig
) -> None:
    """approvals = "signed": the executor checks, for each proposal, that the set's
    signature holds it as it is now (request, selection, host, drive); a proposal moved to
    another drive in the database after the approval is refused, the others run."""
    recs = _uploads(signed_rig, "abc")
    with serve(signed_rig.store, signed_rig.settings) as served:
        pair(tab, served)
        visit(tab, served.url("/"))
        body = dict(tab.page.evaluate(SIGN_SET, _items(*recs)))
        with signed_rig.store.engine.begin() as conn:  # moved after it was signed
            conn.exec_driver_sql(
                "UPDATE proposal SET drive_spec = 'elsewhere:' WHERE id = ?", (recs[2].id,)
            )
        got = dict(tab.page.evaluate(SEND_SET, body))
        assert got["status"] == 409 and "not_approved_as_shown" in got["text"], got
        body = dict(tab.page.evaluate(SIGN_SET, _items(*recs[:2])))
        got = dict(tab.page.evaluate(SEND_SET, body))
        assert got["status"] == 200, got
        assert _until(
            lambda: all(signed_rig.store.get(r.id).status == "succeeded" for r in recs[:2])
        )
    assert signed_rig.store.get(recs[2].id).status == "pending"
    v = signed_rig.store.verify_audit()
    assert v.ok and "2 passkey-signed approval(s) re-verified" in v.message, v.message
