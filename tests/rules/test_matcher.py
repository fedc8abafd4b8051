"""Which rule decides a proposal: a table of proposals against rules files, the hostile
ones included (prefix tricks, Unicode and case twins, byte caps, flagged targets,
replacements under an upload-only rule): default deny, a forbid wins
(docs/decisions/0038-standing-rules.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from placet.rules.facts import facts_of
from placet.rules.loading import parse_rules
from placet.rules.matcher import evaluate
from placet.store import ProposalRecord
from tests.rules.proposals import (
    DRIVE,
    NOW,
    download,
    facts,
    mkdir,
    record,
    sync,
    sync_download,
    sync_mkdir,
    sync_upload,
    upload,
)

MINIMAL = b"""\
[[rule]]
id = "report-folders"
effect = "allow"          # or "forbid"
kinds = ["mkdir"]
remote_prefix = "reports"

[[rule]]
id = "weekly-reports"
effect = "allow"
kinds = ["upload"]        # new files only
remote_prefix = "reports"
max_bytes = 1048576
"""

MIB = 1048576


def verdict(rules: bytes, rec: ProposalRecord, *, now=NOW):  # type: ignore[no-untyped-def]
    return evaluate(parse_rules(rules), facts(rec), now, DRIVE)


@pytest.mark.parametrize(
    ("rec", "rule_id"),
    [
        (mkdir("reports", "2026"), "report-folders"),
        (mkdir("reports/2026", "w23"), "report-folders"),
        (upload("reports", "w23.pdf", MIB), "weekly-reports"),
        (upload("reports/2026", "w23.pdf", 10), "weekly-reports"),
        (upload("reports", "w.pdf", 3, missing=("reports", "reports/new")), "weekly-reports"),
    ],
    ids=["folder", "nested folder", "upload at the cap", "nested upload", "creates the prefix"],
)
def test_the_issues_minimal_file_approves_routine_proposals(rec, rule_id) -> None:  # type: ignore[no-untyped-def]
    v = verdict(MINIMAL, rec)
    assert (v.effect, v.rule_id) == ("allow", rule_id)


BELOW = "is not below remote_prefix 'reports'"
UNCHECKED = "is not a checked path"
HOSTILE = [
    ("prefix trick, folder", mkdir("", "reports-evil"), BELOW),
    ("prefix trick, file", upload("reports-evil", "x.pdf", 1), BELOW),
    ("prefix as a string prefix", upload("reportsx", "a.pdf", 1), BELOW),
    ("the prefix itself as a file", upload("", "reports", 1), BELOW),
    ("the prefix itself as a folder", mkdir("", "reports"), BELOW),
    ("dot-dot out of the prefix", mkdir("reports/..", "x"), UNCHECKED),
    ("dot-dot in an upload", upload("reports/../private", "x.pdf", 1), UNCHECKED),
    ("case twin", upload("Reports", "x.pdf", 1), BELOW),
    ("case twin, folder", mkdir("REPORTS", "x"), BELOW),
    ("fullwidth twin", mkdir("\uff52eports", "x"), "confusable_name"),
    ("one byte past the cap", upload("reports", "big.pdf", MIB + 1), "over max_bytes"),
    ("runs code", upload("reports", "install.sh", 10), "flagged runs_code"),
    ("steers an agent", upload("reports/.claude", "settings.json", 10), "flagged runs_code"),
    ("secret name", upload("reports", ".env", 10), "flagged secret_name"),
    (
        "replacement under an upload-only rule",
        upload("reports", "w.pdf", 10, replace=True),
        "op #0 is upload_replace, a kind the rule does not name",
    ),
    (
        "download under upload rules",
        download("reports/w.pdf", "out/w.pdf", 10),
        "op #0 is download, a kind the rule does not name",
    ),
    (
        "sync under mkdir and upload rules",
        sync([sync_upload(0, "reports/a.pdf", 1)]),
        "it is a sync and the rule does not name sync",
    ),
    ("another drive", mkdir("reports", "x", drive="remote:elsewhere"), "the drive is"),
]


@pytest.mark.parametrize(("rec", "why"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_proposals_are_left_to_the_owner(rec: ProposalRecord, why: str) -> None:
    v = verdict(MINIMAL, rec)
    assert (v.effect, v.rule_id) == ("none", None)
    # the rule of the proposal's kind says why (the other fails on the kind)
    assert any(why in m.condition for m in v.misses), v.misses


CAFE = """\
[[rule]]
id = "cafe"
effect = "allow"
kinds = ["upload"]
remote_prefix = "caf\u00e9"
allow_flags = ["non_ascii_name"]
""".encode()


def test_an_nfd_twin_of_the_prefix_is_not_covered_by_an_allow() -> None:
    assert verdict(CAFE, upload("caf\u00e9", "menu.pdf", 1)).effect == "allow"
    nfd = verdict(CAFE, upload("cafe\u0301", "menu.pdf", 1))
    assert nfd.effect == "none"
    assert "not below remote_prefix" in nfd.misses[0].condition


FORBID = (
    MINIMAL
    + b"""
[[rule]]
id = "no-private"
effect = "forbid"
kinds = ["upload", "mkdir", "sync"]
remote_prefix = "reports/priv\xc3\xa9"
"""
)


@pytest.mark.parametrize(
    "rec",
    [
        upload("reports/priv\u00e9", "x.pdf", 1),
        upload("reports/PRIV\u00c9", "x.pdf", 1),  # case twin
        upload("reports/prive\u0301", "x.pdf", 1),  # NFD twin
        upload("reports/priv\u00e9.", "x.pdf", 1),  # a trailing dot Windows drops
        upload("reports/priv\u00e9", "x.pdf", 1, replace=True),  # upload names replace too
        mkdir("reports/priv\u00e9", "sub"),
        sync([sync_mkdir(0, "reports/ok"), sync_upload(1, "reports/priv\u00e9/a.pdf", 1)]),
    ],
    ids=["exact", "case twin", "nfd twin", "trailing dot", "replacement", "folder", "sync op"],
)
def test_a_forbid_wins_over_every_allow_and_covers_twins(rec: ProposalRecord) -> None:
    v = verdict(FORBID, rec)
    assert (v.effect, v.rule_id) == ("forbid", "no-private")


def test_a_forbid_does_not_cover_a_sibling_with_its_name_as_prefix() -> None:
    v = verdict(FORBID, upload("reports/priv\u00e9-not", "x.pdf", 1))
    assert v.effect == "none"
    assert v.misses[1].condition.endswith("non_ascii_name, which allow_flags does not name")


SYNCS = b"""\
[[rule]]
id = "sync-new"
effect = "allow"
kinds = ["sync"]
remote_prefix = "reports"
max_bytes_per_proposal = 100

[[rule]]
id = "sync-all"
effect = "allow"
kinds = ["sync", "upload_replace", "download"]
remote_prefix = "archive"
"""


def test_a_sync_covers_new_files_and_needs_replacements_and_downloads_named() -> None:
    new = sync([sync_mkdir(0, "reports/a"), sync_upload(1, "reports/a/x.pdf", 60)])
    assert verdict(SYNCS, new).rule_id == "sync-new"
    replaces = sync([sync_upload(0, "reports/x.pdf", 1, revision=True)])
    v = verdict(SYNCS, replaces)
    assert v.effect == "none"
    assert v.misses[0].condition == "op #0 is upload_replace, a kind the rule does not name"
    downloads = sync([sync_download(0, "reports/x.pdf", 1)])
    assert verdict(SYNCS, downloads).effect == "none"
    named = sync([sync_upload(0, "archive/x.pdf", 1, revision=True),
                  sync_download(1, "archive/y.pdf", 1)])  # fmt: skip
    assert verdict(SYNCS, named).rule_id == "sync-all"


def test_a_sync_that_grows_past_the_proposal_cap_is_left_to_the_owner() -> None:
    grown = sync([sync_upload(0, "reports/a.pdf", 60), sync_upload(1, "reports/b.pdf", 41)])
    v = verdict(SYNCS, grown)
    assert v.effect == "none"
    assert "over max_bytes_per_proposal" in v.misses[0].condition


LOCAL = b"""\
[[rule]]
id = "from-out"
effect = "allow"
kinds = ["upload", "download"]
remote_prefix = "reports"
local_root = "/home/o/proj"
local_prefix = "out"
"""


def test_local_root_and_prefix_bind_the_local_side() -> None:
    assert verdict(LOCAL, upload("reports", "a.pdf", 1, local="out/a.pdf")).effect == "allow"
    v = verdict(LOCAL, upload("reports", "a.pdf", 1, local="out-old/a.pdf"))
    assert v.effect == "none"
    assert "local path '/home/o/proj/out-old/a.pdf' is not below" in v.misses[0].condition
    assert verdict(LOCAL, download("reports/a.pdf", "out/a.pdf", 1)).effect == "allow"
    assert verdict(LOCAL, download("reports/a.pdf", "src/a.pdf", 1)).effect == "none"


NARROW = MINIMAL.replace(
    b'kinds = ["mkdir"]', b'kinds = ["mkdir"]\nclients = ["claude-code"]\nexpires = 2026-07-01'
)


def test_expiry_and_client_narrow_an_allow() -> None:
    assert verdict(NARROW, mkdir("reports", "a")).effect == "allow"
    late = verdict(NARROW, mkdir("reports", "a"), now=NOW + timedelta(days=30))
    assert late.effect == "none"
    assert late.misses[0].condition.startswith("expired at 2026-07-01T00:00:00+00:00")
    other = verdict(NARROW, mkdir("reports", "a", client="codex"))
    assert other.misses[0].condition.startswith("the client name 'codex' is not one of")


def test_the_agents_reason_is_no_fact_a_rule_sees() -> None:
    rec = mkdir("reports", "a")
    assert "trust me" in rec.reason
    assert "trust me" not in repr(facts(rec))


def test_a_listed_flag_is_accepted_and_an_unlisted_one_is_not() -> None:
    text = MINIMAL.replace(b"max_bytes = 1048576", b'allow_flags = ["non_ascii_name"]')
    assert verdict(text, upload("reports", "caf\u00e9.pdf", 1)).effect == "allow"
    v = verdict(MINIMAL, upload("reports", "caf\u00e9.pdf", 1))
    assert v.misses[1].condition == (
        "op #0 is flagged non_ascii_name, which allow_flags does not name"
    )


def test_with_no_rule_every_proposal_waits() -> None:
    v = verdict(b"", mkdir("reports", "a"))
    assert (v.effect, v.reason) == ("none", "no allow rule")


def test_a_proposal_without_ops_is_covered_by_nothing() -> None:
    empty = facts_of(record("sync", {"kind": "sync"}, {}), [])
    assert evaluate(parse_rules(b'[[rule]]\nid="all"\neffect="allow"\nkinds=["sync"]'),
                    empty, NOW, DRIVE).misses[0].condition == "it has no op"  # fmt: skip


def test_a_folder_made_on_the_way_above_the_prefix_is_left_to_the_owner() -> None:
    deep = MINIMAL.replace(b'remote_prefix = "reports"\nmax', b'remote_prefix = "reports/w"\nmax')
    ok = upload("reports/w", "a.pdf", 1, missing=("reports/w",))
    assert verdict(deep, ok).rule_id == "weekly-reports"
    v = verdict(deep, upload("reports/w", "a.pdf", 1, missing=("reports", "reports/w")))
    assert v.misses[1].condition == (
        "it creates the folder 'reports' on the way, above remote_prefix 'reports/w'"
    )
