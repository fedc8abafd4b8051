"""`placet accept 3 4 5` and `placet discard 3 4 5`: one confirmation code for exactly the
proposals shown, all of them or none; and a sync's selection that unticks a folder its
ticked ops go into is refused before the code is asked."""

from __future__ import annotations

import os
import re

from tests.support.rig import PLACET, Rig, mkdir_ops, placet_cli
from tests.support.terminal import PtyProcess


def _code(out: bytes) -> str:
    m = re.search(rb"type the code ([A-Z0-9]{6})", out)
    assert m, out.decode(errors="replace")
    return m.group(1).decode()


def _approvals(rig: Rig, pid: int) -> list[dict[str, object]]:
    return [e.detail for e in rig.store.audit_events(proposal_id=pid) if e.to_status == "approved"]


def test_one_code_accepts_three_proposals_and_runs_them(configured_rig: Rig) -> None:
    rig = configured_rig
    assert rig.remote_dir is not None
    recs = []
    for name in ("a.txt", "b.txt", "c.txt"):
        rig.write(name, f"bytes of {name}".encode())
        recs.append(rig.upload(name, "team"))
    p = PtyProcess([str(PLACET), "accept", *(str(r.id) for r in recs)], dict(os.environ))
    try:
        assert p.wait_for(b"type the code ")
        prompt = p.bytes().decode(errors="replace")
        for r in recs:  # the one prompt names each proposal with its request hash
            assert f"{r.id} ({r.request_hash[:12]})" in prompt, prompt
        p.send(_code(p.bytes()) + "\r")
        assert p.wait_exit(60) == 0, p.bytes().decode(errors="replace")
    finally:
        p.kill()
    ids = [r.id for r in recs]
    for r in recs:
        assert rig.store.get(r.id).status == "succeeded"
        [detail] = _approvals(rig, r.id)
        assert detail["via"] == "terminal" and detail["request_hash"] == r.request_hash
        assert [e["proposal_id"] for e in detail["set"]] == ids  # type: ignore[index, union-attr]
    assert sorted(os.listdir(rig.remote_dir / "team")) == ["a.txt", "b.txt", "c.txt"]


def test_a_set_with_one_proposal_no_longer_pending_is_refused_whole(yes_rig: Rig) -> None:
    rig = yes_rig
    rig.write("a.txt", b"a")
    rig.write("b.txt", b"b")
    a, b = rig.upload("a.txt"), rig.upload("b.txt")
    rig.store.discard(b.id, reason="decided elsewhere")
    r = placet_cli("accept", str(a.id), str(b.id), "--yes", env=dict(os.environ))
    assert r.returncode == 4, r
    assert "set_refused" in r.stderr and f"#{b.id}" in r.stderr and "discarded" in r.stderr
    assert rig.store.get(a.id).status == "pending"  # nothing of the set was approved
    assert _approvals(rig, a.id) == []


def test_skip_of_a_folder_that_ticked_uploads_go_into_is_refused(yes_rig: Rig) -> None:
    """Unticking `create folder s/sub` while an upload into it stays ticked: rclone would
    create the folder anyway while the journal says placet did nothing for it."""
    rig = yes_rig
    assert rig.remote_dir is not None
    ops = [*mkdir_ops(["s", "s/sub"]), rig.upload_op(2, "s/sub/a.txt", b"inside")]
    rec, _ = rig.propose_ops(ops)
    r = placet_cli("accept", str(rec.id), "--skip", "1", "--yes", env=dict(os.environ))
    assert r.returncode == 2, r
    assert "folder_unticked" in r.stderr and "#1" in r.stderr and "#2" in r.stderr
    assert rig.store.get(rec.id).status == "pending"
    assert not (rig.remote_dir / "s").exists()
    # unticking the upload too is a selection the core accepts: only `s` is made
    r = placet_cli(
        "accept", str(rec.id), "--skip", "1", "--skip", "2", "--yes", env=dict(os.environ)
    )
    assert r.returncode == 0, r
    assert (rig.remote_dir / "s").is_dir() and not (rig.remote_dir / "s" / "sub").exists()


def test_one_code_discards_several_and_names_each(configured_rig: Rig) -> None:
    rig = configured_rig
    rig.write("a.txt", b"a")
    rig.write("b.txt", b"b")
    a, b = rig.upload("a.txt"), rig.upload("b.txt")
    # without a terminal, several are not discarded (one still is, as it always was)
    r = placet_cli("discard", str(a.id), str(b.id), env=dict(os.environ))
    assert r.returncode == 4 and "no_terminal" in r.stderr, r
    assert rig.store.get(a.id).status == rig.store.get(b.id).status == "pending"
    argv = [str(PLACET), "discard", str(a.id), str(b.id), "--reason", "not today"]
    p = PtyProcess(argv, dict(os.environ))
    try:
        assert p.wait_for(b"type the code ")
        prompt = p.bytes().decode(errors="replace")
        assert f"{a.id} ({a.request_hash[:12]})" in prompt
        assert f"{b.id} ({b.request_hash[:12]})" in prompt
        p.send(_code(p.bytes()) + "\r")
        assert p.wait_exit(60) == 0, p.bytes().decode(errors="replace")
    finally:
        p.kill()
    for rec in (a, b):
        assert rig.store.get(rec.id).status == "discarded"
        [event] = [
            e for e in rig.store.audit_events(proposal_id=rec.id) if e.to_status == "discarded"
        ]
        assert event.detail == {"reason": "not today"}
