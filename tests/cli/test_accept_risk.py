"""End to end: `placet accept` on a download to ``.cargo/config.toml`` (cargo runs the
``rustc-wrapper`` it names on the next build) shows runs_code and asks for the code; a
wrong code writes nothing, the right one lands the file."""

from __future__ import annotations

import os
import re

import pytest

from tests.support.rig import PLACET, Rig
from tests.support.terminal import PtyProcess

EVIL = b'[build]\nrustc-wrapper = "/tmp/evil.sh"\n'


@pytest.fixture
def cargo_rig(configured_rig: Rig) -> Rig:
    """`configured_rig` with `EVIL` on the drive (`cfg.toml`) and a `.cargo` folder in its root."""
    assert configured_rig.remote_dir is not None
    (configured_rig.remote_dir / "cfg.toml").write_bytes(EVIL)
    (configured_rig.root.path / ".cargo").mkdir()
    return configured_rig


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


def test_cargo_config_download_is_runs_code_and_needs_the_code(cargo_rig: Rig) -> None:
    rec = cargo_rig.download("cfg.toml", ".cargo/config.toml")
    target = cargo_rig.root.path / ".cargo" / "config.toml"

    rc, out = _accept(rec.id, "WRONG1")
    assert rc == 4, out
    assert "! runs_code: '.cargo/config.toml' in the local root" in out
    assert "matches '.cargo/'" in out and "rustc-wrapper" in out
    assert "1 risk flag(s): 1 runs_code" in out
    assert "no risk flags" not in out
    assert not target.exists()
    assert cargo_rig.store.get(rec.id).status == "pending"

    rc, out = _accept(rec.id, None)
    assert rc == 0, out
    assert target.read_bytes() == EVIL
    assert cargo_rig.store.get(rec.id).status == "succeeded"
