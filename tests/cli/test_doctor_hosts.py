"""`placet doctor` on a host of a shared queue in signed mode, and for a Proton Drive.

Signed mode runs an approval only when its passkey is pinned on the host that runs it,
and pins live beside each host's `config.toml`: a second host where the owner's passkey
is not pinned refuses every genuine approval. Doctor says so on that host, and names a
registered passkey this host has not pinned. Two hosts are two data directories on one
real PostgreSQL database. A `protondrive:` drive gets what is known of rclone's Proton
backend (reported failing since August 2026).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from placet.cli.doctor import Check, run_checks
from placet.config import load_settings
from placet.store import open_store
from tests.support.pins import register_pinned
from tests.support.postgres import PgServer, drop_database, migrated_database


@pytest.fixture
def shared_url(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    url = migrated_database(pg_server)
    yield url
    drop_database(pg_server, url)


def _host(home: Path, url: str) -> dict[str, str]:
    """A host: its own data directory (and config.toml, and pins) on the shared queue."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text('approvals = "signed"\n')
    return {"PLACET_HOME": str(home), "PLACET_DB": url, "PGPASSWORD": os.environ["PGPASSWORD"]}


def _lines(env: dict[str, str], *names: str) -> list[Check]:
    return [c for c in run_checks(env) if c.name in names]


def test_a_host_without_the_owners_pin_is_told_it_refuses_approvals(
    tmp_path: Path, shared_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _host(tmp_path / "host-a", shared_url)
    b = _host(tmp_path / "host-b", shared_url)
    for k, v in a.items():
        monkeypatch.setenv(k, v)
    with open_store(load_settings()) as store:  # paired on host A: pinned there only
        register_pinned(store, "b3duZXI", b"\xa5\x01", "owner's phone")

    (on_a,) = _lines(a, "approvals")
    assert (on_a.status, on_a.text) == ("ok", "signed, 1 pinned passkey(s) on this host")
    assert not _lines(a, "pins")  # the database is not in the pins' folder

    (on_b,) = _lines(b, "approvals")
    assert on_b.status == "FAIL"
    assert "shared queue" in on_b.text and "pinned on this host" in on_b.text
    assert "passkey_not_pinned" in on_b.text and "placet keys pin ID" in on_b.fix


def test_a_registered_passkey_not_pinned_here_is_named(
    tmp_path: Path, shared_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _host(tmp_path / "host-a", shared_url)
    for k, v in a.items():
        monkeypatch.setenv(k, v)
    with open_store(load_settings()) as store:
        register_pinned(store, "b3duZXI", b"\xa5\x01", "owner's phone")
        laptop = store.register_passkey(  # registered (say, on host B), not pinned on A
            store.create_pairing(), credential_id="bGFwdG9w", public_key=b"\xa5\x02",
            sign_count=0, name="owner's laptop",
        )  # fmt: skip
    (approvals,) = _lines(a, "approvals")
    assert approvals.status == "ok"
    (pins,) = _lines(a, "pins")
    assert pins.status == "warn" and f"passkey {laptop.id} (owner's laptop)" in pins.text
    assert "approvals it signs fail on this host" in pins.text
    assert f"placet keys pin {laptop.id}" in pins.fix


@pytest.mark.parametrize("spec", ["protondrive:Agents", ":protondrive:Agents"])
def test_a_proton_drive_is_told_what_is_known_of_rclones_backend(
    placet_home: Path, rclone_home: Path, spec: str
) -> None:
    env = {"PLACET_HOME": str(placet_home), "PLACET_DRIVE": spec}
    (proton,) = _lines(env, "proton")
    assert proton.status == "warn"
    assert "August 2026" in proton.text and "9764" in proton.text and "9622" in proton.text
    assert "gdrive:Agents" in proton.fix
