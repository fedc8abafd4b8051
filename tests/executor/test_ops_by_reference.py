"""Sync ops stored by reference, held against tampering
(docs/decisions/0023-ops-by-reference.md): the executor binds the op rows to
the request it hash-checked, `audit --verify` checks op rows, a malformed op row is a
typed refusal, an accept binds the hash the owner was shown, and `placet accept` points at
`show --all`."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3

import pytest

from placet.config import Settings
from placet.errors import PolicyRefused
from placet.executor import bind
from placet.schema import (
    by_reference,
    canonical_json,
    request_hash,
)
from placet.store import ProposalRecord, open_store
from placet.tui import make_app
from tests.support.review import T0, big_sync, quiet, until
from tests.support.rig import Rig, mkdir_ops, placet_cli, write_config


def _request(rig: Rig, names: list[str]) -> dict[str, object]:
    return rig.sync_request(mkdir_ops(names))


def _sync(rig: Rig, names: list[str]) -> ProposalRecord:
    rec, created = rig.propose_ops(mkdir_ops(names))
    assert created
    return rec


def _sql(rig: Rig, script: str) -> None:
    con = sqlite3.connect(rig.settings.db_path)
    try:
        con.executescript(script)
        con.commit()
    finally:
        con.close()


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _swap_sql(rig: Rig, pid: int, names: list[str], pid_sql: str | None = None) -> str:
    """SQL that puts another op list in place: the request JSON with its digest (the
    `request_hash` column left as it is) and the op rows, consistent with each other."""
    split = by_reference(_request(rig, names))
    assert split is not None
    stored, rows = split
    p = pid_sql or str(pid)
    values = ", ".join(f"({p}, {i}, {_q(t)})" for i, t in rows)
    return (
        f"UPDATE proposal SET request = {_q(canonical_json(stored))} WHERE id = {p};\n"
        f"DELETE FROM proposal_op WHERE proposal_id = {p};\n"
        f"INSERT INTO proposal_op (proposal_id, op_index, op) VALUES {values};\n"
    )


def test_break_bind_runs_ops_of_a_request_it_did_not_hash(rig: Rig) -> None:
    shown = ["d000", "d001", "d002"]
    rec = _sync(rig, shown)
    rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": []})
    record = rig.store.get(rec.id)  # what `execute` holds after its claim
    _sql(rig, _swap_sql(rig, rec.id, ["evil0", "evil1", "evil2"]))
    try:
        plan = bind(rig.store, rig.settings, record, rig.drive)
    except PolicyRefused as e:
        assert e.error_code == "request_altered"
        return
    pytest.fail(f"bind returned ops the owner never saw: {[o.remote_path for o in plan.ops]}")


def test_break_a_trigger_swaps_the_ops_between_claim_and_bind(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rec = _sync(rig, ["d000", "d001", "d002"])
    # An attacker who can write the database (not the audit chain) plants a trigger that
    # swaps the request's digest and the op rows (never the request_hash column) when the
    # proposal starts executing.
    swap = _swap_sql(rig, rec.id, ["evil0", "evil1", "evil2"], pid_sql="new.id")
    back = _swap_sql(rig, rec.id, ["d000", "d001", "d002"], pid_sql="new.id")
    _sql(rig, "CREATE TRIGGER swap_ops AFTER UPDATE OF status ON proposal "
              f"WHEN new.status = 'executing' BEGIN\n{swap}END;\n"
              "CREATE TRIGGER swap_back AFTER UPDATE OF status ON proposal "
              f"WHEN old.status = 'executing' BEGIN\n{back}END;")  # fmt: skip
    write_config(rig.settings, drive=rig.drive.spec, allow_yes=True)
    r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
    shown_lines = r.stdout
    assert "evil" not in shown_lines  # the owner was shown d000..d002
    ran = sorted(os.listdir(rig.remote_dir))
    # ... and when it ends the trigger puts the shown ops back: the audit chain verifies.
    verified = placet_cli("audit", "--verify", env=dict(os.environ))
    # The executor checks the op rows against the request it hash-checked: refused, and
    # no op the owner was not shown ran.
    assert not [n for n in ran if n.startswith("evil")], (ran, verified.stdout, r.stderr)
    assert "request_altered" in r.stderr or "altered" in r.stdout + r.stderr, r.stderr


def test_break_audit_verify_misses_an_edited_op_row(rig: Rig) -> None:
    rec = _sync(rig, ["d000", "d001", "d002"])
    op = rig.store.ops(rec.id, start=1, limit=1)[0] | {"remote_path": "elsewhere"}
    _sql(rig, f"UPDATE proposal_op SET op = {_q(canonical_json(op))} "
              f"WHERE proposal_id = {rec.id} AND op_index = 1;")  # fmt: skip
    with pytest.raises(PolicyRefused):
        rig.store.checked_ops(rec.id, rec.request)  # the executor does see it
    assert not rig.store.verify_audit().ok
    r = placet_cli("audit", "--verify", env=dict(os.environ))
    assert r.returncode != 0, r.stdout


def test_break_an_op_row_that_is_not_json_is_a_typed_refusal(rig: Rig) -> None:
    rec = _sync(rig, ["d000", "d001", "d002"])
    _sql(rig, f"UPDATE proposal_op SET op = '{{not json' "
              f"WHERE proposal_id = {rec.id} AND op_index = 1;")  # fmt: skip
    write_config(rig.settings, drive=rig.drive.spec, allow_yes=True)
    for args in (("show", str(rec.id)), ("show", str(rec.id), "--json"),
                 ("accept", str(rec.id), "--yes")):  # fmt: skip
        r = placet_cli(*args, env=dict(os.environ))
        assert "Traceback" not in r.stderr, (args, r.stderr[-400:])
    with pytest.raises(PolicyRefused) as refused:
        rig.store.checked_ops(rec.id, rec.request)
    assert refused.value.error_code == "request_altered"


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_break_review_ui_accept_of_a_non_json_op_row_is_refused_not_a_crash(
    settings: Settings,
) -> None:
    s = quiet(settings)
    store = open_store(s)
    try:
        rec = big_sync(store, 3)
        con = sqlite3.connect(s.db_path)
        con.execute("UPDATE proposal_op SET op = '{x' WHERE proposal_id = ? AND op_index = 1",
                    (rec.id,))  # fmt: skip
        con.commit()
        con.close()
        app = make_app(s, store, clock=lambda: T0)
        async with app.run_test(size=(160, 60)) as pilot:
            await pilot.pause()
            await pilot.press("a")
            assert await until(pilot, lambda: bool(app._notifications) or not app.is_running)
            assert app.is_running
        assert store.get(rec.id).status == "pending"
    finally:
        store.close()


def test_break_accept_binds_the_hash_it_was_shown_not_the_current_one(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rec = _sync(rig, ["d000", "d001", "d002"])
    shown = rec.request_hash
    # Between the owner's view and the approval, everything is rewritten consistently.
    split = by_reference(_request(rig, ["evil0", "evil1", "evil2"]))
    assert split is not None
    new_hash = request_hash("sync", split[0], {})
    _sql(rig, _swap_sql(rig, rec.id, ["evil0", "evil1", "evil2"])
         + f"UPDATE proposal SET request_hash = {_q(new_hash)} WHERE id = {rec.id};")  # fmt: skip
    with contextlib.suppress(Exception):  # a refusal is the fix
        rig.store.accept(rec.id, detail={"request_hash": shown, "skip_ops": []})
    status = rig.store.get(rec.id).status
    write_config(rig.settings, drive=rig.drive.spec)
    r = placet_cli("accept", str(rec.id), env=dict(os.environ))  # no --yes, no terminal
    assert (status, sorted(os.listdir(rig.remote_dir))) == ("pending", []), r.stdout[-300:]


def test_break_accept_points_to_a_view_that_lists_the_remaining_ops(rig: Rig) -> None:
    n = 250
    rec = _sync(rig, [f"d{i:03d}" for i in range(n)])
    write_config(rig.settings, drive=rig.drive.spec)
    r = placet_cli("accept", str(rec.id), env=dict(os.environ))  # no terminal: stops at the code
    assert f"d{n - 1:03d}" not in r.stdout  # cut: the owner is sent elsewhere for the rest
    hint = re.search(r"see `(placet show[^`]*)`", r.stdout)
    assert hint is not None, r.stdout[-500:]
    shown = placet_cli(*hint.group(1).split()[1:], env=dict(os.environ))
    assert f"drive:/d{n - 1:03d}" in shown.stdout, shown.stdout[-400:]
