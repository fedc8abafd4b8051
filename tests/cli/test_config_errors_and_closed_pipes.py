"""Configuration errors and closed pipes: one clear line, the right exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from placet.config import check_private_dir, ensure_data_dir, load_settings
from placet.errors import ConfigError

PLACET = [sys.executable, "-m", "placet"]


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLACET, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )


def test_shared_sticky_dir_suggests_private_dir_not_chmod(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(ConfigError) as ei:
        check_private_dir(shared)
    assert "chmod" not in ei.value.message
    assert "~/.local/share" in ei.value.message
    r = _run({"PLACET_DB": str(shared / "x.db")}, "list")
    assert r.returncode != 0
    assert "chmod" not in r.stderr and "PLACET_DB" in r.stderr


def test_group_writable_own_dir_may_still_suggest_chmod(tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    d.chmod(0o775)
    with pytest.raises(ConfigError) as ei:
        check_private_dir(d)
    assert "chmod go-w" in ei.value.message


def test_placet_home_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError) as ei:
        ensure_data_dir(load_settings({"PLACET_HOME": str(f)}))
    assert "not a directory" in ei.value.message
    r = _run({"PLACET_HOME": str(f)}, "list")
    assert r.returncode == ConfigError.exit_code
    assert "FileExistsError" not in r.stderr and "not a directory" in r.stderr


def test_closed_stdout_is_quiet(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    p = subprocess.Popen(
        [*PLACET, "config", "claude", "--root", str(root), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader went away before placet wrote anything
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    assert "BrokenPipeError" not in err
    assert "Traceback" not in err
    assert rc == 0


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[roots."/tmp/nc-proj"]\ndownloads = "bogus"\n', 'roots."/tmp/nc-proj".downloads'),
        ("transfers = 99\n", "transfers"),
        ("plan_entry_cap = 1000001\n", "plan_entry_cap"),
        ("[roots.proj_1]\ndownloads = 3\n", "roots.proj_1.downloads"),
        ("min_ttl_minutes = 0\n", "min_ttl_minutes"),
        ("min_ttl_minutes = 31\n", "min_ttl_minutes"),
        ("max_ttl_minutes = 10\nmin_ttl_minutes = 20\n", "min_ttl_minutes"),
    ],
)
def test_invalid_setting_names_the_toml_key_and_the_file(
    tmp_path: Path, toml: str, key: str
) -> None:
    (tmp_path / "config.toml").write_text(toml)
    r = _run({"PLACET_HOME": str(tmp_path)}, "list")
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    assert f"invalid setting {key} in {tmp_path / 'config.toml'}: " in r.stderr, r.stderr
    assert "('" not in r.stderr


def test_config_without_root_names_the_command_run(tmp_path: Path) -> None:
    r = _run({"PLACET_HOME": str(tmp_path)}, "config", "claude")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "placet config claude needs at least one --root" in r.stderr.replace(
        ": --root", " --root"
    )
    assert "placet serve" not in r.stderr
