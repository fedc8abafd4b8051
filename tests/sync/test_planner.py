"""Table tests for the pure planner: listings + baseline in, classification out.

One row per line of docs/design.md section 7's table, then the edge cases the section names
(NFC, case folding, collisions, type conflicts, specials, unverified remotes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from placet.errors import LimitExceeded
from placet.sync import EmptySideRefused, PlanCapabilities, SyncPlan, plan
from placet.sync.entries import BaselineEntry, LocalEntry, RemoteEntry
from tests.support.listings import MTIME, NO_HASH, SHA1, B, L, R, base, classify

CI_SHA1 = PlanCapabilities(hash_types=("sha1",), case_insensitive=True)
NFD_CAFE = "cafe\u0301.txt"
NFC_CAFE = "caf\u00e9.txt"


@dataclass
class Row:
    id: str
    local: list[LocalEntry]
    remote: list[RemoteEntry]
    expected: dict[str, str]
    baseline: list[BaselineEntry] = field(default_factory=list)
    caps: PlanCapabilities = SHA1
    include_hidden: bool = False


DESIGN_TABLE = [
    # present | absent | none -> upload (+ mkdir for missing parents)
    Row(
        "new-local", [L("a.txt", "x")], [R("other", "o")], {"a.txt": "upload", "other": "download"}
    ),
    Row(
        "new-local-with-parents",
        [L("d/e/f.txt", "x")],
        [R("other", "o")],
        {"d": "mkdir", "d/e": "mkdir", "d/e/f.txt": "upload", "other": "download"},
    ),
    # absent | present | none -> download
    Row(
        "new-remote",
        [L("k", "k")],
        [R("k", "k"), R("b.txt", "y")],
        {"b.txt": "download", "k": "skip"},
    ),
    # present = baseline | absent | recorded -> deleted_remote
    Row(
        "deleted-remote",
        [L("a.txt", "x"), L("k", "k")],
        [R("k", "k")],
        {"a.txt": "deleted_remote", "k": "skip"},
        [B("a.txt", "x")],
    ),
    # absent | present = baseline | recorded -> deleted_local
    Row(
        "deleted-local",
        [L("k", "k")],
        [R("a.txt", "x"), R("k", "k")],
        {"a.txt": "deleted_local", "k": "skip"},
        [B("a.txt", "x")],
    ),
    # present != baseline | absent | recorded -> conflict (edited here, deleted there)
    Row(
        "edited-here-deleted-there",
        [L("a.txt", "new"), L("k", "k")],
        [R("k", "k")],
        {"a.txt": "conflict:edited_here_deleted_there", "k": "skip"},
        [B("a.txt", "old")],
    ),
    # absent | present != baseline | recorded -> conflict (deleted here, edited there)
    Row(
        "deleted-here-edited-there",
        [L("k", "k")],
        [R("a.txt", "new"), R("k", "k")],
        {"a.txt": "conflict:deleted_here_edited_there", "k": "skip"},
        [B("a.txt", "old")],
    ),
    # digest = | digest = | - -> skip (with and without a baseline)
    Row("equal-no-baseline", [L("a.txt", "x")], [R("a.txt", "x")], {"a.txt": "skip"}),
    Row(
        "equal-stale-baseline",
        [L("a.txt", "x")],
        [R("a.txt", "x")],
        {"a.txt": "skip"},
        [B("a.txt", "old")],
    ),
    # changed since baseline | = baseline | recorded -> upload_revision
    Row(
        "fast-forward-up",
        [L("a.txt", "new")],
        [R("a.txt", "old")],
        {"a.txt": "upload_revision"},
        [B("a.txt", "old")],
    ),
    # = baseline | changed since baseline | recorded -> download
    Row(
        "fast-forward-down",
        [L("a.txt", "old")],
        [R("a.txt", "new")],
        {"a.txt": "download"},
        [B("a.txt", "old")],
    ),
    # differs | differs | none -> conflict
    Row(
        "differs-no-baseline",
        [L("a.txt", "x")],
        [R("a.txt", "y")],
        {"a.txt": "conflict:content_differs"},
    ),
    # differs | differs | both changed -> conflict
    Row(
        "both-changed",
        [L("a.txt", "mine")],
        [R("a.txt", "theirs")],
        {"a.txt": "conflict:content_differs"},
        [B("a.txt", "old")],
    ),
]

EDGE_CASES = [
    Row("upper-case-hex", [L("a.txt", "x")], [R("a.txt", "x", upper=True)], {"a.txt": "skip"}),
    Row(
        "no-remote-digest-same-size",
        [L("a.txt", "x")],
        [R("a.txt", "y", types=())],
        {"a.txt": "unverified"},
        caps=NO_HASH,
    ),
    Row(
        "no-remote-digest-other-size",
        [L("a.txt", "x")],
        [R("a.txt", "yy", types=())],
        {"a.txt": "conflict:content_differs"},
        caps=NO_HASH,
    ),
    Row(
        "no-digest-remote-unchanged-by-size-mtime",
        [L("a.txt", "x")],
        [R("a.txt", "x", types=())],
        {"a.txt": "unverified"},
        [B("a.txt", "x", remote_type=None)],
        caps=NO_HASH,
    ),
    Row(
        "no-digest-mtime-within-precision",
        [L("a.txt", "x")],
        [R("a.txt", "x", types=(), mtime="2025-01-01T00:00:00.400000000Z")],
        {"a.txt": "unverified"},
        [B("a.txt", "x", remote_type=None)],
        caps=NO_HASH,
    ),
    Row(
        "no-digest-remote-touched",
        [L("a.txt", "x")],
        [R("a.txt", "y", types=(), mtime="2025-02-01T00:00:00Z")],
        {"a.txt": "download"},
        [B("a.txt", "x", remote_type=None)],
        caps=NO_HASH,
    ),
    Row(
        "no-digest-local-changed",
        [L("a.txt", "y")],
        [R("a.txt", "x", types=())],
        {"a.txt": "upload_revision"},
        [B("a.txt", "x", remote_type=None)],
        caps=NO_HASH,
    ),
    Row(
        "no-common-digest-type",
        [L("a.txt", "x", dtype="sha1")],
        [R("a.txt", "x", types=("md5",))],
        {"a.txt": "unverified"},
    ),
    Row(
        "sha256-preferred",
        [L("a.txt", "x", dtype="md5")],
        [R("a.txt", "x", types=("sha256", "md5"))],
        {"a.txt": "skip"},
    ),
    Row(
        "md5-remote",
        [L("a.txt", "x", dtype="md5")],
        [R("a.txt", "x", types=("md5",))],
        {"a.txt": "skip"},
    ),
    Row(
        "nfd-local-nfc-remote",
        [L(NFC_CAFE, "x", raw=NFD_CAFE)],
        [R(NFC_CAFE, "x")],
        {NFC_CAFE: "skip"},
    ),
    Row("nfd-listed-path", [L(NFD_CAFE, "x")], [R(NFC_CAFE, "x")], {NFC_CAFE: "skip"}),
    Row(
        "nfc-twins-collide",
        [L(NFC_CAFE, "x"), L(NFC_CAFE, "y", raw=NFD_CAFE)],
        [R("k", "k")],
        {NFC_CAFE: "collision", "k": "download"},
    ),
    Row(
        "case-twins-collide-on-ci-remote",
        [L("Report.txt", "a"), L("report.txt", "b")],
        [R("k", "k")],
        {"Report.txt": "collision", "report.txt": "collision", "k": "download"},
        caps=CI_SHA1,
    ),
    Row(
        "case-twins-fine-on-cs-remote",
        [L("Report.txt", "a"), L("report.txt", "b")],
        [R("k", "k")],
        {"Report.txt": "upload", "report.txt": "upload", "k": "download"},
    ),
    Row(
        "ci-remote-other-case-matches",
        [L("Report.txt", "a")],
        [R("REPORT.TXT", "a")],
        {"Report.txt": "skip"},
        caps=CI_SHA1,
    ),
    Row(
        "ci-folder-twins-block-beneath",
        [L("Docs", kind="dir"), L("docs", kind="dir"), L("Docs/a", "a"), L("docs/b", "b")],
        [R("k", "k")],
        {
            "Docs": "collision",
            "docs": "collision",
            "Docs/a": "collision",
            "docs/b": "collision",
            "k": "download",
        },
        caps=CI_SHA1,
    ),
    Row(
        "hidden-left-out",
        [L(".env", "s"), L("d", kind="dir"), L("d/.git/x", "s"), L("a", "a")],
        [R(".hidden", "h"), R("a", "a")],
        {"a": "skip", "d": "mkdir"},
    ),
    Row(
        "hidden-included",
        [L(".env", "s"), L("a", "a")],
        [R(".hidden", "h"), R("a", "a")],
        {".env": "upload", ".hidden": "download", "a": "skip"},
        include_hidden=True,
    ),
    Row(
        "type-conflict-local-folder",
        [L("a", kind="dir"), L("a/x.txt", "x"), L("a/sub", kind="dir"), L("a/sub/y", "y")],
        [R("a", "file")],
        {"a": "conflict:type_conflict", "a/x.txt": "skip", "a/sub": "skip", "a/sub/y": "skip"},
    ),
    Row(
        "type-conflict-remote-folder",
        [L("a", "file")],
        [R("a", kind="dir"), R("a/x.txt", "x")],
        {"a": "conflict:type_conflict", "a/x.txt": "skip"},
    ),
    Row(
        "symlink-blocks-beneath",
        [L("link", kind="skipped", note="symlink: not synced"), L("k", "k")],
        [R("link", kind="dir"), R("link/x", "x"), R("k", "k")],
        {"link": "skipped_special", "link/x": "skipped_special", "k": "skip"},
    ),
    Row(
        "unreadable-folder-blocks-beneath",
        [L("secret", kind="error", note="cannot open folder"), L("k", "k")],
        [R("secret/x", "x"), R("k", "k")],
        {"secret": "error", "secret/x": "error", "k": "skip"},
    ),
    Row("unhashed-local-file", [L("a", None)], [R("k", "k")], {"a": "error", "k": "download"}),
    Row("folder-both", [L("d", kind="dir")], [R("d", kind="dir")], {"d": "skip"}),
    Row(
        "folder-remote-only",
        [L("k", "k")],
        [R("d", kind="dir"), R("k", "k")],
        {"d": "skip", "k": "skip"},
    ),
    Row(
        "folder-deleted-here",
        [L("k", "k")],
        [R("d", kind="dir"), R("k", "k")],
        {"d": "deleted_local", "k": "skip"},
        [B("d", None)],
    ),
    Row(
        "folder-deleted-there",
        [L("d", kind="dir"), L("k", "k")],
        [R("k", "k")],
        {"d": "deleted_remote", "k": "skip"},
        [B("d", None)],
    ),
    Row(
        "folder-deleted-there-but-new-file-inside",
        [L("d", kind="dir"), L("d/new", "n"), L("k", "k")],
        [R("k", "k")],
        {"d": "mkdir", "d/new": "upload", "k": "skip"},
        [B("d", None)],
    ),
    Row("zero-byte-files", [L("e", "")], [R("e", "")], {"e": "skip"}),
    Row(
        "zero-byte-vs-no-digest-remote",
        [L("e", "")],
        [R("e", "", types=())],
        {"e": "unverified"},
        caps=NO_HASH,
    ),
]


@pytest.mark.parametrize("row", DESIGN_TABLE + EDGE_CASES, ids=lambda r: r.id)
def test_table(row: Row) -> None:
    p = plan(
        row.local, row.remote, base(*row.baseline), row.caps, include_hidden=row.include_hidden
    )
    assert classify(p) == row.expected
    # never a delete; mkdirs first, parents before children
    kinds = [o.kind for o in p.ops]
    assert set(kinds) <= {"mkdir", "upload", "upload_revision", "download"}
    n_mkdir = kinds.count("mkdir")
    assert kinds[:n_mkdir] == ["mkdir"] * n_mkdir
    mkdir_paths = [o.path for o in p.ops[:n_mkdir]]
    assert mkdir_paths == sorted(mkdir_paths)


def test_mkdir_listed_before_the_upload_needing_it() -> None:
    p = plan([L("d/e/f.txt", "x")], [], {}, SHA1)
    assert [(o.kind, o.path) for o in p.ops] == [
        ("mkdir", "d"),
        ("mkdir", "d/e"),
        ("upload", "d/e/f.txt"),
    ]
    assert p.ops[0].reason == "parent of new uploads"


def test_type_conflict_has_only_skip_and_blocks() -> None:
    p = plan([L("a", kind="dir"), L("a/x", "x")], [R("a", "f")], {}, SHA1)
    (conflict,) = p.conflicts
    assert conflict.allowed_decisions == ("skip",)
    beneath = next(r for r in p.reports if r.path == "a/x")
    assert beneath.blocked_by == "a"
    assert p.ops == ()


@pytest.mark.parametrize(
    ("kind", "allowed"),
    [
        ("content_differs", ("keep_local", "keep_remote", "skip")),
        ("edited_here_deleted_there", ("keep_local", "skip")),
        ("deleted_here_edited_there", ("keep_remote", "skip")),
    ],
)
def test_allowed_decisions_per_conflict_kind(kind: str, allowed: tuple[str, ...]) -> None:
    rows = {r.id: r for r in DESIGN_TABLE}
    row = {
        "content_differs": rows["both-changed"],
        "edited_here_deleted_there": rows["edited-here-deleted-there"],
        "deleted_here_edited_there": rows["deleted-here-edited-there"],
    }[kind]
    p = plan(row.local, row.remote, base(*row.baseline), row.caps)
    (conflict,) = p.conflicts
    assert conflict.conflict_kind == kind
    assert conflict.allowed_decisions == allowed


def test_edited_here_deleted_there_names_missing_parents() -> None:
    p = plan(
        [L("d", kind="dir"), L("d/e/a.txt", "new")],
        [R("k", "k")],
        base(B("d", None), B("d/e", None), B("d/e/a.txt", "old")),
        SHA1,
    )
    (conflict,) = p.conflicts
    assert conflict.missing_parents == ("d", "d/e")
    assert classify(p)["d"] == "deleted_remote"


def test_unverified_detail_says_why() -> None:
    p = plan([L("a", "x")], [R("a", "y", types=())], {}, NO_HASH)
    assert p.reports[0].kind == "unverified"
    assert "offers no digest" in p.reports[0].detail


def test_skip_records_digest_type() -> None:
    p = plan([L("a", "x")], [R("a", "x", types=("sha1", "md5"))], {}, SHA1)
    assert p.reports[0].digest_type == "sha1"


# ---- the empty-side guard and caps -----------------------------------------------------


def test_empty_remote_with_baseline_refused() -> None:
    with pytest.raises(EmptySideRefused) as ei:
        plan([L("a", "x")], [], base(B("a", "x")), SHA1)
    assert ei.value.error_code == "empty_side"
    assert "allow_empty_side=true" in ei.value.message
    assert ei.value.details["side"] == "remote"


def test_empty_local_with_baseline_refused() -> None:
    with pytest.raises(EmptySideRefused) as ei:
        plan([], [R("a", "x")], base(B("a", "x")), SHA1)
    assert ei.value.details["side"] == "local"


def test_empty_side_allowed_on_request() -> None:
    p = plan([L("a", "x")], [], base(B("a", "x")), SHA1, allow_empty_side=True)
    assert classify(p) == {"a": "deleted_remote"}


def test_first_sync_into_empty_folder_is_fine() -> None:
    p = plan([L("a", "x")], [], {}, SHA1)
    assert classify(p) == {"a": "upload"}


def test_listing_error_refused_unless_allowed() -> None:
    with pytest.raises(EmptySideRefused) as ei:
        plan([L("a", "x")], [R("a", "x")], {}, SHA1, had_listing_error=True)
    assert ei.value.error_code == "listing_incomplete"
    assert ei.value.retryable is True
    p = plan([L("a", "x")], [R("a", "x")], {}, SHA1, had_listing_error=True, allow_empty_side=True)
    assert classify(p) == {"a": "skip"}


def test_entry_cap() -> None:
    local = [L(f"f{i}", str(i)) for i in range(11)]
    with pytest.raises(LimitExceeded) as ei:
        plan(local, [], {}, SHA1, entry_cap=10)
    assert ei.value.details == {"side": "local", "cap": 10, "counted": "files"}
    assert len(plan(local[:10], [], {}, SHA1, entry_cap=10).ops) == 10
    with pytest.raises(LimitExceeded):
        plan([], [R(f"f{i}", "x") for i in range(11)], {}, SHA1, entry_cap=10)


# ---- the plan as a value -----------------------------------------------------------------


def test_plan_is_deterministic_and_fingerprinted() -> None:
    local = [L("b", "b"), L("a", "a")]
    remote = [R("c", "c"), R("a", "z")]
    p1 = plan(local, remote, {}, SHA1)
    p2 = plan(list(reversed(local)), list(reversed(remote)), {}, SHA1)
    assert p1 == p2
    p3 = plan(local, [R("c", "c"), R("a", "zz")], {}, SHA1)
    assert p3.local_fingerprint == p1.local_fingerprint
    assert p3.remote_fingerprint != p1.remote_fingerprint


def test_plan_round_trips_through_dict() -> None:
    p = plan(
        [L("d/new", "n"), L("a", "mine"), L(NFC_CAFE, "x", raw=NFD_CAFE)],
        [R("a", "theirs"), R("r", "r", mtime=MTIME)],
        base(B("a", "old")),
        SHA1,
    )
    again = SyncPlan.from_dict(p.to_dict())
    assert again == p
    with pytest.raises(ValueError, match="placet-plan v1"):
        SyncPlan.from_dict({**p.to_dict(), "format": "placet-plan v0"})


def test_summary_counts() -> None:
    p = plan([L("d/a", "12345"), L("s", "s")], [R("s", "s"), R("r", "123")], {}, SHA1)
    assert p.summary["mkdir"] == 1
    assert p.summary["upload"] == 1
    assert p.summary["download"] == 1
    assert p.summary["skip"] == 1
    assert p.summary["upload_bytes"] == 5
    assert p.summary["download_bytes"] == 3


def test_op_paths_for_io_keep_on_disk_and_listed_names() -> None:
    p = plan(
        [L(NFC_CAFE, "new", raw=NFD_CAFE), L("Up.txt", "u")],
        [R(NFD_CAFE, "old"), R("up.txt", "old")],
        base(B(NFC_CAFE, "old"), B("Up.txt", "old")),
        CI_SHA1,
    )
    ops = {o.path: o for o in p.ops}
    assert ops[NFC_CAFE].kind == "upload_revision"
    assert ops[NFC_CAFE].local_path == NFD_CAFE
    assert ops[NFC_CAFE].remote_path == NFD_CAFE
    assert ops["Up.txt"].remote_path == "up.txt"
    assert ops["Up.txt"].local_path == "Up.txt"


def test_an_implied_remote_folder_is_named_by_the_first_listed_file_beneath_it() -> None:
    # The remote dict starts as the local keys (their order, b/y first); the folder a
    # bucket remote implies still takes its name from the remote's first listed file.
    p = plan([L("b/y", "1"), L("b/x", "2")], [R("B/x", "2"), R("b/y", "1")], {}, CI_SHA1)
    assert [(r.path, r.remote.path if r.remote else None) for r in p.reports] == [
        ("b", "B"),
        ("b/x", "B/x"),
        ("b/y", "b/y"),
    ]
    assert p.ops == ()


def test_local_keys_the_remote_does_not_list_stay_off_the_remote() -> None:
    # The remote dict starts as the local keys: the ones it does not list are dropped.
    p = plan([L("a.txt", "1"), L("d/b.txt", "2")], [R("a.txt", "1")], {}, SHA1)
    assert classify(p) == {"a.txt": "skip", "d": "mkdir", "d/b.txt": "upload"}
