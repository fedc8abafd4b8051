"""Signing the rules file in Chromium with a virtual authenticator: the rules page shows
the file and its SHA-256; the owner's passkey signs it; in signed mode a rule then
approves and its approval runs, `placet audit --verify` checks it against the signed
rules; an edit suspends every rule until the file is signed again."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.drive import RcloneDrive
from placet.executor import execute
from placet.executor.audit import verify_audit
from tests.rules.test_ledger import UPLOADS
from tests.support.rig import make_rig, write_config
from tests.support.rules import become_owner, judge_now, write_rules
from tests.support.web import Tab, browser, pair, serve, tab, visit

__all__ = ["browser", "tab"]


def test_the_owner_signs_the_rules_and_only_the_signed_file_approves(
    tab: Tab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_drive: Callable[..., RcloneDrive],
) -> None:
    remote = tmp_path / "drive"
    remote.mkdir()
    drive = make_drive(str(remote))
    become_owner(tmp_path, monkeypatch)  # rules apply only from the default config folder
    settings = load_settings().model_copy(update={"approvals": "signed"})
    settings.config_file.parent.mkdir(parents=True, mode=0o700)
    write_config(settings, drive=drive.spec, approvals="signed")
    write_rules(settings, UPLOADS)
    rig = make_rig(settings, drive, tmp_path, remote)
    rig.write("a.txt", b"weekly report\n")
    before = judge_now(rig.store, rig.settings, rig.upload("a.txt", "reports"))
    assert before.approved_by is None and "is not signed" in (before.note or "")

    digest = hashlib.sha256(UPLOADS).hexdigest()
    with serve(rig.store, rig.settings) as served:
        pair(tab, served)
        visit(tab, served.url("/rules"))
        assert tab.page.text_content("#rules-sha256") == digest
        assert 'remote_prefix = "reports"' in (tab.page.text_content("#rules-text") or "")
        tab.page.click("#sign-rules")
        tab.page.wait_for_selector("#status:has-text('Signed')")
        assert "signed by passkey" in (tab.page.text_content("#rules-signed") or "")

        approved = judge_now(rig.store, rig.settings, before.record)
        assert approved.approved_by == "reports"
        assert execute(rig.store, rig.settings, approved.record.id).status == "succeeded"
        assert (remote / "reports" / "a.txt").read_bytes() == b"weekly report\n"
        v = verify_audit(rig.store)
        assert v.ok, v.message
        assert "1 rule approval(s) checked against the signed rules they used" in v.message

        write_rules(rig.settings, UPLOADS + b"\n# edited after signing\n")
        rig.write("b.txt", b"next week\n")
        after = judge_now(rig.store, rig.settings, rig.upload("b.txt", "reports"))
        assert after.approved_by is None
        assert "edited since" in (after.note or "")
        visit(tab, served.url("/rules"))
        assert "is not signed" in (tab.page.text_content("#rules-signed") or "")
    rig.store.close()
