"""A sync's previews are read op by op when the owner opens one, never stored when it is
proposed, and each is checked against that op's evidence.

Real parts: the sync service (index, plan, `propose_sync`), a real root and a local-folder
drive through rclone, the SQLite store.
"""

from __future__ import annotations

from collections.abc import Callable

from placet.executor import op_at
from placet.preview.model import render_op
from placet.preview.opening import open_preview
from placet.store import ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.clocks import ScanClock
from tests.support.rig import Rig


def _sync(rig: Rig) -> tuple[ProposalRecord, dict[str, int]]:
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    folder = svc.folder(rig.ctx, "", None)
    stored = svc.make_plan(rig.ctx, folder, "", include_hidden=False, allow_empty_side=False)
    rec, created = propose_sync(svc, rig.ctx, plan_id=stored.id, decisions={}, reason="sync")
    assert created
    index = {str(o["remote_path"]): int(o["index"]) for o in rig.store.ops(rec.id)}
    return rec, index


def _text(rig: Rig, rec: ProposalRecord, index: int) -> str:
    op = op_at(rig.store, rec, index)
    r = render_op(open_preview(rig.store, rig.settings, rec, op, lambda: rig.drive))
    return "\n".join([r.title, *(line.text for line in r.lines)])


def test_sync_ops_are_read_when_opened_and_checked(local_rig: Callable[..., Rig]) -> None:
    rig = local_rig(preview_op_bytes=64)
    assert rig.remote_dir is not None
    rig.write("small.txt", b"hello from the agent\n")
    rig.write("big.txt", b"0123456789\n" * 100)  # 1100 bytes: only 64 are read
    (rig.remote_dir / "remote.txt").write_bytes(b"from the drive\n")
    rec, index = _sync(rig)
    assert rig.store.preview_bytes(rec.id) == 0  # nothing captured at propose time

    small = _text(rig, rec, index["small.txt"])
    assert "hello from the agent" in small and "its digest matches the evidence" in small

    big = _text(rig, rec, index["big.txt"])
    assert "partial, unchecked: only the first 64 B of 1.1 KiB (1100 bytes)" in big
    assert "size and mtime match the evidence" in big

    remote = _text(rig, rec, index["remote.txt"])
    assert "the new content (on the drive): read whole" in remote
    assert "from the drive" in remote

    (rig.remote_dir / "remote.txt").write_bytes(b"rewritten after the plan\n")
    rig.write("small.txt", b"hello, edited later\n")
    assert "changed since proposed" in _text(rig, rec, index["remote.txt"])
    edited = _text(rig, rec, index["small.txt"])
    assert "changed since proposed" in edited and "edited later" not in edited
    assert rig.store.preview_bytes(rec.id) == 0  # opening stores nothing either
