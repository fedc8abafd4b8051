"""Each proposal records the stable id of the host it was made on: a placet data
directory is a host; two of them on one database are two hosts."""

from __future__ import annotations

import os
import stat
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from placet.config import Settings, load_settings
from placet.errors import ConfigError
from placet.store import Store, open_store
from placet.store.host import HOST_ID_FILE, host_id

pytestmark = pytest.mark.usefixtures("store_backend")


def _home(tmp_path: Path, name: str) -> Settings:
    """A data directory of its own, on the one database the backend chose (SQLite: one
    shared file through PLACET_DB)."""
    env = {"PLACET_HOME": str(tmp_path / name)}
    env["PLACET_DB"] = os.environ.get("PLACET_DB") or str(tmp_path / "shared.db")
    return load_settings(env)


def _propose(store: Store, name: str) -> int:
    rec, created = store.create_proposal(
        kind="mkdir",
        request={"kind": "mkdir", "remote_parent": "", "name": name},
        evidence={"remote": {"exists": False}},
        reason="host ids",
        drive_spec="local:/tmp/x",
        run_id="run-h",
        ttl_seconds=600,
    )
    assert created
    return rec.id


def test_two_data_directories_on_one_database_are_two_hosts(tmp_path: Path) -> None:
    a, b = _home(tmp_path, "a"), _home(tmp_path, "b")
    with open_store(a) as store_a, open_store(b) as store_b:
        pa, pb = _propose(store_a, "from-a"), _propose(store_b, "from-b")
        id_a, id_b = store_a.host_id, store_b.host_id
        # Each sees the other's proposal, with the other's host id.
        assert store_b.get(pa).host_id == id_a and store_a.get(pb).host_id == id_b
    assert id_a != id_b and str(uuid.UUID(id_a)) == id_a
    id_file = a.data_dir / HOST_ID_FILE
    assert stat.S_IMODE(id_file.stat().st_mode) == 0o600
    assert id_file.read_text().strip() == id_a
    with open_store(a) as again:  # stable across restarts
        assert again.host_id == id_a and again.get(_propose(again, "again")).host_id == id_a


def test_an_edited_host_id_is_refused(tmp_path: Path) -> None:
    a = _home(tmp_path, "a")
    open_store(a).close()
    (a.data_dir / HOST_ID_FILE).write_text("laptop\n")
    with pytest.raises(ConfigError, match="does not hold a host id"):
        open_store(a)


def test_concurrent_first_calls_agree_and_leave_no_temporary_file(tmp_path: Path) -> None:
    # A loser must never read the winner's file half written ("does not hold a host id"):
    # the id reaches its name whole, by a hard link.
    for round_ in range(30):
        data_dir = tmp_path / str(round_)
        data_dir.mkdir()
        barrier = threading.Barrier(8)

        def first_call(dir_: Path = data_dir, gate: threading.Barrier = barrier) -> str:
            gate.wait()
            return host_id(dir_)

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda _: first_call(), range(8)))
        assert len(set(ids)) == 1
        assert os.listdir(data_dir) == [HOST_ID_FILE]
