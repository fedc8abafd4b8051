"""A sync proposal's ops stored by reference (docs/decisions/0023-ops-by-reference.md):
one `proposal_op` row per op, the request carrying counts, bytes by kind and a digest that
binds every op into the request hash. Read only through `Store.op_count` / `Store.ops` /
`Store.iter_ops` / `Store.checked_ops`; an op row edited in the database makes the
executor and `placet accept` refuse; a proposal stored inline by an older placet still
reads, accepts and runs."""

from __future__ import annotations

import json
import os

import pytest

from placet.errors import PolicyRefused
from placet.executor import execute, load_plan
from placet.schema import (
    LocalFileEvidence,
    Op,
    RemoteEvidence,
    canonical_json,
    ops_digest,
    request_hash,
)
from placet.store import ProposalRecord
from placet.store.db import dt_text, utcnow
from tests.support.db import sql
from tests.support.rig import Rig, mkdir_ops, placet_cli, write_config

pytestmark = pytest.mark.usefixtures("store_backend")


def _mkdirs(n: int) -> list[Op]:
    return mkdir_ops(f"d{i:03d}" for i in range(n))


def _sync(rig: Rig, ops: list[Op]) -> ProposalRecord:
    rec, created = rig.propose_ops(ops)
    assert created
    return rec


def _sql(rig: Rig, statement: str, *args: object) -> None:
    sql(rig.settings, statement, *args)


def test_ops_are_rows_and_the_request_carries_counts_bytes_and_digest(rig: Rig) -> None:
    local = LocalFileEvidence(size=7, mtime_ns=1, sha256="ab" * 32)
    upload = Op(index=3, kind="upload", local_path="a", remote_path="a", size=7,
                expected_local=local, expected_remote=RemoteEvidence(exists=False))  # fmt: skip
    ops = [*_mkdirs(3), upload]
    rec = _sync(rig, ops)
    dumped = [op.model_dump(mode="json") for op in ops]
    assert "ops" not in rec.request
    assert rec.request["op_count"] == 4
    assert rec.request["op_kinds"] == {
        "mkdir": {"count": 3, "bytes": 0},
        "upload": {"count": 1, "bytes": 7},
    }
    assert rec.request["ops_digest"] == ops_digest(canonical_json(o) for o in dumped)
    assert rec.request_hash == request_hash("sync", rec.request, rec.evidence)
    assert rig.store.get(rec.id).request == rec.request  # a get never reads the ops

    store = rig.store
    assert store.op_count(rec.id) == 4
    assert store.ops(rec.id) == dumped
    assert store.ops(rec.id, start=1, limit=2) == dumped[1:3]
    assert store.ops(rec.id, start=4) == []
    assert list(store.iter_ops(rec.id, page=3)) == dumped
    assert store.checked_ops(rec.id, rec.request) == dumped
    # The same ops again are the same pending proposal (the digest is in the hash).
    again, created = rig.propose_ops(ops, "again")
    assert (again.id, created) == (rec.id, False)


def test_an_edited_op_row_makes_the_executor_and_accept_refuse(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rec = _sync(rig, _mkdirs(5))
    changed = rig.store.ops(rec.id, start=2, limit=1)[0] | {"remote_path": "elsewhere"}
    _sql(rig, "UPDATE proposal_op SET op = ? WHERE proposal_id = ? AND op_index = 2",
         canonical_json(changed), rec.id)  # fmt: skip
    assert rig.store.ops(rec.id, start=2, limit=1)[0]["remote_path"] == "elsewhere"
    with pytest.raises(PolicyRefused) as refused:
        rig.store.checked_ops(rec.id, rec.request)
    assert refused.value.error_code == "request_altered"

    # `placet accept` refuses before it asks for anything, and leaves it pending.
    write_config(rig.settings, drive=rig.drive.spec, allow_yes=True)
    r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
    assert r.returncode != 0 and "request_altered" in r.stderr, r.stderr
    assert rig.store.get(rec.id).status == "pending"

    # Approved anyway (e.g. directly in the store): the executor refuses to run it.
    rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": []})
    with pytest.raises(PolicyRefused) as at_run:
        execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert at_run.value.error_code == "request_altered"
    assert os.listdir(rig.remote_dir) == []


@pytest.mark.parametrize(
    "tamper",
    [
        "DELETE FROM proposal_op WHERE proposal_id = ? AND op_index = 4",
        "UPDATE proposal_op SET op_index = op_index + 10 WHERE proposal_id = ? AND op_index = 4",
    ],
    ids=["row_deleted", "row_renumbered"],
)
def test_a_missing_or_renumbered_op_row_is_refused(rig: Rig, tamper: str) -> None:
    rec = _sync(rig, _mkdirs(5))
    sql(rig.settings, tamper, rec.id)
    with pytest.raises(PolicyRefused):
        load_plan(rig.store, rec)


def test_skip_ops_are_checked_against_the_stored_op_indexes(rig: Rig) -> None:
    from placet.errors import UsageError

    rec = _sync(rig, _mkdirs(3))
    with pytest.raises(UsageError) as unknown:
        rig.store.accept(rec.id, detail={"skip_ops": [7]})
    assert unknown.value.error_code == "skip_invalid"
    with pytest.raises(UsageError) as everything:
        rig.store.accept(rec.id, detail={"skip_ops": [0, 1, 2]})
    assert everything.value.error_code == "nothing_selected"
    ok = rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": [1]})
    assert ok.status == "approved"


def test_a_proposal_stored_inline_by_an_older_placet_still_reads_and_runs(rig: Rig) -> None:
    """A row as placet stored syncs before `proposal_ops_by_reference`: every op inline in
    the request, the hash over it. The reader takes both forms; nothing is migrated."""
    assert rig.remote_dir is not None
    ops = _mkdirs(3)
    request = rig.sync_request(ops)
    rh = request_hash("sync", request, {})
    now = utcnow()
    _sql(rig, "INSERT INTO proposal (kind, status, request, evidence, request_hash, reason, "
         "drive_spec, run_id, host, created_at, expires_at, attempt) VALUES "
         "('sync', 'pending', ?, '{}', ?, 'old', ?, 'run-old', 'h', ?, ?, 0)",
         canonical_json(request), rh, rig.drive.spec, dt_text(now),
         dt_text(now.replace(year=now.year + 1)))  # fmt: skip
    rec = rig.store.list(["pending"])[-1]
    assert rec.request["ops"] == json.loads(canonical_json(request["ops"]))
    assert rig.store.op_count(rec.id) == 3
    assert rig.store.ops(rec.id, start=1, limit=1) == [request["ops"][1]]
    assert [o.index for o in load_plan(rig.store, rec).ops] == [0, 1, 2]
    rig.store.accept(rec.id, detail={"request_hash": rh, "skip_ops": []})
    final = execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert final.status == "succeeded"
    assert sorted(os.listdir(rig.remote_dir)) == ["d000", "d001", "d002"]


def test_checked_parsed_reads_every_op_exactly_once_a_page_at_a_time(rig: Rig) -> None:
    """The executor's read (`Store.checked_parsed`): pages by index, each op parsed once,
    in index order, progress after each page; the same ops as the whole-list read."""
    rec = _sync(rig, _mkdirs(23))
    seen: list[int] = []
    pages: list[tuple[int, int]] = []

    def parse(op: dict[str, object]) -> int:
        seen.append(int(op["index"]))  # type: ignore[call-overload]
        return int(op["index"])  # type: ignore[call-overload]

    got = rig.store.checked_parsed(
        rec.id, rec.request, parse, page=5, on_page=lambda n, t: pages.append((n, t))
    )
    assert got == seen == list(range(23))
    assert pages == [(5, 23), (10, 23), (15, 23), (20, 23), (23, 23)]
    assert rig.store.checked_parsed(rec.id, rec.request, dict, page=5) == rig.store.checked_ops(
        rec.id, rec.request
    )
    assert rig.store.checked_parsed(rec.id, rec.request, dict, page=23) == rig.store.ops(rec.id)
    rig.store.check_ops(rec.id, rec.request, page=4)  # the rows still hash as bound


@pytest.mark.parametrize("where", [0, 7, 22])
def test_a_row_edited_on_any_page_is_refused_by_the_paged_reads(rig: Rig, where: int) -> None:
    """An op row edited on the first, a middle or the last page: the paged read refuses
    as altered (not as unparseable, even when the edit breaks the op's shape), and the
    hash-only check the executor runs before reusing a shown plan refuses too."""
    rec = _sync(rig, _mkdirs(23))
    bad = rig.store.ops(rec.id, start=where, limit=1)[0] | {"kind": "no_such_kind"}
    _sql(rig, "UPDATE proposal_op SET op = ? WHERE proposal_id = ? AND op_index = ?",
         canonical_json(bad), rec.id, where)  # fmt: skip
    with pytest.raises(PolicyRefused) as parsed:
        rig.store.checked_parsed(rec.id, rec.request, Op.model_validate, page=5)
    assert parsed.value.error_code == "request_altered"
    with pytest.raises(PolicyRefused) as hashed:
        rig.store.check_ops(rec.id, rec.request, page=5)
    assert hashed.value.error_code == "request_altered"
