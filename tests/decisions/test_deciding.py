"""The decision core (`placet.decisions`): a set is decided exactly as shown or not at
all, each refusal keeps its own code, and the approval records its proof."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from placet import decisions
from placet.config import Settings
from placet.decisions import Proof, Shown
from placet.errors import PlacetError, SetRefused
from placet.executor.service import reserved
from placet.store import Store
from tests.support.review import T0, add_mkdir, add_upload, quiet
from tests.support.rig import Rig, mkdir_ops


def _approvals(store: Store, pid: int) -> list[dict[str, Any]]:
    return [e.detail for e in store.audit_events(proposal_id=pid) if e.to_status == "approved"]


def _three(store: Store) -> list[Any]:
    return [add_upload(store, name=f"r{i}.md") for i in range(3)]


def test_a_set_is_approved_with_its_proof_and_the_set_it_belongs_to(
    settings: Settings, quiet_store: Store
) -> None:
    recs = _three(quiet_store)
    shown = [Shown.of(r) for r in recs]
    proof = Proof.rule("reports", "ab" * 32)
    accepted = decisions.accept(quiet_store, quiet_store.settings, shown, proof, now=T0,
                                run_here=False)  # fmt: skip
    assert [a.record.status for a in accepted] == ["approved"] * 3
    assert not any(a.reserved or reserved(a.proposal_id) for a in accepted)  # a rule: loops run it
    for r in recs:
        [detail] = _approvals(quiet_store, r.id)
        assert detail["via"] == "rule" and detail["rule"] == {
            "id": "reports",
            "rules_sha256": "ab" * 32,
        }
        assert detail["request_hash"] == r.request_hash
        assert detail["set"] == decisions.set_entries(shown)


def test_one_proposal_changed_since_shown_approves_none_of_the_set(
    settings: Settings, quiet_store: Store
) -> None:
    a, b, c = _three(quiet_store)
    shown = [Shown.of(a), Shown(b.id, "0" * 64), Shown.of(c)]
    with pytest.raises(SetRefused) as e:
        decisions.accept(quiet_store, quiet(settings), shown, Proof.tui(None), now=T0)
    assert [(pid, err.error_code) for pid, err in e.value.refusals] == [
        (b.id, "not_approved_as_shown")
    ]
    assert e.value.details["refused"][0]["proposal_id"] == b.id
    assert [quiet_store.get(r.id).status for r in (a, b, c)] == ["pending"] * 3
    assert not any(reserved(r.id) for r in (a, b, c))


def test_expired_and_decided_since_shown_are_each_named(
    settings: Settings, quiet_store: Store
) -> None:
    a = add_upload(quiet_store, name="a.md", ttl=60)
    b = add_upload(quiet_store, name="b.md")
    c = add_upload(quiet_store, name="c.md")
    shown = [Shown.of(r) for r in (a, b, c)]
    quiet_store.discard(b.id, now=T0)  # decided since it was shown
    later = T0 + timedelta(seconds=61)
    with pytest.raises(SetRefused) as e:
        decisions.accept(quiet_store, quiet(settings), shown, Proof.tui(None), now=later)
    assert {pid: err.error_code for pid, err in e.value.refusals} == {
        a.id: "expired",
        b.id: "wrong_state",
    }
    assert quiet_store.get(c.id).status == "pending"


def test_a_set_of_one_gets_the_proposals_own_refusal(
    settings: Settings, quiet_store: Store
) -> None:
    a = add_upload(quiet_store)
    with pytest.raises(PlacetError) as e:
        decisions.accept(
            quiet_store, quiet(settings), [Shown(a.id, "f" * 64)], Proof.tui(None), now=T0
        )
    assert e.value.error_code == "not_approved_as_shown" and not isinstance(e.value, SetRefused)


def test_the_store_decides_a_set_in_one_transaction(quiet_store: Store) -> None:
    """Past the core's checks (a race), the store's own check of the second proposal
    rolls the first one's approval back."""
    a, b = add_upload(quiet_store, name="a.md"), add_upload(quiet_store, name="b.md")
    details = {a.id: {"request_hash": a.request_hash}, b.id: {"request_hash": "e" * 64}}
    with pytest.raises(SetRefused):
        quiet_store.accept_set(details, now=T0)
    assert quiet_store.get(a.id).status == "pending" and _approvals(quiet_store, a.id) == []
    assert quiet_store.verify_audit().ok


def test_discard_and_extend_a_set_all_or_none(quiet_store: Store) -> None:
    a, b = add_upload(quiet_store, name="a.md"), add_mkdir(quiet_store)
    done = decisions.extend(quiet_store, [a.id, b.id], minutes=15, now=T0)
    assert [r.expires_at - x.expires_at for r, x in zip(done, (a, b), strict=True)] == [
        timedelta(minutes=15)
    ] * 2
    quiet_store.discard(b.id, now=T0)
    with pytest.raises(SetRefused) as e:
        decisions.discard(quiet_store, [Shown.of(a), Shown.of(b)], reason="no", now=T0)
    assert [(pid, err.error_code) for pid, err in e.value.refusals] == [(b.id, "wrong_state")]
    assert quiet_store.get(a.id).status == "pending"
    with pytest.raises(PlacetError) as twice:
        decisions.discard(quiet_store, [Shown.of(a), Shown.of(a)], now=T0)
    assert twice.value.error_code == "invalid_argument"


def test_an_unticked_folder_that_ticked_ops_need_is_refused_and_never_made(rig: Rig) -> None:
    assert rig.remote_dir is not None
    ops = [*mkdir_ops(["s", "s/sub"]), rig.upload_op(2, "s/sub/a.txt", b"x")]
    rec, _ = rig.propose_ops(ops)
    with pytest.raises(PlacetError) as e:
        decisions.accept(rig.store, rig.settings, [Shown.of(rec, [1])], Proof.tui(None))
    assert e.value.error_code == "folder_unticked"
    assert e.value.details == {"proposal_id": rec.id, "folder_op": 1, "needed_by": [2]}
    # approved past the core (straight in the store): the executor refuses it too
    rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": [1]})
    with pytest.raises(PlacetError) as ran:
        rig.run(rec)
    assert ran.value.error_code == "folder_unticked"
    assert not (rig.remote_dir / "s").exists()
