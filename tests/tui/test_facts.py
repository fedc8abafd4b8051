"""What the review UI derives from a stored proposal: ops, targets, sizes, risk flags.

Plain functions over real store records (no terminal).
"""

from __future__ import annotations

from datetime import timedelta

from placet.display import human_bytes
from placet.schema import LocalFileEvidence, Op, RemoteEvidence, SyncRequest
from placet.store import Store
from placet.tui.facts import (
    countdown,
    effect_of,
    expiring_soon,
    size_of,
    target_of,
)
from placet.tui.render import proposal_view
from tests.support.review import DRIVE, ROOT, T0, add_download, add_mkdir, add_upload, plain


def codes(record) -> list[str]:
    return [f.code for f in effect_of(record).flags]


def test_upload_facts_and_flags(quiet_store: Store):
    plain_upload = add_upload(quiet_store)
    eff = effect_of(plain_upload)
    (op,) = eff.ops
    assert (op.kind, op.local_path, op.remote_path, op.size) == (
        "upload",
        "/home/owner/proj/notes/report.md",
        "docs/report.md",
        12_345,
    )
    assert eff.flags == [] and not eff.needs_typed_confirmation
    assert target_of(plain_upload) == "docs/report.md" and size_of(plain_upload) == 12_345

    renamed = add_upload(quiet_store, local_path="notes/a.md", name="b.md")
    assert codes(renamed) == ["name_changed"]
    replacing = add_upload(quiet_store, local_path="notes/c.md", exists=True)
    assert effect_of(replacing).ops[0].kind == "upload_revision"
    assert codes(replacing) == ["replaces_existing"]
    secret = add_upload(quiet_store, local_path="cfg/.env", remote_parent="")
    assert codes(secret) == ["secret_name"]
    assert effect_of(secret).needs_typed_confirmation


def test_mkdir_and_download_facts(quiet_store: Store):
    mk = add_mkdir(quiet_store, remote_parent="", name=".github")
    assert effect_of(mk).ops[0].remote_path == ".github" and size_of(mk) is None
    dl = add_download(quiet_store)
    assert target_of(dl) == "proj:conftest.py"
    assert codes(dl) == ["runs_code"]
    assert effect_of(dl).ops[0].local_path == "/home/owner/proj/conftest.py"


def test_sync_lists_every_op_and_flags_each(quiet_store: Store):
    local = LocalFileEvidence(size=10, mtime_ns=1, sha256="ab" * 32)
    ops = [
        Op(index=0, kind="mkdir", remote_path="site/.git"),
        Op(index=1, kind="upload", local_path="site/a.txt", remote_path="site/a.txt",
           size=10, expected_local=local, expected_remote=RemoteEvidence(exists=False)),
        Op(index=2, kind="download", local_path="site/run.sh", remote_path="site/run.sh",
           size=5, expected_remote=RemoteEvidence(exists=True, size=5)),
    ]  # fmt: skip
    req = SyncRequest(plan_id=7, root=ROOT, local_path="site", remote_path="site", ops=ops)
    rec, _ = quiet_store.create_proposal(
        kind="sync", request=req.model_dump(mode="json"),
        evidence={"plan": {"id": 7, "created_at": "2026-11-30T11:58:16.123456+00:00",
                           "summary": {"upload": 1, "download": 1}}},
        reason="sync the site",
        drive_spec=DRIVE, run_id="r", ttl_seconds=600, now=T0,
    )  # fmt: skip
    eff = effect_of(rec, quiet_store.ops(rec.id))
    assert [(o.index, o.kind) for o in eff.ops] == [(0, "mkdir"), (1, "upload"), (2, "download")]
    assert eff.total_bytes == 15 and size_of(rec) == 15
    assert target_of(rec) == "proj:site <-> site (3 ops)"
    assert sorted(f.code for f in eff.flags) == ["runs_code", "runs_code"]  # .git/ and run.sh
    shown = plain(proposal_view(rec, eff))
    assert "op 2  download" in shown and "/home/owner/proj/site/run.sh" in shown
    # the evidence is the plan's (its time, not the proposal's), in readable text
    assert "evidence is the plan's, at plan time (2026-11-30 11:58:16Z); plan 7" in shown
    assert "plan summary: download: 1, upload: 1" in shown
    assert "source at plan time (2026-11-30 11:58:16Z)" in shown
    assert "at proposal time" not in shown and '{"' not in shown


def test_unknown_kind_shows_raw_request_and_op_kind_is_flagged(quiet_store: Store):
    rec, _ = quiet_store.create_proposal(
        kind="teleport", request={"to": "[red]mars[/]"}, evidence={}, reason="why not",
        drive_spec=DRIVE, run_id="r", ttl_seconds=600, now=T0,
    )  # fmt: skip
    eff = effect_of(rec)
    assert eff.raw is not None and eff.ops == []
    assert "[red]mars[/]" in plain(proposal_view(rec, eff))

    odd, _ = quiet_store.create_proposal(
        kind="sync", request={"root": ROOT.model_dump(), "ops": [{"index": 0, "kind": "delete",
        "remote_path": "x"}]}, evidence={}, reason="r", drive_spec=DRIVE, run_id="r",
        ttl_seconds=600, now=T0,
    )  # fmt: skip
    assert codes(odd) == ["request_invalid"]  # an op this placet cannot vet is never one key


def test_countdown_and_about_to_expire(quiet_store: Store):
    rec = add_upload(quiet_store, ttl=600)
    assert countdown(rec.expires_at, T0) == "10m00s"
    assert countdown(rec.expires_at, T0 - timedelta(hours=2)) == "2h10m"
    assert countdown(rec.expires_at, rec.expires_at) == "expired"
    assert not expiring_soon(rec, T0)
    assert expiring_soon(rec, rec.expires_at - timedelta(seconds=119))
    assert not expiring_soon(rec, rec.expires_at)
    assert [human_bytes(n) for n in (None, 5, 2048, 3 * 1024**3)] == [
        "-",
        "5 B",
        "2.0 KiB",
        "3.0 GiB",
    ]


def test_missing_folders_line_states_what_an_upload_or_mkdir_creates_on_the_way(
    quiet_store: Store,
):
    from placet.display import missing_folders_line

    up = add_upload(quiet_store, remote_parent="docs/2026")
    line = missing_folders_line(up.kind, up.request, up.evidence)
    assert line is not None and line.startswith("creates missing folders: docs/2026")
    assert "not checked when proposed" in line  # today's evidence does not record it
    mk = add_mkdir(quiet_store, remote_parent="d\u00e9j\u00e0/x")
    line = missing_folders_line(mk.kind, mk.request, mk.evidence)
    assert line is not None and "d\u00e9j\u00e0/x (ASCII: d\\xe9j\\xe0/x)" in line
    # recorded in the evidence: exactly the folders that were absent
    ev = {**up.evidence, "missing_parents": ["docs", "docs/2026"]}
    assert missing_folders_line("upload", up.request, ev) == (
        "creates missing folders: docs, docs/2026"
    )
    assert missing_folders_line("upload", up.request, {**ev, "missing_parents": []}) is None
    # nothing to create: the drive's top, or kinds that never create parents this way
    top = add_upload(quiet_store, local_path="notes/top.md", remote_parent="")
    assert missing_folders_line(top.kind, top.request, top.evidence) is None
    down = add_download(quiet_store)
    assert missing_folders_line(down.kind, down.request, down.evidence) is None
    # and the review UI's detail shows it above the effect
    from rich.console import Group

    from placet.tui.detail import with_created_folders

    view = with_created_folders(up, proposal_view(up, effect_of(up)))
    assert isinstance(view, Group)
    text = plain(view)
    assert text.index("creates missing folders: docs/2026") < text.index("docs/2026/report.md")
    assert with_created_folders(top, "x") == "x"


def test_flags_are_the_shared_ones_matched_on_the_root_and_drive_paths(quiet_store: Store):
    """The review UI's flags are `placet.proposals.vetting.proposal_flags` over the executor's ops
    (what `placet accept` prints): a root `/x/.ssh` flags a download of `known` as a
    secret, a drive `remote:repo/.github` flags an upload of `workflows/ci.yml` as
    runs_code, though neither target alone would be flagged."""
    from placet.executor import plan_for
    from placet.proposals.vetting import proposal_flags

    root = ROOT.model_copy(update={"path": "/x/.ssh"})
    local = LocalFileEvidence(size=3, mtime_ns=1, sha256="ab" * 32)
    ops = [
        Op(index=0, kind="download", local_path="known", remote_path="known", size=3,
           expected_remote=RemoteEvidence(exists=True, size=3)),
        Op(index=1, kind="upload", local_path="ci.yml", remote_path="workflows/ci.yml",
           size=3, expected_local=local, expected_remote=RemoteEvidence(exists=False)),
        Op(index=2, kind="upload", local_path="notes.txt", remote_path="notes.txt",
           size=3, expected_local=local, expected_remote=RemoteEvidence(exists=False)),
    ]  # fmt: skip
    req = SyncRequest(plan_id=1, root=root, local_path="", remote_path="", ops=ops)
    rec, _ = quiet_store.create_proposal(
        kind="sync", request=req.model_dump(mode="json"), evidence={}, reason="r",
        drive_spec="remote:repo/.github", run_id="r", ttl_seconds=600, now=T0,
    )  # fmt: skip
    flags = effect_of(rec, quiet_store.ops(rec.id)).flags
    assert [(f.code, f.message.split(" ")[0]) for f in flags] == [
        ("secret_name", "'known'"),
        ("runs_code", "'workflows/ci.yml'"),
    ]
    assert "in the path of the local root '/x/.ssh'" in flags[0].message
    assert "in the path of the drive 'repo/.github'" in flags[1].message
    assert flags == proposal_flags(
        rec, plan_for(rec.kind, rec.request, rec.evidence, quiet_store.ops(rec.id)).ops
    )

    # A renamed download is not name_changed (docs/design.md 9: "a name changed on upload"),
    # as `placet accept` says; an unknown kind cannot be vetted, so it is flagged.
    dl = add_download(quiet_store, remote_path="shared/a.txt", local_path="b.txt")
    assert codes(dl) == []
    odd, _ = quiet_store.create_proposal(
        kind="teleport", request={}, evidence={}, reason="r", drive_spec=DRIVE,
        run_id="r", ttl_seconds=600, now=T0,
    )  # fmt: skip
    assert codes(odd) == ["request_invalid"] and effect_of(odd).needs_typed_confirmation
