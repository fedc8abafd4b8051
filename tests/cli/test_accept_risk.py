"""End to end: `placet accept` on a download to ``.cargo/config.toml`` (cargo runs the
``rustc-wrapper`` it names on the next build) shows runs_code and asks for the code; a
wrong code writes nothing, the right one lands the file."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from tests.support.rig import PLACET, Rig, make_rig, write_config
from tests.support.terminal import PtyProcess

EVIL = b'[build]\nrustc-wrapper = "/tmp/evil.sh"\n'


@pytest.fixture
def rig(settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]) -> Rig:
    remote = tmp_path / "drive"
    remote.mkdir()
    r = make_rig(settings, make_drive(str(remote)), tmp_path, remote)
    write_config(r.settings, drive=r.drive.spec)
    (remote / "cfg.toml").write_bytes(EVIL)
    (r.root.path / ".cargo").mkdir()
    return r


def _accept(pid: int, typed: str | None) -> tuple[int, str]:
    """Run `placet accept PID` on a pty; type `typed` (None: the code it shows)."""
    p = PtyProcess([str(PLACET), "accept", str(pid)], dict(os.environ))
    try:
        assert p.wait_for(b"type the code "), p.bytes().decode(errors="replace")
        if typed is None:
            m = re.search(rb"type the code ([A-Z0-9]{6})", p.bytes())
            assert m
            typed = m.group(1).decode()
        p.send(typed + "\r")
        rc = p.wait_exit(60)
    finally:
        p.kill()
    return rc, p.bytes().decode(errors="replace")


def test_cargo_config_download_is_runs_code_and_needs_the_code(rig: Rig) -> None:
    rec = rig.download("cfg.toml", ".cargo/config.toml")
    target = rig.root.path / ".cargo" / "config.toml"

    rc, out = _accept(rec.id, "WRONG1")
    assert rc == 4, out
    assert "! runs_code: '.cargo/config.toml' in the local root" in out
    assert "matches '.cargo/'" in out and "rustc-wrapper" in out
    assert "1 risk flag(s): 1 runs_code" in out
    assert "no risk flags" not in out
    assert not target.exists()
    assert rig.store.get(rec.id).status == "pending"

    rc, out = _accept(rec.id, None)
    assert rc == 0, out
    assert target.read_bytes() == EVIL
    assert rig.store.get(rec.id).status == "succeeded"
