"""The drive an accept runs on is opened while the owner decides (`decisions.warm_for`),
only when a proposal runs here on the configured drive, and a close, even one that comes
while its rclone rcd is still starting, leaves no rcd running."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from placet import decisions
from placet.config import Settings
from placet.decisions import WarmDrive
from placet.drive import RcloneDrive, configured_spec, drive_for
from placet.errors import ConfigError
from placet.store import Store
from tests.support.mcp import rclone_children
from tests.support.processes import alive
from tests.support.review import add_upload


def test_a_close_while_rcd_starts_leaves_no_rcd(settings: Settings) -> None:
    before = set(rclone_children(os.getpid()))
    warm = WarmDrive(settings)
    warm.close()  # at once: the warming thread may be anywhere in opening the drive
    assert warm.drive() is None  # waits for the warming to end
    assert set(rclone_children(os.getpid())) <= before


def test_a_warmed_drive_runs_rcd_until_closed(settings: Settings) -> None:
    with WarmDrive(settings) as warm:
        drive = warm.drive()
        assert isinstance(drive, RcloneDrive) and drive.spec == configured_spec(settings)
        pid = drive.rcd_pid
        assert pid is not None and alive(pid)
    assert not alive(pid)
    assert warm.drive() is None


def test_only_a_proposal_run_here_on_the_configured_drive_warms_it(
    settings: Settings, store: Store
) -> None:
    here = store.host_id
    other_drive = add_upload(store, drive_spec="elsewhere:drive")
    assert decisions.warm_for(settings, here, [other_drive]).drive() is None
    mine = add_upload(store, drive_spec=configured_spec(settings), name="b.md")
    assert decisions.warm_for(settings, "another-host-id", [mine]).drive() is None
    with decisions.warm_for(settings, here, [other_drive, mine]) as warm:
        assert warm.drive() is not None


def test_a_warmed_drive_answers_for_the_remote_as_configured_once_caches_are_cleared(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run clears caches as it starts: a remote reconfigured while the owner decided
    (here a case-sensitive alias becomes a case-insensitive local folder) is what the run
    sees, its capabilities included, not what the drive read as it was warmed."""
    folder = tmp_path / "folder"
    folder.mkdir()
    conf = tmp_path / "rclone.conf"
    conf.write_text(f"[r]\ntype = alias\nremote = {folder}\n")
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    with WarmDrive(settings.model_copy(update={"drive": "r:"})) as warm:
        drive = warm.drive()
        assert drive is not None and not drive.capabilities().case_insensitive
        conf.write_text("[r]\ntype = local\ncase_insensitive = true\n")
        drive.clear_caches()
        caps = drive.capabilities()
        assert (caps.backend, caps.case_insensitive) == ("local", True)


def test_a_data_directory_the_drive_cannot_use_is_a_typed_error_not_a_warming_crash(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """placet's runtime folder (rcd's socket, the password token) is a file: the warming
    ends quietly (the owner is still deciding), and opening the drive, as the run does,
    says what is wrong."""
    crashed: list[type[BaseException]] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: crashed.append(a.exc_type))
    settings.run_dir.parent.mkdir(parents=True, exist_ok=True)
    settings.run_dir.write_text("not a folder")
    with WarmDrive(settings) as warm:
        assert warm.drive() is None
    assert crashed == []
    with pytest.raises(ConfigError, match=re.escape(str(settings.run_dir))):
        drive_for(settings)
