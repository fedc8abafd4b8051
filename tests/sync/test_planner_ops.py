"""From a plan plus conflict decisions to `placet.schema.Op`s, and the refusals."""

from __future__ import annotations

import pytest

from placet.errors import UsageError
from placet.schema import Op, SyncRequest
from placet.sync import baseline_for, plan, to_request_ops
from placet.sync.model import SyncPlan
from tests.support.listings import MTIME, SHA1, B, L, R, base, digest, sha256


def _conflicts_plan() -> SyncPlan:
    """One conflict of each kind, plus ordinary ops."""
    return plan(
        [
            L("both.txt", "mine"),
            L("gone-there/a.txt", "edited"),
            L("gone-there", kind="dir"),
            L("folder", kind="dir"),
            L("folder/x", "x"),
            L("new/n.txt", "n"),
            L("k", "k"),
        ],
        [
            R("both.txt", "theirs"),
            R("gone-here.txt", "edited"),
            R("folder", "a file"),
            R("dl.txt", "d"),
            R("k", "k"),
        ],
        base(
            B("both.txt", "old"),
            B("gone-there", None),
            B("gone-there/a.txt", "old"),
            B("gone-here.txt", "old"),
        ),
        SHA1,
    )


ALL_DECIDED = {
    "both.txt": "keep_local",
    "gone-there/a.txt": "keep_local",
    "gone-here.txt": "keep_remote",
    "folder": "skip",
}


def test_conflict_kinds_present() -> None:
    p = _conflicts_plan()
    assert {c.path: c.conflict_kind for c in p.conflicts} == {
        "both.txt": "content_differs",
        "gone-there/a.txt": "edited_here_deleted_there",
        "gone-here.txt": "deleted_here_edited_there",
        "folder": "type_conflict",
    }


def test_decisions_become_ops_mkdirs_first() -> None:
    ops = to_request_ops(
        _conflicts_plan(), ALL_DECIDED, local_prefix="proj", remote_prefix="Agents/proj"
    )
    got = [(o.index, o.kind, o.remote_path) for o in ops]
    assert got == [
        (0, "mkdir", "Agents/proj/gone-there"),
        (1, "mkdir", "Agents/proj/new"),
        (2, "upload_revision", "Agents/proj/both.txt"),
        (3, "download", "Agents/proj/dl.txt"),
        (4, "download", "Agents/proj/gone-here.txt"),
        (5, "upload", "Agents/proj/gone-there/a.txt"),
        (6, "upload", "Agents/proj/new/n.txt"),
    ]
    by = {o.remote_path.removeprefix("Agents/proj/"): o for o in ops}
    rev = by["both.txt"]
    assert rev.replace is True and rev.local_path == "proj/both.txt"
    assert rev.expected_local is not None and rev.expected_local.sha256 == sha256("mine")
    assert rev.expected_remote is not None and rev.expected_remote.digest == digest(
        "sha1", "theirs"
    )
    assert rev.reason.startswith("keep_local")
    up = by["gone-there/a.txt"]
    assert up.replace is False and up.expected_remote is not None and not up.expected_remote.exists
    down = by["gone-here.txt"]
    assert down.replace is False and down.expected_local is None
    assert down.expected_remote is not None and down.expected_remote.digest_type == "sha1"
    assert by["gone-there"].expected_remote is not None
    assert by["gone-there"].expected_remote.exists is False
    # the ops fit the sync request shape the proposal stores
    SyncRequest.model_validate(
        {
            "plan_id": 1,
            "root": {"name": "r", "path": "/r", "device": 1, "inode": 2},
            "local_path": "proj",
            "remote_path": "Agents/proj",
            "decisions": ALL_DECIDED,
            "ops": [o.model_dump(mode="json") for o in ops],
        }
    )


def test_keep_remote_on_content_conflict_replaces_local() -> None:
    p = plan([L("a", "mine")], [R("a", "theirs")], {}, SHA1)
    (op,) = to_request_ops(p, {"a": "keep_remote"})
    assert (op.kind, op.replace) == ("download", True)
    assert op.expected_local is not None and op.expected_local.sha256 == sha256("mine")


def test_skip_decision_yields_no_op() -> None:
    p = plan([L("a", "mine")], [R("a", "theirs")], {}, SHA1)
    assert to_request_ops(p, {"a": "skip"}) == []


def test_undecided_conflict_refused() -> None:
    decisions = dict(ALL_DECIDED)
    del decisions["gone-here.txt"]
    with pytest.raises(UsageError) as ei:
        to_request_ops(_conflicts_plan(), decisions)
    assert ei.value.error_code == "undecided_conflict"
    assert "'gone-here.txt'" in ei.value.message and "keep_remote, skip" in ei.value.message
    assert ei.value.details == {"path": "gone-here.txt", "allowed": ["keep_remote", "skip"]}


def test_decision_on_non_conflict_refused() -> None:
    with pytest.raises(UsageError) as ei:
        to_request_ops(_conflicts_plan(), {**ALL_DECIDED, "k": "keep_local"})
    assert ei.value.error_code == "decision_not_conflict"
    assert ei.value.details["path"] == "k"


@pytest.mark.parametrize(
    ("path", "decision", "allowed"),
    [
        ("folder", "keep_local", ["skip"]),
        ("folder", "keep_remote", ["skip"]),
        ("gone-there/a.txt", "keep_remote", ["keep_local", "skip"]),
        ("gone-here.txt", "keep_local", ["keep_remote", "skip"]),
        ("both.txt", "delete", ["keep_local", "keep_remote", "skip"]),
    ],
)
def test_decision_not_allowed_refused(path: str, decision: str, allowed: list[str]) -> None:
    with pytest.raises(UsageError) as ei:
        to_request_ops(_conflicts_plan(), {**ALL_DECIDED, path: decision})
    assert ei.value.error_code == "decision_not_allowed"
    assert ei.value.details == {"path": path, "allowed": allowed}
    assert repr(path) in ei.value.message


def test_decision_keys_match_after_nfc() -> None:
    p = plan([L("caf\u00e9", "mine")], [R("caf\u00e9", "theirs")], {}, SHA1)
    (op,) = to_request_ops(p, {"cafe\u0301": "keep_local"})
    assert op.kind == "upload_revision"


def test_plan_without_conflicts_needs_no_decisions() -> None:
    p = plan([L("a/b", "b")], [], {}, SHA1)
    ops = to_request_ops(p, {})
    assert [(o.kind, o.remote_path, o.local_path) for o in ops] == [
        ("mkdir", "a", None),
        ("upload", "a/b", "a/b"),
    ]
    assert all(isinstance(o, Op) for o in ops)
    assert ops[1].expected_local is not None and ops[1].expected_local.digest_type == "sha1"


def test_baseline_for_file_and_folder() -> None:
    b = baseline_for("a", L("a", "x"), R("a", "x", upper=True))
    assert (b.sha256, b.remote_digest_type, b.remote_digest) == (
        sha256("x"),
        "sha1",
        digest("sha1", "x"),
    )
    assert b.size == 1
    d = baseline_for("d", L("d", kind="dir"), R("d", kind="dir"))
    assert d.sha256 is None


def test_remote_entries_from_a_drive_listing() -> None:
    from placet.drive.base import Entry
    from placet.sync import remote_entries_from_drive

    listing = [
        Entry("proj", "proj", True, None, MTIME),
        Entry("proj/a.txt", "a.txt", False, 3, MTIME, {"sha1": "AB"}),
        Entry("proj/d", "d", True, None, MTIME),
        Entry("proj/d/doc", "doc", False, None, MTIME),
        Entry("other/x", "x", False, 1, MTIME),
    ]
    got = remote_entries_from_drive(listing, "proj")
    assert [(e.path, e.kind, e.size, dict(e.digests)) for e in got] == [
        ("a.txt", "file", 3, {"sha1": "AB"}),
        ("d", "dir", 0, {}),
        ("d/doc", "file", -1, {}),
    ]
    assert len(remote_entries_from_drive(listing, "")) == 5


def test_drive_capabilities_drive_the_planner() -> None:
    from placet.drive.base import Capabilities

    caps = Capabilities(
        hash_types=("sha1",),
        case_insensitive=True,
        modtime_precision_ns=1_000_000_000,
        can_move=True,
        server_side_replace=False,
    )
    p = plan([L("Report.txt", "a"), L("report.txt", "b")], [R("k", "k")], {}, caps)
    assert [r.kind for r in p.reports if r.path.lower() == "report.txt"] == ["collision"] * 2


def test_stored_op_dicts_are_exactly_the_ops_dumped() -> None:
    """`request_op_dicts` builds what `propose_sync` stores without the models: every
    kind (mkdir, upload, upload_revision, download over an existing file, an unhashed
    remote) must be the very JSON `Op.model_dump(mode="json")` gives, so the digest and
    the executor see the same ops either way."""
    from placet.sync.ops import request_op_dicts

    p = _conflicts_plan()
    dicts = request_op_dicts(p, ALL_DECIDED, local_prefix="proj", remote_prefix="Agents/proj")
    assert {d["kind"] for d in dicts} == {"mkdir", "upload", "upload_revision", "download"}
    assert dicts == [Op.model_validate(d).model_dump(mode="json") for d in dicts]
    bare = plan([L("x", "x"), L("y", "y", dtype=None)], [R("x", "old", types=())], base(), SHA1)
    more = request_op_dicts(bare, {"x": "keep_remote"})
    assert more and more == [Op.model_validate(d).model_dump(mode="json") for d in more]
