"""Standing rules in tests: an owner whose placet config sits in its default folder (no
`PLACET_HOME`: rules apply only from there), and the rules file written as the owner
writes it (0600, in a 0700 folder)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from placet.config import Settings, load_settings
from placet.decisions.standing import approve_by_rule
from placet.executor import load_plan
from placet.rules.approving import RuleApproval
from placet.rules.deciding import RuleOutcome, apply_rules
from placet.rules.loading import rules_path
from placet.schema import Op
from placet.store import ProposalRecord, Store


def become_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Drop `PLACET_HOME` from this process's environment and put HOME and the XDG
    folders in `tmp_path/owner`, so placet's default config and data folders are there
    (platformdirs reads the process's environment); returns that environment, for
    subprocesses."""
    home = tmp_path / "owner"
    monkeypatch.delenv("PLACET_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                     ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state")):  # fmt: skip
        monkeypatch.setenv(var, str(home / sub))
    settings = load_settings()
    assert settings.config_file.is_relative_to(home), settings.config_file
    assert settings.data_dir.is_relative_to(home), settings.data_dir
    return dict(os.environ)


def owner_settings(env: dict[str, str]) -> Settings:
    """The settings placet reads in `env`, which must only add `PLACET_HOME` (or the
    database) to the environment `become_owner` made."""
    return load_settings(env)


def write_rules(settings: Settings, text: bytes) -> Path:
    """Write `rules.toml` beside `settings`' config.toml, 0600 in a 0700 folder."""
    path = rules_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(text)
    path.chmod(0o600)
    return path


def judge_now(store: Store, settings: Settings, record: ProposalRecord, **kw: Any) -> RuleOutcome:
    """`apply_rules` on `record` as `placet serve` calls it (its ops read by
    `load_plan`, approved through the decision core), no roots unless given, the
    environment `{}` (no `PLACET_HOME`) unless given."""
    kw.setdefault("roots", ())
    kw.setdefault("env", {})

    def approve(rec: ProposalRecord, approval: RuleApproval, now: datetime) -> ProposalRecord:
        return approve_by_rule(store, settings, rec, approval, now=now)

    def ops() -> list[Op]:
        return load_plan(store, record).ops

    return apply_rules(store, settings, record, ops_of=ops, approve=approve, **kw)
