"""A remote that cannot be reached fails its ops as retryable and loses nothing; once it
is back, accepting the failed proposal again completes it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from placet.config import Settings
from placet.drive import RcloneDrive
from tests.support.rig import make_rig, sha256, temp_names

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


def test_webdav_down_then_back(
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
    start_server: Callable[[str], ServedRemote],
) -> None:
    served = start_server("webdav")
    rig = make_rig(settings, make_drive(served.spec()), tmp_path, served.root)
    data = os.urandom(256 * 1024)
    rig.write("up.bin", data)
    (served.root / "down.bin").write_bytes(b"remote bytes")
    rig.local("in").mkdir()
    up = rig.upload("up.bin")
    down = rig.download("down.bin", "in/down.bin")
    mk = rig.mkdir("", "folder")

    served.stop()
    for rec in (up, down, mk):
        final = rig.run(rec)
        assert final.status == "failed"
        [res] = rig.store.op_results(rec.id)
        assert res.outcome == "failed"
        assert res.detail["code"] == "drive_unavailable", res.detail
        assert res.detail["retryable"] is True
    assert sorted(os.listdir(served.root)) == ["down.bin"]
    assert os.listdir(rig.local("in")) == []

    served.start()  # same port
    for rec in (up, down, mk):
        final = rig.run(rec)  # failed -> approved -> executing -> succeeded
        assert final.status == "succeeded", rig.store.op_results(rec.id)
        assert final.attempt == 2
    assert (served.root / "up.bin").read_bytes() == data
    assert rig.store.op_results(up.id)[0].detail["sha256"] == sha256(data)
    assert rig.local("in/down.bin").read_bytes() == b"remote bytes"
    assert (served.root / "folder").is_dir()
    assert temp_names(served.root) == [] and temp_names(rig.root.path) == []
    events = [e.to_status for e in rig.store.audit_events(proposal_id=up.id)]
    assert events == [
        "pending", "approved", "executing", "failed", "approved", "executing", "succeeded",
    ]  # fmt: skip
    assert rig.store.verify_audit().ok
