"""Previews captured when a proposal is made: the bytes the evidence's digest names.

Real parts: the proposing core the MCP tools use (`placet.proposals.making`), a real
local root, a local-folder drive through the real rclone binary, the SQLite store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

from placet.config import RootPolicy
from placet.executor import op_at
from placet.local import hashing
from placet.preview.model import render_op
from placet.preview.opening import open_preview
from tests.support.rig import Rig


def test_the_digest_read_keeps_the_first_bytes_of_what_it_hashed(rig: Rig) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, two hash types: two threads, one keeps
    path = rig.write("big.bin", data)
    fd = os.open(path, os.O_RDONLY)
    try:
        digests, size, head = hashing.hash_fd_head(fd, ["sha256", "sha1"], 70_000, chunk=4096)
    finally:
        os.close(fd)
    assert (size, head) == (len(data), data[:70_000])
    assert digests["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_new_upload_stores_its_head_from_the_same_read(rig: Rig) -> None:
    rig.write("notes.txt", b"first line\nsecond line\n")
    rec = rig.upload("notes.txt")
    stored = rig.store.previews_of(rec.id, 0)
    assert set(stored) == {"new"}
    assert stored["new"].content == b"first line\nsecond line\n"
    assert (stored["new"].binding, stored["new"].size) == ("same_read", 23)
    shown = render_op(open_preview(rig.store, rig.settings, rec, op_at(rig.store, rec, 0)))
    assert [line.text for line in shown.lines if line.kind == "text"] == [
        "first line",
        "second line",
    ]
    assert "captured by the read that computed its digest" in shown.lines[0].text


def test_a_replacement_stores_the_drive_s_current_bytes_checked_by_digest(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "report.md").write_bytes(b"# Report\nold total: 3\nend\n")
    rig.write("report.md", b"# Report\nnew total: 4\nend\n")
    rec = rig.upload("report.md", replace_existing=True)
    stored = rig.store.previews_of(rec.id, 0)
    assert stored["current"].content == b"# Report\nold total: 3\nend\n"
    assert stored["current"].binding == "digest"
    shown = render_op(open_preview(rig.store, rig.settings, rec, op_at(rig.store, rec, 0),
                                   lambda: rig.drive))  # fmt: skip
    assert (shown.added, shown.removed) == (1, 1)
    diff = [(line.kind, line.text) for line in shown.lines if line.kind in ("add", "del")]
    assert diff == [("del", "old total: 3"), ("add", "new total: 4")]


def test_a_larger_file_is_kept_partial_within_the_per_op_cap(local_rig: Callable[..., Rig]) -> None:
    rig = local_rig(preview_op_bytes=1000)
    rig.write("log.txt", b"x" * 5000)
    rec = rig.upload("log.txt")
    stored = rig.store.previews_of(rec.id, 0)["new"]
    assert (len(stored.content), stored.size, stored.partial) == (1000, 5000, True)
    shown = render_op(open_preview(rig.store, rig.settings, rec, op_at(rig.store, rec, 0)))
    assert any("only the first 1000 B of 4.9 KiB" in line.text for line in shown.lines)


def test_one_proposal_stores_no_more_than_its_cap(local_rig: Callable[..., Rig]) -> None:
    rig = local_rig(preview_op_bytes=3000, preview_proposal_bytes=4000)
    assert rig.remote_dir is not None
    (rig.remote_dir / "a.txt").write_bytes(b"o" * 3500)
    rig.write("a.txt", b"n" * 3500)
    rec = rig.upload("a.txt", replace_existing=True)
    assert rig.store.preview_bytes(rec.id) == 4000
    stored = rig.store.previews_of(rec.id, 0)
    assert len(stored["new"].content) + len(stored["current"].content) == 4000


def test_previews_turned_off_store_nothing_and_show_nothing(local_rig: Callable[..., Rig]) -> None:
    rig = local_rig(preview_op_bytes=0)
    rig.write("a.txt", b"secret plan\n")
    rec = rig.upload("a.txt")
    assert rig.store.preview_bytes(rec.id) == 0
    shown = render_op(open_preview(rig.store, rig.settings, rec, op_at(rig.store, rec, 0)))
    assert "previews are off" in shown.lines[0].text
    assert all("secret" not in line.text for line in shown.lines)


def test_a_download_stores_the_remote_bytes_and_the_local_file_it_replaces(
    local_rig: Callable[..., Rig],
) -> None:
    rig = local_rig()
    assert rig.remote_dir is not None
    (rig.remote_dir / "cfg.toml").write_bytes(b"level = 2\n")
    rig.write("cfg.toml", b"level = 1\n")
    policy = {str(rig.root.path): RootPolicy(downloads="allow-overwrite")}
    rig.settings = rig.settings.model_copy(update={"roots": policy})
    rec = rig.download("cfg.toml", "cfg.toml", overwrite=True)
    stored = rig.store.previews_of(rec.id, 0)
    assert (stored["new"].content, stored["new"].binding) == (b"level = 2\n", "digest")
    assert (stored["current"].content, stored["current"].binding) == (b"level = 1\n", "same_read")
    shown = render_op(open_preview(rig.store, rig.settings, rec, op_at(rig.store, rec, 0),
                                   lambda: rig.drive))  # fmt: skip
    assert [(x.kind, x.text) for x in shown.lines if x.kind in ("add", "del")] == [
        ("del", "level = 1"),
        ("add", "level = 2"),
    ]
