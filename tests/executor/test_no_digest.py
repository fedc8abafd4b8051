"""A remote without digests binds a proposal to content, not to size and mtime.

`rclone serve webdav` on 127.0.0.1 reports no digest. Size and mtime alone would let
remote content rewritten with the same size and its mtime restored be downloaded as
approved, or a `replace_existing` upload overwrite content the owner never saw. So the
remote bytes are read at proposal time (up to `CONTENT_READ_MAX`) and their SHA-256
recorded; the executor compares the bytes it reads with it, and a larger file is refused.
"""

from __future__ import annotations

import pytest

from placet.errors import LimitExceeded
from placet.proposals.evidence import CONTENT_READ_MAX
from tests.support.rig import Rig, rewrite_same_size, sha256


def test_a_download_is_bound_to_the_bytes_it_was_proposed_for(webdav_rig: Rig) -> None:
    assert webdav_rig.remote_dir is not None
    (webdav_rig.remote_dir / "r.txt").write_bytes(b"what the owner saw\n")
    rec = webdav_rig.download("r.txt", "r.txt")
    remote = rec.evidence["remote"]
    assert remote["read_by_placet"] is True
    assert (remote["digest_type"], remote["digest"]) == ("sha256", sha256(b"what the owner saw\n"))
    rewrite_same_size(webdav_rig.remote_dir / "r.txt", b"what the owner never\n"[:19])
    done = webdav_rig.run(rec)
    assert done.status == "failed"
    assert webdav_rig.result(rec).outcome == "stale"
    assert not webdav_rig.local("r.txt").exists()


def test_an_unchanged_download_says_how_it_was_verified(webdav_rig: Rig) -> None:
    assert webdav_rig.remote_dir is not None
    (webdav_rig.remote_dir / "r.txt").write_bytes(b"content\n")
    rec = webdav_rig.download("r.txt", "r.txt")
    assert webdav_rig.run(rec).status == "succeeded"
    assert webdav_rig.result(rec).detail["verification"] == "readback:sha256"
    assert webdav_rig.local("r.txt").read_bytes() == b"content\n"


def test_a_replacement_never_overwrites_content_the_owner_did_not_see(webdav_rig: Rig) -> None:
    assert webdav_rig.remote_dir is not None
    (webdav_rig.remote_dir / "t.txt").write_bytes(b"remote as the owner saw it\n")
    webdav_rig.write("t.txt", b"the new local version\n")
    rec = webdav_rig.upload("t.txt", "", replace_existing=True)
    assert rec.evidence["remote"]["read_by_placet"] is True
    rewrite_same_size(webdav_rig.remote_dir / "t.txt", b"remote rewritten unseen!!\n\n")
    done = webdav_rig.run(rec)
    assert done.status == "failed" and webdav_rig.result(rec).outcome == "stale"
    assert (webdav_rig.remote_dir / "t.txt").read_bytes() == b"remote rewritten unseen!!\n\n"


def test_a_file_too_large_to_read_is_refused(webdav_rig: Rig) -> None:
    assert webdav_rig.remote_dir is not None
    with open(webdav_rig.remote_dir / "big.bin", "wb") as f:
        f.truncate(CONTENT_READ_MAX + 1)  # sparse: nothing is read before the refusal
    with pytest.raises(LimitExceeded) as e:
        webdav_rig.download("big.bin", "big.bin")
    assert e.value.error_code == "remote_unverifiable"
    assert "offers no digest" in e.value.message
