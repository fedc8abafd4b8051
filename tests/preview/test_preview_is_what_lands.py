"""A preview is of what lands: a file edited after proposing is "changed since proposed",
its new bytes are never shown as the drive's new content, and the op ends `stale`.

Real parts: the proposing core, a real root and local-folder drive through rclone, the
executor, and the installed `placet` command for `placet show --diff`.
"""

from __future__ import annotations

import os

from placet.executor import op_at
from placet.preview.model import render_op
from placet.preview.opening import open_preview
from tests.support.rig import Rig, placet_cli, rewrite_same_size


def _shown(rig: Rig, pid: int) -> str:
    rec = rig.store.get(pid)
    op = op_at(rig.store, rec, 0)
    r = render_op(open_preview(rig.store, rig.settings, rec, op, lambda: rig.drive))
    return "\n".join([r.title, *(line.text for line in r.lines)])


def test_an_edit_after_proposing_shows_changed_and_the_op_ends_stale(configured_rig: Rig) -> None:
    rig = configured_rig
    assert rig.remote_dir is not None
    (rig.remote_dir / "plan.md").write_bytes(b"step 1\nstep 2\n")
    rig.write("plan.md", b"step 1\nstep 2 reviewed\n")
    rec = rig.upload("plan.md", replace_existing=True)
    assert (
        "+step 2 reviewed" in placet_cli("show", str(rec.id), "--diff", env=dict(os.environ)).stdout
    )
    rig.write("plan.md", b"step 1\nrm -rf / by the agent later\n")  # after proposing
    shown = _shown(rig, rec.id)
    assert "changed since proposed" in shown
    assert "rm -rf" not in shown and "reviewed" not in shown
    cli = placet_cli("show", str(rec.id), "--diff", env=dict(os.environ))
    assert cli.returncode == 0, cli.stderr
    assert "changed since proposed" in cli.stdout and "rm -rf" not in cli.stdout
    done = rig.run(rec)
    assert done.status == "failed"
    assert rig.result(rec).outcome == "stale"
    assert (rig.remote_dir / "plan.md").read_bytes() == b"step 1\nstep 2\n"


def test_a_same_size_same_mtime_rewrite_is_caught_by_its_digest(rig: Rig) -> None:
    path = rig.write("key.txt", b"value=1\n")
    rec = rig.upload("key.txt")
    rewrite_same_size(path, b"value=9\n")
    shown = _shown(rig, rec.id)
    assert "changed since proposed" in shown and "SHA-256" in shown
    assert "value=9" not in shown and "value=1" not in shown


def test_the_drive_s_file_changed_after_proposing_is_said_too(rig: Rig) -> None:
    assert rig.remote_dir is not None
    target = rig.remote_dir / "notes.txt"
    target.write_bytes(b"old\n")
    rig.write("notes.txt", b"new\n")
    rec = rig.upload("notes.txt", replace_existing=True)
    target.write_bytes(b"someone else's edit, longer\n")
    shown = _shown(rig, rec.id)
    assert "the file it replaces (on the drive): changed since proposed" in shown
    assert "someone else" not in shown
    assert "new" in shown  # the new content is still the proposed one, shown alone
