"""`placet accept`: the confirmation code comes from the terminal itself, `--yes` needs
the owner's opt-in, and the exit codes follow `placet.errors`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from placet.config import Settings, load_settings
from placet.drive import RcloneDrive
from placet.schema import request_hash
from tests.support.rig import (
    PLACET,
    Rig,
    make_rig,
    mkdir_ops,
    placet_cli,
    propose_config_download,
    propose_hook_download,
    write_config,
)
from tests.support.terminal import PtyProcess, run_on_pty


def _env() -> dict[str, str]:
    return dict(os.environ)


def _approval(rig: Rig, pid: int) -> dict[str, object]:
    [event] = [e for e in rig.store.audit_events(proposal_id=pid) if e.to_status == "approved"]
    assert event.actor == "owner"
    return event.detail


def test_yes_refused_without_opt_in(configured_rig: Rig) -> None:
    configured_rig.write("a.txt", b"a")
    rec = configured_rig.upload("a.txt")
    r = placet_cli("accept", str(rec.id), "--yes", env=_env())
    assert r.returncode == 4
    assert "allow_yes" in r.stderr and str(configured_rig.settings.config_file) in r.stderr
    assert configured_rig.store.get(rec.id).status == "pending"


def test_without_a_terminal_it_refuses_whatever_stdin_says(configured_rig: Rig) -> None:
    configured_rig.write("a.txt", b"a")
    rec = configured_rig.upload("a.txt")
    r = placet_cli("accept", str(rec.id), env=_env(), input="yes\nACDEFH\n")
    assert r.returncode == 4
    assert "no_terminal" in r.stderr
    assert configured_rig.store.get(rec.id).status == "pending"
    assert configured_rig.remote_dir is not None and os.listdir(configured_rig.remote_dir) == []
    # the effect was shown: paths, size, hash, the reason boxed
    assert rec.request_hash in r.stdout and "| test upload |" in r.stdout


def _code(out: bytes) -> str:
    m = re.search(rb"type the code ([A-Z0-9]{6})", out)
    assert m, out.decode(errors="replace")
    return m.group(1).decode()


def test_code_typed_on_the_terminal_accepts_and_executes(configured_rig: Rig) -> None:
    assert configured_rig.remote_dir is not None
    configured_rig.write("doc.txt", b"approved bytes")
    rec = configured_rig.upload("doc.txt", "")
    p = PtyProcess([str(PLACET), "accept", str(rec.id)], _env())
    try:
        p.send("TYPEAHEAD\r", gap=0)  # typed before the code is shown: discarded
        assert p.wait_for(b"type the code ")
        p.send(_code(p.bytes()) + "\r")
        assert p.wait_exit(60) == 0, p.bytes().decode(errors="replace")
    finally:
        p.kill()
    out = p.bytes()
    assert b"succeeded" in out and rec.request_hash.encode() in out
    assert (configured_rig.remote_dir / "doc.txt").read_bytes() == b"approved bytes"
    detail = _approval(configured_rig, rec.id)
    origin = detail.pop("origin")
    process = detail.pop("process")  # the approving process, which then ran it
    assert detail == {
        "request_hash": rec.request_hash,
        "via": "terminal",
        "yes": False,
        "tty": True,
    }
    assert process["pid"] == origin["pid"] and process["host_id"] == configured_rig.store.host_id
    assert configured_rig.store.get(rec.id).status == "succeeded"
    # how it was made: the terminal, the session, the parents (this test's own process)
    assert isinstance(origin, dict) and origin["tty"].startswith("/dev/pts/")
    assert origin["session_id"] == origin["pid"]  # the pty child leads its own session
    assert origin["parents"][0]["pid"] == os.getpid()


def test_an_approval_driven_through_script_names_it_among_its_parents(configured_rig: Rig) -> None:
    """`script -qfc "placet accept ID"` gives placet a pseudo-terminal another program
    drives: the approval is made, and its audit event shows `script` as its parent."""
    configured_rig.write("doc.txt", b"approved bytes")
    rec = configured_rig.upload("doc.txt")
    command = f"{PLACET} accept {rec.id}"
    p = PtyProcess(["/usr/bin/script", "-qfc", command, "/dev/null"], _env())
    try:
        assert p.wait_for(b"type the code ")
        p.send(_code(p.bytes()) + "\r")
        assert p.wait_exit(60) == 0, p.bytes().decode(errors="replace")
    finally:
        p.kill()
    origin = _approval(configured_rig, rec.id)["origin"]
    assert isinstance(origin, dict) and origin["tty"].startswith("/dev/pts/")
    names = [parent["name"] for parent in origin["parents"]]
    assert "script" in names[:3], origin["parents"]
    assert any(command in parent["command"] for parent in origin["parents"])


def test_wrong_code_declines(configured_rig: Rig) -> None:
    configured_rig.write("doc.txt", b"x")
    rec = configured_rig.upload("doc.txt")
    rc, out = run_on_pty([str(PLACET), "accept", str(rec.id)], _env(), 30, typed="AAAAAA")
    assert rc == 4 and "confirmation_mismatch" in out
    assert configured_rig.store.get(rec.id).status == "pending"


def test_yes_with_opt_in_records_no_terminal(configured_rig: Rig) -> None:
    assert configured_rig.remote_dir is not None
    write_config(configured_rig.settings, drive=configured_rig.drive.spec, allow_yes=True)
    configured_rig.write("y.txt", b"yes")
    rec = configured_rig.upload("y.txt")
    r = placet_cli("accept", str(rec.id), "--yes", env=_env())
    assert r.returncode == 0, r.stderr
    assert "#0 done: y.txt (digest:sha256, temp+move)" in r.stderr
    detail = _approval(configured_rig, rec.id)
    origin = detail.pop("origin")
    assert detail.pop("process")["host_id"] == configured_rig.store.host_id
    assert detail == {
        "request_hash": rec.request_hash,
        "via": "terminal",
        "yes": True,
        "tty": False,
    }
    assert isinstance(origin, dict) and origin["tty"] is None and origin["parents"]
    assert (configured_rig.remote_dir / "y.txt").read_bytes() == b"yes"


def test_exit_codes(configured_rig: Rig) -> None:
    write_config(configured_rig.settings, drive=configured_rig.drive.spec, allow_yes=True)
    env = _env()
    assert placet_cli("accept", "999", "--yes", env=env).returncode == 3

    p = configured_rig.write("s.txt", b"one")
    rec = configured_rig.upload("s.txt")
    p.write_bytes(b"two!")  # stale at execution: an op failed
    r = placet_cli("accept", str(rec.id), "--yes", env=env)
    assert r.returncode == 1, r.stderr
    assert "stale" in r.stderr
    # a failed proposal can be accepted again; still stale, still 1
    again = placet_cli("accept", str(rec.id), "--yes", env=env)
    assert again.returncode == 1, again.stderr
    assert "stale" in again.stderr, again.stderr
    assert configured_rig.store.get(rec.id).attempt == 2, (again.stdout, again.stderr)

    done = configured_rig.write("d.txt", b"d")
    ok = configured_rig.upload("d.txt")
    assert placet_cli("accept", str(ok.id), "--yes", env=env).returncode == 0
    r = placet_cli("accept", str(ok.id), "--yes", env=env)  # succeeded is final
    assert r.returncode == 4 and "succeeded" in r.stderr
    assert done.exists()


def test_expired_proposal_is_refused(configured_rig: Rig) -> None:
    write_config(configured_rig.settings, drive=configured_rig.drive.spec, allow_yes=True)
    configured_rig.write("e.txt", b"e")
    fresh = configured_rig.upload("e.txt")
    past = datetime.now(UTC) - timedelta(hours=1)
    old, _ = configured_rig.store.create_proposal(
        kind="upload",
        request=dict(fresh.request, name="e2.txt"),
        evidence=fresh.evidence,
        reason="old",
        drive_spec=configured_rig.drive.spec,
        run_id="run-old",
        ttl_seconds=300,
        now=past,
    )
    r = placet_cli("accept", str(old.id), "--yes", env=_env())
    assert r.returncode == 4 and "expired" in r.stderr
    assert configured_rig.store.get(old.id).status == "expired"
    assert old.request_hash == request_hash("upload", old.request, old.evidence)


def test_a_proposal_left_approved_is_executed_without_asking(configured_rig: Rig) -> None:
    assert configured_rig.remote_dir is not None
    configured_rig.write("left.txt", b"left approved")
    rec = configured_rig.upload("left.txt")
    configured_rig.accept(rec)  # decided in the UI, never executed
    r = placet_cli("accept", str(rec.id), env=_env())  # no terminal, no --yes
    assert r.returncode == 0, r.stderr
    assert "already approved" in r.stdout
    assert (configured_rig.remote_dir / "left.txt").read_bytes() == b"left approved"


def test_an_approval_set_in_the_database_is_not_executed_and_verify_names_it(
    configured_rig: Rig,
) -> None:
    import sqlite3

    assert configured_rig.remote_dir is not None
    configured_rig.write("forged.txt", b"never approved")
    rec = configured_rig.upload("forged.txt")
    events = len(configured_rig.store.audit_events())
    con = sqlite3.connect(configured_rig.settings.db_path)
    con.execute("UPDATE proposal SET status = 'approved' WHERE id = ?", (rec.id,))
    con.commit()
    con.close()
    r = placet_cli("accept", str(rec.id), env=_env())
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "no approval by the owner is recorded" in r.stderr
    assert not (configured_rig.remote_dir / "forged.txt").exists()
    assert configured_rig.store.get(rec.id).status == "approved"
    assert len(configured_rig.store.audit_events()) == events  # no claim, no failure written
    v = placet_cli("audit", "--verify", env=_env())
    assert v.returncode == 6 and "changed outside the store" in v.stdout, v.stdout


def test_executing_proposal_is_not_taken_over(configured_rig: Rig) -> None:
    from placet.store import LeaseHolder

    configured_rig.write("busy.txt", b"b")
    rec = configured_rig.upload("busy.txt")
    configured_rig.accept(rec)
    configured_rig.store.claim(rec.id, holder=LeaseHolder.current())  # this (live) process holds it
    write_config(configured_rig.settings, drive=configured_rig.drive.spec, allow_yes=True)
    r = placet_cli("accept", str(rec.id), "--yes", env=_env())
    assert r.returncode == 4 and "executing" in r.stderr
    assert configured_rig.store.get(rec.id).status == "executing"


def test_overwrite_download_with_policy_in_config_toml(configured_rig: Rig) -> None:
    assert configured_rig.remote_dir is not None
    (configured_rig.remote_dir / "conf.ini").write_bytes(b"from the drive")
    configured_rig.write("conf.ini", b"local edition")
    root = str(configured_rig.root.path)
    write_config(configured_rig.settings, drive=configured_rig.drive.spec, allow_yes=True,
                 roots={root: "allow-overwrite"})  # fmt: skip
    configured_rig.settings = load_settings().model_copy(
        update={"drive": configured_rig.drive.spec}
    )
    assert configured_rig.settings.download_policy(configured_rig.root.path) == "allow-overwrite"
    rec = configured_rig.download("conf.ini", "conf.ini", overwrite=True)
    r = placet_cli("accept", str(rec.id), "--yes", env=_env())
    assert r.returncode == 0, r.stderr
    assert configured_rig.local("conf.ini").read_bytes() == b"from the drive"
    trash = list(configured_rig.settings.trash_dir.iterdir())
    assert [p.read_bytes() for p in trash] == [b"local edition"]


def test_drive_binding_is_checked_before_the_code_is_asked(configured_rig: Rig) -> None:
    configured_rig.write("b.txt", b"b")
    fresh = configured_rig.upload("b.txt")
    other, _ = configured_rig.store.create_proposal(
        kind="upload",
        request=dict(fresh.request, name="b2.txt"),
        evidence=fresh.evidence,
        reason="made against another drive",
        drive_spec="local:/somewhere/else",
        run_id="run-other",
        ttl_seconds=300,
    )
    rc, out = run_on_pty([str(PLACET), "accept", str(other.id)], _env(), 60)
    assert rc == 4, out
    assert "drive_changed" in out and "local:/somewhere/else" in out
    assert "type the code" not in out  # refused before the code was asked
    assert configured_rig.store.get(other.id).status == "pending"
    assert configured_rig.store.op_results(other.id) == []


# --- every risk flag is shown, whatever the padding ----------------------------------------


def _padded_sync(rig: Rig, pad: int) -> int:
    """A sync of `pad` harmless-looking mkdirs with accented names, then one that makes
    a CI workflow folder: the runs_code flag comes after 50 other flags and 200 ops."""
    padding = [f"d\u00e9j\u00e0-{i:03d}" for i in range(pad)]
    rec, _ = rig.propose_ops(mkdir_ops([*padding, "zz/.github/workflows"]), "tidy folders")
    return rec.id


def test_padded_sync_shows_every_flag_and_says_how_many_ops_are_not_listed(
    configured_rig: Rig,
) -> None:
    pid = _padded_sync(configured_rig, 260)
    r = placet_cli("accept", str(pid), env=_env())
    assert r.returncode == 4 and "no_terminal" in r.stderr  # shown, then refused
    out = r.stdout
    assert f"  ... and 61 more ops (see `placet show {pid} --all`" in out
    assert "placet risk flags (261: 1 runs_code, 260 non_ascii_name):" in out
    flag_lines = [line for line in out.splitlines() if line.startswith("    ! ")]
    assert len(flag_lines) == 261
    assert flag_lines[0].startswith("    ! runs_code: 'zz/.github/workflows'")  # worst first
    assert "d\u00e9j\u00e0-259" in out  # the last padding op's flag, past any cut
    assert out.count("(ASCII:") == 260 + 200  # once per flag, once per listed op line
    assert configured_rig.store.get(pid).status == "pending"


def test_flags_match_the_root_path_and_the_code_prompt_counts_them(
    configured_rig: Rig, tmp_path: Path
) -> None:
    """A root that is itself a .git folder: the download to hooks/pre-commit is runs_code,
    and the code prompt repeats the flag counts it is typed for."""
    gitdir = tmp_path / "repo" / ".git"
    rec = propose_hook_download(configured_rig, gitdir)
    rc, out = run_on_pty([str(PLACET), "accept", str(rec.id)], _env(), 30, typed="AAAAAA")
    assert rc == 4, out
    assert "! runs_code: 'hooks/pre-commit' in the local root" in out
    assert f"matches '.git/' in the path of the local root '{gitdir}'" in out
    assert "with 1 op(s), 1 risk flag(s): 1 runs_code, all listed above" in out
    assert not (gitdir / "hooks/pre-commit").exists()


def test_download_into_placet_config_is_refused_before_the_code(
    configured_rig: Rig, tmp_path: Path
) -> None:
    """A root holding placet's data dir (made before the root rule, or under another
    PLACET_HOME): a download of config.toml with allow_yes = true is refused at once."""
    rec, _ = propose_config_download(configured_rig)
    home = configured_rig.settings.data_dir
    before = configured_rig.settings.config_file.read_bytes()
    rc, out = run_on_pty([str(PLACET), "accept", str(rec.id)], _env(), 60)
    assert rc == 4, out
    assert "placet_own_path" in out and f"'{home}'" in out
    assert "type the code" not in out
    assert configured_rig.settings.config_file.read_bytes() == before
    assert configured_rig.store.get(rec.id).status == "pending"


def test_upload_into_placet_folders_on_a_local_drive_is_refused_before_the_code(
    settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """The drive is a local folder that holds placet's data dir (and its config.toml): an
    upload replacing config.toml there is refused before the code is asked."""
    r = make_rig(settings, make_drive(str(tmp_path)), tmp_path, tmp_path)
    write_config(r.settings, drive=r.drive.spec)
    before = r.settings.config_file.read_bytes()
    r.write("cfg.toml", b"allow_yes = true\n")
    home = r.settings.data_dir
    rec = r.upload("cfg.toml", home.name, name="config.toml", replace_existing=True)
    rc, out = run_on_pty([str(PLACET), "accept", str(rec.id)], _env(), 60)
    assert rc == 4, out
    assert "placet_own_path" in out and "placet drive set" in out
    assert "type the code" not in out
    assert r.settings.config_file.read_bytes() == before
