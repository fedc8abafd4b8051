"""What the store counts for standing rules: the hourly cap across processes, the pause
after a failed run until the owner resumes the rule, and a use given back when the
approval is refused (docs/decisions/0038-standing-rules.md)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.executor import execute
from placet.rules.ledger import RuleLedger
from placet.store import open_store
from tests.support.rig import Rig
from tests.support.rules import judge_now, write_rules

REPO = Path(__file__).resolve().parents[2]

FIFTY = b"""\
[[rule]]
id = "fifty"
effect = "allow"
kinds = ["mkdir"]
remote_prefix = "reports"
max_per_hour = 50
"""

UPLOADS = b"""\
[[rule]]
id = "reports"
effect = "allow"
kinds = ["upload"]
remote_prefix = "reports"
"""


@pytest.mark.usefixtures("store_backend")
def test_200_proposals_in_a_minute_from_4_processes_get_50_rule_approvals(
    placet_home: Path,
) -> None:
    settings = load_settings()
    write_rules(settings, FIFTY)
    open_store(settings).close()  # migrated before the workers race
    start = datetime(2026, 6, 1, 12, 0, tzinfo=UTC).isoformat()
    argv = [sys.executable, "-m", "tests.rules.rate_worker"]
    workers = [
        subprocess.Popen([*argv, str(w), "50", start], cwd=REPO, stdout=subprocess.PIPE, text=True)
        for w in range(4)
    ]
    approved = [int(p.communicate(timeout=110)[0]) for p in workers]
    assert all(p.returncode == 0 for p in workers)
    assert sum(approved) == 50
    with open_store(settings) as store:
        assert store.counts().get("approved") == 50
        assert store.counts().get("pending") == 150
        ledger = RuleLedger(store)
        assert ledger.uses_since(datetime(2026, 6, 1, tzinfo=UTC)) == {"fifty": 50}
        # an hour after the first approvals the rule approves again
        rec, _ = store.create_proposal(
            kind="mkdir", request={"kind": "mkdir", "remote_parent": "reports", "name": "late"},
            evidence={"remote": {"exists": False}}, reason="r",
            drive_spec=str(settings.default_drive_dir), run_id="late", ttl_seconds=600,
            now=datetime(2026, 6, 1, 13, 0, 1, tzinfo=UTC),
        )  # fmt: skip
        late = judge_now(store, settings, rec, now=datetime(2026, 6, 1, 13, 0, 1, tzinfo=UTC))
        assert late.approved_by == "fifty"


def test_a_rule_pauses_after_its_approved_run_fails_until_resumed(rig: Rig) -> None:
    write_rules(rig.settings, UPLOADS)
    rig.write("a.txt", b"approved bytes")
    first = judge_now(rig.store, rig.settings, rig.upload("a.txt", "reports"))
    assert first.approved_by == "reports"
    assert first.record.status == "approved"
    assert first.record.resolved_by == "rule:reports"
    rig.write("a.txt", b"other bytes!!!")  # the run finds the file changed: stale
    assert execute(rig.store, rig.settings, first.record.id, drive=rig.drive).status == "failed"

    rig.write("b.txt", b"next report")
    second = judge_now(rig.store, rig.settings, rig.upload("b.txt", "reports"))
    assert second.approved_by is None
    assert second.record.status == "pending"
    assert second.note is not None
    assert f"paused: the run of proposal {first.record.id}" in second.note
    assert "placet rules resume reports" in second.note
    assert rig.store.get(second.record.id).status == "pending"

    RuleLedger(rig.store).resume("reports", now=datetime.now(UTC))
    again = judge_now(rig.store, rig.settings, second.record)
    assert again.approved_by == "reports"
    done = execute(rig.store, rig.settings, again.record.id, drive=rig.drive)
    assert done.status == "succeeded"
    assert rig.remote_dir is not None
    assert (rig.remote_dir / "reports" / "b.txt").read_bytes() == b"next report"


def test_a_refused_approval_gives_its_use_back(rig: Rig) -> None:
    write_rules(rig.settings, UPLOADS)
    rig.write("a.txt", b"x")
    rec = rig.upload("a.txt", "reports")
    rig.store.discard(rec.id)  # decided meanwhile: the rule's approval is refused
    out = judge_now(rig.store, rig.settings, rec)
    assert out.approved_by is None
    assert out.note is not None and "could not approve it" in out.note
    assert RuleLedger(rig.store).uses_since(datetime.now(UTC) - timedelta(hours=1)) == {}


def test_rules_off_or_forbidding_say_why_in_the_note(rig: Rig) -> None:
    rig.write("a.txt", b"x")
    rec = rig.upload("a.txt", "reports")
    assert judge_now(rig.store, rig.settings, rec).note is None  # no file
    path = write_rules(rig.settings, UPLOADS)
    moved = judge_now(rig.store, rig.settings, rec, env={"PLACET_HOME": "/x"})
    assert moved.approved_by is None
    assert moved.note is not None and moved.note.startswith("standing rules are off (PLACET_HOME")
    path.chmod(0o666)
    writable = judge_now(rig.store, rig.settings, rec)
    assert writable.note is not None and "writable by group or others" in writable.note
    path.write_bytes(UPLOADS + b'\n[[rule]]\nid = "no"\neffect = "forbid"\nkinds = ["upload"]\n')
    path.chmod(0o600)
    forbidden = judge_now(rig.store, rig.settings, rec)
    assert forbidden.note == "rule 'no' forbids op #0 (upload 'reports/a.txt'): the owner decides"
    assert rig.store.get(rec.id).status == "pending"
