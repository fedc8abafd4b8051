"""The digest caches' in-memory copies (`SyncData`): a write of paths the copy holds
updates it, one that adds paths drops it (it is read again, whole, when next needed: a
walk never grows it beside what it holds, docs/decisions/0026-plan-memory.md), and a new
process reads back exactly the values written (one SELECT straight into the compact
structure)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from placet.config import Settings
from placet.errors import StoreError
from placet.store import open_store
from placet.sync.cache import NO_DIGESTS, CachedDigest, OwnedRows
from placet.sync.stored import SyncData
from tests.support.db import raw_db, sql

pytestmark = pytest.mark.usefixtures("store_backend")

N = 1500  # more than 1,000 rows: a bulk write


def _entries() -> list[CachedDigest]:
    out = []
    for i in range(N):
        digests = {} if i % 3 else ({"sha1": f"{i:040x}"} if i % 2 else {"md5": f"{i:032x}"})
        out.append(
            CachedDigest(f"d{i // 100}/f{i}.bin", i, 10**18 + i, 7000 + i, 10**18 + 2 * i,
                         f"{i:064x}", digests or NO_DIGESTS, i % 7 != 0)
        )  # fmt: skip
    return out


def _wipe(settings: Settings, table: str) -> None:
    """Delete a table's rows behind `SyncData`'s back (another connection)."""
    sql(settings, f"DELETE FROM {table}")


def test_a_local_write_of_new_paths_drops_the_copy_and_reads_back_equal(
    settings: Settings,
) -> None:
    store = open_store(settings)
    data = SyncData(store)
    assert dict(data.get_under("root", "")) == {}  # loaded (empty), as a cold index does
    entries = _entries()
    data.put_many("root", entries)
    assert data.loaded_local("root") is None  # new paths: the copy went
    fresh = SyncData(store).get_under("root", "")  # a new process: read from SQLite
    assert fresh == {c.path: c for c in entries}
    assert all(type(c.verified) is bool for c in fresh.values())
    assert fresh["d0/f1.bin"].digests is NO_DIGESTS  # shared, not one empty dict per row
    assert fresh["d0/f3.bin"].digests == {"sha1": f"{3:040x}"}

    kept = data.get_under("root", "")  # read again, whole, and kept
    changed = entries[-1]._replace(sha256="f" * 64)
    data.put_many("root", [changed])  # a path the copy holds: updated in place
    _wipe(settings, "sync_digest_cache")
    assert data.loaded_local("root") is kept
    assert len(kept) == N and kept["d14/f1499.bin"] == changed
    assert SyncData(store).get_under("root", "") == {}


def test_a_remote_write_of_new_paths_drops_the_copy_and_reads_back_equal(
    settings: Settings,
) -> None:
    store = open_store(settings)
    data = SyncData(store)
    assert dict(data.remote_digests("spec:", "sha256")) == {}
    rows = [(f"d{i // 100}/f{i}.bin", i, f"2026-11-30T09:00:{i % 60:02d}Z", f"{i:064x}")
            for i in range(N)]  # fmt: skip
    data.put_remote_digests("spec:", "sha256", rows)
    want = {p: (s, m, d) for p, s, m, d in rows}
    assert dict(SyncData(store).remote_digests("spec:", "sha256")) == want
    assert dict(SyncData(store).remote_digests("spec:", "md5")) == {}

    assert dict(data.remote_digests("spec:", "sha256")) == want  # read again, and kept
    data.put_remote_digests("spec:", "sha256", [("d0/f0.bin", 1, "m", "e" * 64)])
    want["d0/f0.bin"] = (1, "m", "e" * 64)
    _wipe(settings, "sync_remote_digest")
    assert dict(data.remote_digests("spec:", "sha256")) == want  # updated in place
    assert dict(SyncData(store).remote_digests("spec:", "sha256")) == {}


def test_a_write_before_the_copy_is_loaded_does_not_make_a_partial_copy(
    settings: Settings,
) -> None:
    store = open_store(settings)
    entries = _entries()
    SyncData(store).put_many("root", entries[:10])
    data = SyncData(store)
    data.put_many("root", entries[10:20])  # nothing loaded in this one yet
    assert data.loaded_local("root") is None
    assert len(data.get_under("root", "")) == 20  # the first read loads the whole table


def test_skip_rows_pack_alike_from_a_list_or_an_iterator() -> None:
    """`verified_skips` yields its rows; packed from an iterator (4,096 at a time) they
    read back exactly as from a list, across chunk boundaries and when empty."""
    from placet.sync.tables import pack_rows, unpack

    for n in (0, 1, 4096, 4097, 9000):
        rows = [(f"d/f{i}", f"{i:064x}", "sha256", f"{i:064x}", i, None) for i in range(n)]
        want = [list(r) for r in rows]
        assert unpack(pack_rows(iter(rows))) == want
        assert unpack(pack_rows(rows)) == want


def test_skip_rows_past_the_spool_size_pack_to_the_same_bytes() -> None:
    """Packed rows wait in a temporary file once past `SPOOL_BYTES` (~60 MB held while a
    plan of 1,000,000 files classified); `finish` gives exactly the bytes `pack` gives
    the listed rows, below and above that size."""
    from placet.sync.tables import SPOOL_BYTES, pack, pack_rows

    rows = [(f"d/f{i}", hashlib.sha256(b"%d" % i).hexdigest(), "sha256", None, i, None)
            for i in range(150_000)]  # fmt: skip
    big = pack_rows(iter(rows))
    assert len(big) > SPOOL_BYTES and bytes(big) == pack([list(r) for r in rows])
    small = pack_rows(iter(rows[:100]))
    assert len(small) < SPOOL_BYTES and bytes(small) == pack([list(r) for r in rows[:100]])


def test_skip_rows_without_a_temporary_folder_are_a_retryable_store_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past `SPOOL_BYTES` the packed rows need the temporary folder: when it cannot be
    written, the plan fails with a typed, retryable error naming it, not an OSError."""
    import tempfile

    from placet.sync.tables import pack_rows

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    rows = ((f"d/f{i}", hashlib.sha256(b"%d" % i).hexdigest(), None, None, i, None)
            for i in range(150_000))  # fmt: skip
    with pytest.raises(StoreError) as e:
        pack_rows(rows)
    assert e.value.retryable and e.value.details["temporary_folder"].endswith("missing")


def test_a_retried_bulk_write_writes_every_row(settings: Settings) -> None:
    """The bulk write's rows come from a generator made afresh by each attempt: a write
    that failed once (the database locked) and was retried still writes all of them."""
    store = open_store(settings)
    data = SyncData(store)
    real = store._write_raw
    calls = []

    def flaky(what: str, fn: Any) -> Any:
        def once(db: Any, heads: Any) -> Any:
            calls.append(what)
            if len(calls) == 1:
                fn(db, heads)  # consumes the rows, then the attempt fails
                raise sqlite3.OperationalError("database is locked")
            return fn(db, heads)

        return real(what, once)

    store._write_raw = flaky  # type: ignore[method-assign]
    entries = _entries()
    data.put_many("root", entries)
    store._write_raw = real  # type: ignore[method-assign]
    assert len(calls) == 2
    with raw_db(settings) as db:
        (count,) = db.execute("SELECT count(*) FROM sync_digest_cache").fetchone()
    assert count == len(entries)
    store.close()


def test_caches_above_memory_rows_are_not_kept_and_read_back_as_owned_rows(
    settings: Settings,
) -> None:
    store = open_store(settings)
    data = SyncData(store, memory_rows=100)
    assert dict(data.get_under("root", "")) == {}  # loaded (empty) and kept
    entries = _entries()
    data.put_many("root", list(entries), consume=True)  # written in parts, copy dropped
    assert data.loaded_local("root") is None
    rows = data.get_under("root", "")
    assert type(rows) is OwnedRows and rows == {c.path: c for c in entries}
    rows.pop("d0/f1.bin")  # the reader's own: another read is whole again
    assert len(data.get_under("root", "")) == N

    assert dict(data.remote_digests("spec:", "sha256")) == {}
    remote = [(f"d/f{i}.bin", i, "2026-11-30T09:00:00Z", f"{i:064x}") for i in range(N)]
    data.put_remote_digests("spec:", "sha256", remote)
    got = data.remote_digests("spec:", "sha256")
    assert type(got) is OwnedRows and got == {p: (s, m, d) for p, s, m, d in remote}
    store.close()
