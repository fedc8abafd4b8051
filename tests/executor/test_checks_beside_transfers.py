"""A sync's checks over every op run beside its transfers (placet.executor.beside), so the
first op starts right after the owner's decision, and each still holds: an op into
placet's own folders fails alone and writes nothing there, op rows rewritten after the
owner was shown the ops stop the run as `request_altered`, and a folder's old
temporary names are removed before the first transfer into it.

Everything is real: the SQLite store, a local-folder drive through the rclone binary,
plans made by the sync service.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.executor import execute, load_plan
from placet.names import TEMP_PREFIX
from placet.schema import canonical_json
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.rig import Rig, make_rig, mkdir_ops


def test_a_sync_op_into_placet_folders_fails_alone_and_the_others_run(
    settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """The drive is a local folder holding placet's data dir; a sync approved straight in
    the store (past every front end's check) makes a folder there and one beside it."""
    home = settings.data_dir
    assert home.parent == tmp_path
    rig = make_rig(settings, make_drive(str(tmp_path)), tmp_path / "up", tmp_path)
    rec, _ = rig.propose_ops(mkdir_ops([f"{home.name}/hooks", "fine"]))
    rig.accept(rec)
    final = execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert final.status == "failed"
    bad, good = rig.store.op_results(rec.id)
    assert (bad.op_index, bad.outcome, bad.detail["code"]) == (0, "failed", "placet_own_path")
    assert "refusing to execute" in bad.detail["message"] and str(home) in bad.detail["message"]
    assert (good.op_index, good.outcome) == (1, "done")
    assert (tmp_path / "fine").is_dir() and not (home / "hooks").exists()


def test_op_rows_rewritten_after_the_owner_was_shown_them_stop_the_run(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rec, _ = rig.propose_ops(mkdir_ops(["d000", "d001", "d002"]))
    shown = load_plan(rig.store, rec)  # what `placet accept` read and showed
    rig.accept(rec)
    row = rig.store.ops(rec.id, start=1, limit=1)[0] | {"remote_path": "elsewhere"}
    con = sqlite3.connect(rig.settings.db_path)
    with con:  # a database writer edits one op row, not the request
        con.execute(
            "UPDATE proposal_op SET op = ? WHERE proposal_id = ? AND op_index = 1",
            (canonical_json(row), rec.id),
        )
    con.close()
    final = execute(rig.store, rig.settings, rec.id, drive=rig.drive, shown=shown)
    assert final.status == "failed"
    assert final.summary is not None and final.summary["error"]["code"] == "request_altered"
    assert "elsewhere" not in os.listdir(rig.remote_dir)  # only ops the owner was shown ran


def test_old_temporary_names_in_a_target_folder_go_before_its_first_transfer(
    rig: Rig,
) -> None:
    assert rig.remote_dir is not None
    for i in range(3):
        rig.write(f"docs/f{i}.txt", f"file {i}\n".encode())
    (rig.remote_dir / "docs").mkdir()
    stale = rig.remote_dir / "docs" / f"{TEMP_PREFIX}0123456789ab-f0.txt"
    stale.write_bytes(b"left by a crash")
    old = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    os.utime(stale, (old, old))
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False,
                         allow_empty_side=False)  # fmt: skip
    rec, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="sweep")
    final = rig.run(rec)
    assert final.status == "succeeded", rig.store.op_results(rec.id)
    assert not stale.exists()
    assert final.summary is not None
    assert final.summary["temps_removed"] == [f"remote:docs/{stale.name}"]
