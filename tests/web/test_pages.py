"""The proposal page's words for evidence (rendered without a browser)."""

from __future__ import annotations

from placet.executor import load_plan
from placet.schema import RemoteEvidence
from placet.store import Store
from placet.web.pages import ProposalView, proposal_page
from tests.support.review import T0, add_download


def test_content_read_by_placet_is_not_called_a_remote_digest(quiet_store: Store) -> None:
    """On a remote without digests the evidence is SHA-256 of the bytes placet read; the
    page says so instead of "remote digest"."""
    ev = RemoteEvidence(
        exists=True, size=3, digest_type="sha256", digest="ab" * 32, read_by_placet=True
    )
    rec = add_download(quiet_store, remote=ev)
    view = ProposalView(rec, load_plan(quiet_store, rec).ops, [], None, [], [], T0)
    html = str(proposal_page(view))
    assert f"content read by placet <code>sha256 {'ab' * 32}</code> (no remote digest)" in html
    assert "remote digest <code>" not in html
