"""`placet review` runs its host's executor loop: a proposal of this host
approved on another host runs in the review UI's process while it is open, and quitting
stops the loop. On both backends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.rig import PLACET, Rig, approve_on_host_b
from tests.support.terminal import PtyProcess

pytestmark = pytest.mark.usefixtures("store_backend")


@pytest.mark.timeout(120)
def test_review_runs_what_another_host_approved_and_quits_cleanly(
    configured_rig: Rig, tmp_path: Path
) -> None:
    rig = configured_rig
    rig.write("from-review.txt", b"run by placet review's host loop\n")
    rec = rig.upload("from-review.txt")
    env = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8")
    review = PtyProcess([str(PLACET), "review"], env)
    try:
        assert review.wait_for(b"Queue", timeout=30), review.bytes()[-2000:]
        approve_on_host_b(rig, tmp_path, rec, "placet review's host loop")
        assert rig.store.get(rec.id).status == "succeeded"
        claims = [e for e in rig.store.audit_events(proposal_id=rec.id) if e.detail.get("holder")]
        assert [e.detail["holder"]["pid"] for e in claims] == [review.pid]
        assert (rig.remote_dir or Path()).joinpath("from-review.txt").exists()
        review.send("q")
        assert review.wait_exit(20) == 0
    finally:
        review.kill()
