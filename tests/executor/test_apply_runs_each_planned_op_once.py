"""Applying a sync runs exactly the ops that were planned, each once, on the two shapes
real trees have (packages: folders of a few to many files with some past a batch's
largest file; deep: 1-10 files per folder, six levels) and on two drives (a local folder,
`rclone serve sftp`): folders are created in batches and small files batched across
folders (placet.executor.folders, placet.executor.batch), yet each planned op has one
result, ended once, and the drive holds exactly the local tree and no temporary name.
(A kill -9 mid-apply, then accepting again: tests/executor/test_batch.py.)

Everything is real: the sync service plans, `execute` runs with the rclone binary, the
journal is the SQLite store.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.executor.ops import load_plan
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.rig import Rig, make_rig, temp_names
from tests.support.trees import deep_tree, package_tree

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

SHAPES: dict[str, Callable[[Rig], list[str]]] = {
    "packages": lambda rig: package_tree(rig.write),
    "deep": lambda rig: deep_tree(rig.write, 400),
}


@pytest.fixture(params=["local"])
def drive_rig(
    request: pytest.FixtureRequest,
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
    sub: str,
) -> Rig:
    if request.param == "local":
        remote = tmp_path / "drive"
        remote.mkdir()
        return make_rig(settings, make_drive(str(remote)), tmp_path, remote)
    server: ServedRemote = request.getfixturevalue("sftp_server")
    (server.root / sub).mkdir()
    return make_rig(settings, make_drive(server.spec(sub)), tmp_path, server.root / sub)


def _files(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under `folder` by relative path."""
    out = {}
    for dirpath, _, filenames in os.walk(folder):
        for n in filenames:
            p = Path(dirpath, n)
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_planned_op_runs_once_and_the_drive_holds_the_tree(drive_rig: Rig, shape: str) -> None:
    rig = drive_rig
    assert rig.remote_dir is not None
    names = SHAPES[shape](rig)
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False,
                         allow_empty_side=False)  # fmt: skip
    rec, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="shape")
    planned = load_plan(rig.store, rig.store.get(rec.id)).ops
    folders = {str(Path(n).parent) for n in names}
    folders |= {str(p) for f in folders for p in Path(f).parents if str(p) != "."}
    assert Counter(op.kind for op in planned) == {"mkdir": len(folders), "upload": len(names)}

    final = rig.run(rec)

    assert final.status == "succeeded", rig.store.op_results(rec.id)[:3]
    # One journal row per planned op, holding that op as planned, done.
    rows = {r.op_index: r for r in rig.store.op_results(rec.id)}
    assert sorted(rows) == sorted(op.index for op in planned)
    assert all(rows[op.index].op == op.model_dump(mode="json") for op in planned)
    assert {r.outcome for r in rows.values()} == {"done"}
    # Each op ended once: one result event per op.
    ended = [e.op_result.op_index for e in rig.events if e.op_result is not None]
    assert sorted(ended) == sorted(rows)
    # The drive holds exactly the local tree, and no temporary name.
    assert _files(rig.remote_dir) == _files(rig.root.path)
    assert temp_names(rig.remote_dir) == []
