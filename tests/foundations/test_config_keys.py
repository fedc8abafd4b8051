"""config.toml keys: an earlier name of a key is still read, never beside its current name."""

from __future__ import annotations

from pathlib import Path

import pytest

from placet.config import LEGACY_KEYS, load_settings
from placet.errors import ConfigError


def _load(tmp_path: Path, text: str) -> object:
    (tmp_path / "config.toml").write_text(text)
    return load_settings({"PLACET_HOME": str(tmp_path)})


def test_the_earlier_name_of_the_session_cap_is_read(tmp_path: Path) -> None:
    assert LEGACY_KEYS["pending_per_bridge"] == "pending_per_session"
    settings = _load(tmp_path, "pending_per_bridge = 7\n")
    assert settings.pending_per_session == 7  # type: ignore[attr-defined]
    settings = _load(tmp_path, "pending_per_session = 8\n")
    assert settings.pending_per_session == 8  # type: ignore[attr-defined]


def test_both_names_at_once_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="same setting") as e:
        _load(tmp_path, "pending_per_bridge = 7\npending_per_session = 8\n")
    assert e.value.details["keys"] == ["pending_per_bridge", "pending_per_session"]


def test_an_unknown_key_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        _load(tmp_path, "pending_per_bridges = 7\n")
