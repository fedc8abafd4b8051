"""`placet list | show | discard | extend | sweep | audit`, run as the real `placet` entry
point in a subprocess with PLACET_HOME set (by the autouse fixture); the bytes written to
the terminal are checked, not only the text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet import __version__
from placet.store import Store
from tests.support.proposals import ABSENT_REMOTE, propose_folder

PLACET = str(Path(sys.executable).with_name("placet"))
HOSTILE_REASON = "tidy up \x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07 now \u202eexe.txt"
HOSTILE_NAME = "notes\u202etxt.sh"
CONTROL_BYTES = [b"\x1b", b"\x07", "\u202e".encode()]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    r = subprocess.run(
        [PLACET, *args], capture_output=True, timeout=60, env={**os.environ, **(env or {})}
    )
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    return r


def _lines(r: subprocess.CompletedProcess[bytes]) -> list[dict[str, object]]:
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


def _propose(store: Store, name: str, reason: str = "make a folder", **kw: object) -> int:
    p, _ = propose_folder(
        store,
        name,
        parent="docs",
        reason=reason,
        drive_spec="local:/tmp/drive",
        run_id="run-cli",
        client_name="test-agent",
        client_version="9.9",
        **kw,
    )
    return p.id


def test_version() -> None:
    r = run("--version")
    assert r.returncode == 0 and r.stdout.decode().strip() == f"placet {__version__}"


def test_list_empty_then_filtered_and_json(store: Store) -> None:
    r = run("list")
    assert r.returncode == 0 and b"no proposals" in r.stdout
    r = run("list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [] and r.stdout == b"[]\n"
    a = _propose(store, "a", ttl_seconds=600)
    b = _propose(store, "b", ttl_seconds=600)
    store.discard(b)
    r = run("list")
    assert r.returncode == 0
    text = r.stdout.decode()
    assert "docs/a" in text and "pending" in text and "discarded" in text
    listed = run("list", "--json").stdout
    rows = json.loads(listed)
    assert [(p["id"], p["status"]) for p in rows] == [(a, "pending"), (b, "discarded")]
    assert listed.count(b"\n") == 2  # a proposal per line
    assert [p["id"] for p in json.loads(run("list", "--status", "pending", "--json").stdout)] == [a]
    both = json.loads(run("list", "--status", "discarded,pending", "--json").stdout)
    assert [p["id"] for p in both] == [a, b]


@pytest.mark.parametrize("cols", [60, 100, 200])
def test_list_rows_never_exceed_the_terminal_width(store: Store, cols: int) -> None:
    from placet.text import cell_width

    _propose(store, "caf\u00e9-" * 280, ttl_seconds=600)  # 1,700 characters, non-ASCII
    _propose(store, "\u6f22\u5b57" * 400, ttl_seconds=600)  # wide letters: 2 cells each
    _propose(store, "short", reason="r" * 500, ttl_seconds=600)
    r = run("list", env={"COLUMNS": str(cols)})
    assert r.returncode == 0
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 4
    assert max(cell_width(line) for line in lines) <= cols
    assert all(line.endswith("\u2026") for line in lines[1:]), lines
    if cols >= 200:
        assert "docs/caf\u00e9-caf\u00e9" in lines[1] and "docs/short" in lines[3]


def test_unknown_status_is_a_usage_error() -> None:
    r = run("list", "--status", "bogus")
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1 and "unknown status" in r.stderr.decode()


def test_agent_text_never_reaches_the_terminal_raw(store: Store) -> None:
    pid = _propose(store, HOSTILE_NAME, reason=HOSTILE_REASON, ttl_seconds=600)
    for args in (("list",), ("show", str(pid)), ("audit",), ("list", "--json")):
        r = run(*args)
        assert r.returncode == 0
        for bad in CONTROL_BYTES:
            assert bad not in r.stdout, (args, bad)
    shown = run("show", str(pid)).stdout.decode()
    assert "\\x1b[2J" in shown and "\\u202e" in shown
    assert "the agent's reason (its claim" in shown
    # The reason is near the top, before the ops it argues for.
    assert shown.index("agent's reason") < shown.index("#0 mkdir")


def test_show_json_has_proposal_results_and_history(store: Store) -> None:
    pid = _propose(store, "x", ttl_seconds=600)
    store.accept(pid)
    r = run("show", str(pid), "--json")
    assert r.returncode == 0
    (doc,) = _lines(r)
    assert doc["proposal"]["id"] == pid and doc["proposal"]["status"] == "approved"  # type: ignore[index]
    assert doc["op_results"] == []
    assert [(e["from_status"], e["to_status"]) for e in doc["audit"]] == [  # type: ignore[attr-defined]
        (None, "pending"),
        ("pending", "approved"),
    ]


def test_show_missing_is_not_found() -> None:
    r = run("show", "4242")
    assert r.returncode == 3
    assert r.stderr.decode().startswith("placet: not_found: proposal 4242 does not exist")


def test_discard_then_discard_again_is_refused(store: Store) -> None:
    pid = _propose(store, "d", ttl_seconds=600)
    r = run("discard", str(pid), "--reason", "not today")
    assert r.returncode == 0 and f"discarded proposal {pid}".encode() in r.stdout
    assert store.get(pid).status == "discarded"
    assert store.audit_events(proposal_id=pid)[-1].detail == {"reason": "not today"}
    again = run("discard", str(pid))
    assert again.returncode == 4 and b"wrong_state" in again.stderr
    assert len(again.stderr.decode().strip().splitlines()) == 1


def test_extend(store: Store) -> None:
    pid = _propose(store, "e", ttl_seconds=600)
    before = store.get(pid).expires_at
    r = run("extend", str(pid), "--minutes", "45")
    assert r.returncode == 0 and b"now expires at" in r.stdout
    assert store.get(pid).expires_at == before + timedelta(minutes=45)
    capped = run("extend", str(pid), "--minutes", "100000")
    assert capped.returncode == 0 and b"capped" in capped.stdout
    assert run("extend", str(pid), "--minutes", "5").returncode == 4  # at the cap
    assert run("extend", str(pid)).returncode == 2  # --minutes is required


def test_sweep_expires_due_proposals(store: Store) -> None:
    past = datetime.now(UTC) - timedelta(minutes=10)
    due = _propose(store, "old", ttl_seconds=60, now=past)
    fresh = _propose(store, "new", ttl_seconds=600)
    r = run("sweep")
    assert r.returncode == 0
    assert f"expired: {due}".encode() in r.stdout and b"interrupted: none" in r.stdout
    assert store.get(due).status == "expired" and store.get(fresh).status == "pending"
    assert store.get(due).request["name"] == "old"  # expiry keeps the request


def test_audit_export_since_and_verify(store: Store) -> None:
    pid = _propose(store, "f", ttl_seconds=600)
    store.discard(pid)
    events = _lines(run("audit", "--json"))
    assert [(e["proposal_id"], e["to_status"]) for e in events] == [
        (pid, "pending"),
        (pid, "discarded"),
    ]
    assert all(len(str(e["hash"])) == 64 for e in events)
    assert len(_lines(run("audit", "--json", "--since", "1h"))) == 2
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert _lines(run("audit", "--json", "--since", future)) == []
    assert run("audit", "--since", "yesterday-ish").returncode == 2
    v = run("audit", "--verify")
    assert v.returncode == 0 and b"2 events verified" in v.stdout


def test_show_lists_risk_flags_above_the_reason_escaped_once(store: Store) -> None:
    pid = _propose(store, HOSTILE_NAME, ttl_seconds=600)
    r = run("show", str(pid))
    assert r.returncode == 0
    for b in CONTROL_BYTES:
        assert b not in r.stdout
    text = r.stdout.decode()
    flags_at = text.index("placet risk flags")
    assert text.index("the agent's reason") < flags_at < text.index("#0 mkdir")
    assert "! runs_code: 'docs/notes\\u202etxt.sh" in text  # one backslash: escaped once
    assert "\\\\u202e" not in text


def test_show_and_audit_print_failure_and_owner_text_plainly(store: Store) -> None:
    from placet.store import LeaseHolder

    pid = _propose(store, "syncme", ttl_seconds=600)
    store.accept(pid)
    holder = LeaseHolder.current()
    store.claim(pid, holder=holder)
    message = "the drive refused to create the folder; check its permissions and try again"
    store.record_op_result(
        pid,
        op_index=0,
        op={"kind": "mkdir", "remote_path": "docs/syncme"},
        outcome="failed",
        detail={
            "code": "refused",
            "message": message,
            "retryable": False,
            "details": {"path": "syncme/sub\u2014dir"},
        },
        holder=holder,
    )
    store.finish(pid, holder=holder)
    other = _propose(store, "other", ttl_seconds=600)
    store.discard(other, reason="wiki \u2014 \u00fcn\u00efcode ok \x1b")

    shown = run("show", str(pid)).stdout.decode()
    # one line: target, code: message whole, the details dotted, no dict dump
    assert (
        f"    #0 failed: docs/syncme: refused: {message} "
        "(details.path=syncme/sub\u2014dir (ASCII: syncme/sub\\u2014dir))\n" in shown
    )
    assert "{" not in shown

    audit = run("audit").stdout
    assert b"\x1b" not in audit
    text = audit.decode()
    assert "wiki \u2014 \u00fcn\u00efcode ok \\x1b" in text  # escaped once, letters kept
    assert "\\\\" not in text and "\\u2014" not in text


# ---- list and show: widths, expiry, ASCII forms, every op in full ---------------------


def run_cols(cols: int, *args: str) -> str:
    import os

    r = subprocess.run(
        [PLACET, *args],
        capture_output=True,
        timeout=60,
        env={**os.environ, "COLUMNS": str(cols)},
    )
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr.decode()
    return r.stdout.decode()


def test_list_reason_uses_the_terminal_width(store: Store) -> None:
    reason = "r" * 150 + " the end"
    _propose(store, "wide", reason=reason, ttl_seconds=600)
    wide = run_cols(300, "list")
    assert reason in wide and "…" not in wide.splitlines()[-1]
    middle = run_cols(120, "list").splitlines()[-1]
    assert len(middle) == 120 and middle.endswith("r…")  # cut, and marked
    narrow = run_cols(40, "list").splitlines()[-1]
    assert len(narrow) == 40 and narrow.endswith("…") and "rrr" not in narrow


def test_list_shows_expired_as_expired_not_zero_seconds_ago(store: Store) -> None:
    old = datetime.now(UTC) - timedelta(minutes=10)
    swept = _propose(store, "swept", ttl_seconds=300, now=old)  # expired 5 min ago
    due = _propose(store, "due", ttl_seconds=300, now=old)
    assert store.sweep().expired == [swept, due]
    text = run_cols(200, "list")
    rows = {int(line.split()[0]): line for line in text.splitlines()[1:]}
    for pid in (swept, due):
        assert "expired 5m ago" in rows[pid], rows[pid]
        assert "0s ago" not in rows[pid]


def test_list_and_show_put_the_ascii_form_beside_non_ascii_names(store: Store) -> None:
    name = "r\u0430port"  # Cyrillic a
    pid = _propose(store, name, ttl_seconds=600)
    for out in (run_cols(200, "list"), run_cols(200, "show", str(pid))):
        assert "docs/r\u0430port (ASCII: docs/r\\u0430port)" in out, out


def _sync(store: Store, n: int) -> int:
    deep = "/".join(f"folder-{i:02d}" for i in range(12))
    ops = [
        {
            "index": i,
            "kind": "upload",
            "local_path": f"{deep}/file-{i}.txt",
            "remote_path": f"{deep}/file-{i}.txt",
            "size": 10,
            "reason": "new",
        }
        for i in range(n)
    ]
    request = {
        "kind": "sync",
        "plan_id": 1,
        "root": {"name": "proj", "path": "/tmp/proj", "device": 1, "inode": 2},
        "local_path": "",
        "remote_path": "",
        "decisions": {},
        "ops": ops,
    }
    p, _ = store.create_proposal(
        kind="sync",
        request=request,
        evidence={},
        reason="sync it",
        drive_spec="local:/tmp/drive",
        run_id="run-cli",
        ttl_seconds=600,
    )
    return p.id


def test_show_summarises_a_sync_and_all_lists_every_op_with_its_full_paths(
    store: Store,
) -> None:
    pid = _sync(store, 45)
    deep = "/".join(f"folder-{i:02d}" for i in range(12))
    out = run_cols(100, "show", str(pid))
    assert [i for i in range(45) if f"{deep}/file-{i}.txt" in out] == list(range(20))
    assert "  ... and 25 more ops; --all to list them\n" in out
    assert "  by kind       upload 45 (450 B)\n" in out
    out = run_cols(100, "show", str(pid), "--all")
    for i in range(45):
        assert f"{deep}/file-{i}.txt" in out, i
    assert "more ops" not in out and "…" not in out


def test_show_states_the_remote_folders_an_upload_or_mkdir_creates(store: Store) -> None:
    unchecked = _propose(store, "new", ttl_seconds=600)
    out = run_cols(200, "show", str(unchecked))
    assert "creates missing folders: docs, or the part of it" in out
    p, _ = propose_folder(
        store,
        "q1",
        parent="docs/2026",
        evidence={"remote": {"exists": False}, "missing_parents": ["docs", "docs/2026"]},
        reason="a folder",
        drive_spec="local:/tmp/drive",
        run_id="run-cli",
        ttl=600,
    )
    out = run_cols(200, "show", str(p.id))
    assert "creates missing folders: docs, docs/2026\n" in out
    top, _ = propose_folder(
        store, "top", reason="a folder", drive_spec="local:/tmp/drive", run_id="run-cli", ttl=600
    )
    assert "creates missing folders" not in run_cols(200, "show", str(top.id))


def test_evidence_without_missing_parents_keeps_its_shape_and_request_hash() -> None:
    """Evidence stored before placet recorded `missing_parents` validates, dumps back to
    the same dict and hashes as it did (values computed by the code before the field);
    the executor's parser takes evidence with and without it."""
    from placet.executor.ops import plan_for
    from placet.schema import MkdirEvidence, UploadEvidence, request_hash

    remote = dict(ABSENT_REMOTE)
    local = {
        "size": 5,
        "mtime_ns": 1_700_000_000_000_000_000,
        "sha256": "ab" * 32,
        "digest_type": "sha256",
        "digest": "ab" * 32,
    }
    up_req = {
        "kind": "upload",
        "root": {"name": "proj", "path": "/p", "device": 1, "inode": 2},
        "local_path": "a.txt",
        "remote_parent": "a/b",
        "name": "a.txt",
        "replace_existing": False,
    }
    mk_req = {"kind": "mkdir", "remote_parent": "a/b", "name": "c"}
    up_ev = {"local": local, "remote": remote}
    mk_ev = {"remote": remote}
    assert UploadEvidence.model_validate(up_ev).model_dump(mode="json") == up_ev
    assert MkdirEvidence.model_validate(mk_ev).model_dump(mode="json") == mk_ev
    assert request_hash("upload", up_req, up_ev) == (
        "aa6016cb2e760f2dd71df556ec0069dd4e8414c6a8f552ff38690bcc15edc6af"
    )
    assert request_hash("mkdir", mk_req, mk_ev) == (
        "f462de7190485c953a82325744f057168e73e163b953f888709fa40e766d5194"
    )
    recorded = {**mk_ev, "missing_parents": ["a", "a/b"]}
    assert MkdirEvidence.model_validate(recorded).model_dump(mode="json") == recorded
    assert request_hash("mkdir", mk_req, recorded) != request_hash("mkdir", mk_req, mk_ev)
    for kind, req, ev in (
        ("upload", up_req, {**up_ev, "missing_parents": []}),
        ("upload", up_req, up_ev),
        ("mkdir", mk_req, recorded),
    ):
        assert [op.remote_path for op in plan_for(kind, req, ev).ops] == [
            "a/b/a.txt" if kind == "upload" else "a/b/c"
        ]


def test_show_reads_like_accept_reason_and_flags_first_no_dict_dumps(store: Store) -> None:
    from placet.store import LeaseHolder

    pid = _sync(store, 34)
    store.accept(pid)
    holder = LeaseHolder.current()
    store.claim(pid, holder=holder)
    deep = "/".join(f"folder-{i:02d}" for i in range(12))
    store.record_op_result(
        pid,
        op_index=5,
        op={"index": 5, "kind": "upload", "remote_path": f"{deep}/file-5.txt"},
        outcome="done",
        detail={"remote_path": f"{deep}/file-5.txt", "size": 10, "sha256": "ab" * 32,
                "verification": "digest:md5", "seconds": 0.25},
        holder=holder,
    )  # fmt: skip
    out = run_cols(200, "show", str(pid))
    assert "{" not in out and "expected_local" not in out, out
    reason_at = out.index("the agent's reason")
    assert out.index("agent ") < reason_at < out.index("risk flags") < out.index("#0 upload")
    assert "  ops           34, moving 340 B" in out
    assert out.count(" upload  /tmp/proj/") == 20  # the first ops, one entry each
    every = run_cols(200, "show", str(pid), "--all")
    assert every.count(" upload  /tmp/proj/") == 34  # every op, one entry each, as accept shows
    assert f"    #5 done: {deep}/file-5.txt (10 B, verified by digest:md5, 0.2s)\n" in out
    (doc,) = _lines(run("show", str(pid), "--json"))
    assert len(doc["proposal"]["request"]["ops"]) == 34  # type: ignore[index]
    assert doc["op_results"][0]["detail"]["sha256"] == "ab" * 32  # type: ignore[index]


def test_show_sync_evidence_as_readable_lines(store: Store) -> None:
    request = {
        "kind": "sync", "plan_id": 7,
        "root": {"name": "proj", "path": "/tmp/proj", "device": 1, "inode": 2},
        "local_path": "", "remote_path": "", "decisions": {"a.txt": "keep_local"},
        "ops": [{"index": 0, "kind": "upload", "local_path": "a.txt", "remote_path": "a.txt",
                 "size": 3}],
    }  # fmt: skip
    evidence = {
        "plan": {"id": 7, "created_at": "2026-11-30T10:00:00+00:00", "summary":
                 {"upload": 1, "collision": 0, "conflict": 0}, "local_fingerprint": "x"},
        "verified_skips": 2,
    }  # fmt: skip
    p, _ = store.create_proposal(
        kind="sync", request=request, evidence=evidence, reason="sync", ttl_seconds=600,
        drive_spec="local:/tmp/drive", run_id="run-cli",
    )  # fmt: skip
    out = run_cols(200, "show", str(p.id))
    assert "  plan          7 made 2026-11-30T10:00:00+00:00: 1 upload\n" in out
    assert "collision" not in out and "  verified      2 skip(s)\n" in out
    assert "  decisions     a.txt: keep_local\n" in out


@pytest.mark.parametrize(
    ("age", "shown"),
    [(45, "45s ago"), (102, "1m ago"), (150, "2m ago"), (3 * 3600 + 5, "3h ago"),
     (2 * 86400 + 7, "2d ago")],
)  # fmt: skip
def test_when_uses_one_unit_each(age: int, shown: str) -> None:
    from placet.cli.proposals import _rel

    now = datetime.now(UTC)
    assert _rel(now - timedelta(seconds=age), now) == shown
    assert _rel(now + timedelta(seconds=age), now) == "in " + shown.removesuffix(" ago")


def test_show_counts_every_flag_of_a_sync_and_json_streams_every_op(store: Store) -> None:
    """Flags are counted by kind over every op (stored by reference), even past the ops
    listed; `--json` holds every op, in index order."""
    deep = "/".join(f"folder-{i:02d}" for i in range(12))
    ops = [
        {"index": i, "kind": "upload", "local_path": f"x/{name}", "remote_path": f"x/{name}",
         "size": 10, "reason": "new"}
        for i, name in enumerate([*(f"f{j}.txt" for j in range(28)), ".bashrc", "id_rsa"])
    ]  # fmt: skip
    p, _ = store.create_proposal(
        kind="sync",
        request={"kind": "sync", "plan_id": 1, "local_path": "", "remote_path": "",
                 "root": {"name": "proj", "path": "/tmp/proj", "device": 1, "inode": 2},
                 "decisions": {deep: "keep_local"}, "ops": ops},
        evidence={}, reason="flags late", drive_spec="local:/tmp/drive", run_id="run-cli",
        ttl_seconds=600,
    )  # fmt: skip
    assert "ops" not in store.get(p.id).request
    out = run_cols(200, "show", str(p.id))
    assert "drive:/ (30 ops)" in out  # the target counts the ops stored by reference
    assert "  placet risk flags (2: 1 runs_code, 1 secret_name):" in out
    assert "  conflicts     1 decided: 1 keep_local" in out
    assert "  ... and 10 more ops; --all to list them" in out and "id_rsa" in out
    (doc,) = _lines(run("show", str(p.id), "--json"))
    assert doc["proposal"]["request"]["ops"] == store.ops(p.id)  # type: ignore[index]
    assert doc["proposal"]["request"]["op_count"] == 30  # type: ignore[index]
