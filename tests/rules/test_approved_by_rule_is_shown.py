"""A rule approval is named everywhere the owner reads decisions: `placet list` and
`placet show`, the web page's history and proposal page (escaped as HTML)."""

from __future__ import annotations

import os

from placet.decisions.standing import approve_by_rule
from placet.executor import load_plan
from placet.rules.approving import RuleApproval
from placet.store import Store
from placet.web.pages import ProposalView, history_page, proposal_page
from tests.support.review import T0, add_mkdir
from tests.support.rig import placet_cli

APPROVAL = RuleApproval("report-folders", "ab" * 32, "/home/o/.config/placet/rules.toml")


def test_placet_list_and_show_name_the_rule(quiet_store: Store) -> None:
    store = quiet_store
    ruled = approve_by_rule(
        store, store.settings, add_mkdir(store, remote_parent="reports"), APPROVAL, now=T0
    )
    add_mkdir(store, remote_parent="docs")
    env = dict(os.environ)
    listed = placet_cli("list", env=env).stdout.splitlines()
    assert "[approved by rule report-folders]" in next(x for x in listed if "reports/" in x)
    assert "approved by rule" not in next(x for x in listed if "docs/" in x)
    shown = placet_cli("show", str(ruled.id), env=env).stdout
    assert "by rule report-folders" in shown
    assert "approved by rule report-folders: the owner's standing rule" in shown


def test_the_web_history_and_proposal_page_name_the_rule(quiet_store: Store) -> None:
    store = quiet_store
    ruled = approve_by_rule(
        store, store.settings, add_mkdir(store, remote_parent="reports"), APPROVAL, now=T0
    )
    history = str(history_page([ruled], next_after=None))
    assert '<span class="rule">approved by rule report-folders</span>' in history
    view = ProposalView(ruled, load_plan(store, ruled).ops, [], None, [], [], T0)
    page = str(proposal_page(view))
    assert "approved by rule report-folders" in page
    other = add_mkdir(store, remote_parent="docs")
    assert "approved by rule" not in str(history_page([other], next_after=None))
