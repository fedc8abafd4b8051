"""The proposal page names the host an approved proposal waits for (one
database for several machines; only the host a proposal was made on runs it)."""

from __future__ import annotations

from placet.executor import plan_for
from placet.store import Store
from placet.store.host import waiting_note
from placet.web.pages import ProposalView, proposal_page
from tests.support.review import T0, add_mkdir

OTHER_HOST = "00000000-0000-4000-8000-000000000000"


def _page(store: Store, here: str) -> str:
    rec = store.accept(add_mkdir(store).id, now=T0)
    view = ProposalView(
        record=rec,
        ops=plan_for(rec.kind, rec.request, rec.evidence).ops,
        flags=[],
        refusal=None,
        results=[],
        events=store.audit_events(proposal_id=rec.id),
        now=T0,
        waiting=waiting_note(rec.status, rec.host, rec.host_id, here),
    )
    return str(proposal_page(view))


def test_an_approved_proposal_of_another_host_says_which_host_runs_it(
    quiet_store: Store,
) -> None:
    html = _page(quiet_store, OTHER_HOST)
    rec = quiet_store.get(1)
    assert rec.host_id is not None
    assert f'<span id="waiting">waiting for host {rec.host} ({rec.host_id[:8]})</span>' in html


def test_on_its_own_host_nothing_waits(quiet_store: Store) -> None:
    assert 'id="waiting"' not in _page(quiet_store, quiet_store.host_id)
