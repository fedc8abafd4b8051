"""`placet rules list | test | resume` and `placet doctor`'s rules line, run as the
installed command in an owner's environment (placet's config in its default folder)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from placet.config import Settings
from placet.store import LeaseHolder, ProposalRecord, Store, open_store
from tests.rules.test_matcher import MINIMAL
from tests.support.proposals import propose_folder
from tests.support.rig import placet_cli
from tests.support.rules import become_owner, judge_now, owner_settings, write_rules


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return become_owner(tmp_path, monkeypatch)


@pytest.fixture
def owner_rules(env: dict[str, str]) -> Settings:
    settings = owner_settings(env)
    write_rules(settings, MINIMAL)
    return settings


def _folder(store: Store, settings: Settings, parent: str, name: str) -> ProposalRecord:
    rec, _ = propose_folder(
        store, name, parent=parent, drive_spec=str(settings.default_drive_dir), ttl=600
    )
    return rec


def _fail(store: Store, pid: int) -> None:
    """Run approved proposal `pid` to `failed`: claimed, no op journaled of the one
    expected."""
    holder = LeaseHolder.current()
    store.claim(pid, holder=holder)
    assert store.finish(pid, holder=holder, expected_ops=1).status == "failed"


def test_rules_list_test_and_resume(owner_rules: Settings, env: dict[str, str]) -> None:
    with open_store(owner_rules) as store:
        approved = _folder(store, owner_rules, "reports", "2026")
        out = judge_now(store, owner_rules, approved, env=env)
        assert out.approved_by == "report-folders"
        waiting = _folder(store, owner_rules, "reports", "2027")
        elsewhere = _folder(store, owner_rules, "", "reports-old")

    listed = placet_cli("rules", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].endswith("2 rule(s), sha256 " + lines[0].rsplit(" ", 1)[1])
    assert "rules.toml" in lines[0]
    row = next(line for line in lines if line.startswith("report-folders"))
    assert row.split()[1:4] == ["allow", "1", "active"]
    assert "weekly-reports  allow        0  active" in listed.stdout

    tested = placet_cli("rules", "test", env=env)
    assert tested.returncode == 0, tested.stderr
    text = tested.stdout
    assert "approved by rule report-folders" in text
    assert "rule report-folders would approve it" in text
    assert (
        "report-folders: op #0's drive path 'reports-old' is not below remote_prefix 'reports'"
        in text
    )
    assert "weekly-reports: op #0 is mkdir, a kind the rule does not name" in text
    heads = [line.split()[0] for line in text.splitlines()[1:] if not line.startswith(" " * 8)]
    assert heads == [str(waiting.id), str(elsewhere.id), str(approved.id)]

    with open_store(owner_rules) as store:
        _fail(store, approved.id)
    paused = placet_cli("rules", "list", env=env)
    assert f"PAUSED (proposal {approved.id} failed)" in paused.stdout
    one = placet_cli("rules", "test", str(waiting.id), env=env)
    assert (
        f"rule report-folders covers it, but paused: the run of proposal {approved.id}"
        in one.stdout
    )

    resumed = placet_cli("rules", "resume", "report-folders", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed (proposal {approved.id}'s failed run paused it)" in resumed.stdout
    assert "report-folders  allow        1  active" in placet_cli("rules", "list", env=env).stdout

    unknown = placet_cli("rules", "resume", "nope", env=env)
    assert unknown.returncode == 3
    assert "the allow rules are: report-folders, weekly-reports" in unknown.stderr


def test_a_refused_rules_file_is_reported_by_list_test_and_doctor(
    owner_rules: Settings, env: dict[str, str]
) -> None:
    from placet.rules.loading import rules_path

    rules_path(owner_rules).chmod(0o666)
    for args in (("rules", "list"), ("rules", "test")):
        done = placet_cli(*args, env=env)
        assert done.returncode == 1
        assert "refused, no rule applies" in done.stdout
        assert "writable by group or others (mode 666)" in done.stdout
    doctor = placet_cli("doctor", env=env)
    line = next(x for x in doctor.stdout.splitlines() if x.startswith("FAIL  rules"))
    assert "refused, no rule applies" in line
    rules_path(owner_rules).chmod(0o600)
    doctor = placet_cli("doctor", env=env)
    assert any(x.startswith("ok    rules") and "2 rule(s)" in x for x in doctor.stdout.splitlines())


def test_doctor_tells_the_owner_a_moved_home_applies_no_rule(
    owner_rules: Settings, env: dict[str, str], tmp_path: Path
) -> None:
    moved = tmp_path / "repo" / ".placet"
    write_rules(owner_settings({**env, "PLACET_HOME": str(moved)}), MINIMAL)
    doctor = placet_cli("doctor", env={**env, "PLACET_HOME": str(moved)})
    line = next(x for x in doctor.stdout.splitlines() if x.startswith("FAIL  rules"))
    assert "PLACET_HOME is set" in line
    assert ".mcp.json" in doctor.stdout


def test_a_rules_file_inside_a_root_a_proposal_used_is_refused(
    owner_rules: Settings, env: dict[str, str]
) -> None:
    root = owner_rules.config_file.parent.parent  # the config folder lies inside this "root"
    with open_store(owner_rules) as store:
        store.create_proposal(
            kind="upload",
            request={"kind": "upload", "root": {"name": "r", "path": str(root), "device": 1,
                     "inode": 1}, "local_path": "a", "remote_parent": "", "name": "a"},
            evidence={}, reason="r", drive_spec="x", run_id="r", ttl_seconds=600,
        )  # fmt: skip
    listed = placet_cli("rules", "list", env=env)
    assert listed.returncode == 1
    assert "lies inside the local root" in listed.stdout


def test_rules_sign_names_the_file_its_hash_and_the_page(
    owner_rules: Settings, env: dict[str, str]
) -> None:
    done = placet_cli("rules", "sign", "--port", "8799", env=env)
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(MINIMAL).hexdigest() in done.stdout
    assert "signed: no (the rules file as it is now" in done.stdout
    assert "sign it with your passkey at http://localhost:8799/rules" in done.stdout
