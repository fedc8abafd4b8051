"""The pins file (`placet.config.pins`): private and rewritten whole, never losing a
concurrent writer's change; a pin names a key by its digest; an unpinned key is kept for
the approvals it signed; a pairing link is taken once, while unexpired; a malformed file
is a clear ConfigError."""

from __future__ import annotations

import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.config.pins import editing_pins, key_sha256, pins_path, read_pins
from placet.errors import ConfigError

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_pin_names_a_key_by_its_digest_and_survives_unpinning(tmp_path: Path) -> None:
    config = tmp_path / "cfg" / "config.toml"
    assert read_pins(config).passkeys == []  # no file: no pins
    with editing_pins(config) as pins:
        pins.pin("Y2lk", b"key", "phone", T0)
    path = pins_path(config)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    pins = read_pins(config)
    assert pins.problem("Y2lk", b"key", active=True) is None
    assert "not pinned" in str(pins.problem("b3RoZXI", b"key", active=True))
    assert "database was altered" in str(pins.problem("Y2lk", b"swapped", active=True))
    with editing_pins(config) as pins:
        assert pins.unpin("Y2lk", T0) and not pins.unpin("Y2lk", T0)
    pins = read_pins(config)
    assert "was unpinned" in str(pins.problem("Y2lk", b"key", active=True))
    assert pins.problem("Y2lk", b"key", active=False) is None  # what it signed still counts
    assert pins.pin_of("Y2lk") is not None and pins.pin_of("Y2lk").key_sha256 == key_sha256(b"key")  # type: ignore[union-attr]


def test_a_pairing_is_taken_once_and_lapses(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    with editing_pins(config) as pins:
        pins.open_pairing("a" * 64, T0 + timedelta(minutes=10), T0)
        pins.open_pairing("b" * 64, T0 + timedelta(minutes=10), T0)
    pins = read_pins(config)
    assert pins.has_pairing("a" * 64, T0 + timedelta(minutes=9))
    assert not pins.has_pairing("a" * 64, T0 + timedelta(minutes=10))  # lapsed
    assert pins.take_pairing("a" * 64, T0) and not pins.take_pairing("a" * 64, T0)
    assert not pins.take_pairing("c" * 64, T0)
    assert pins.has_pairing("b" * 64, T0)


def test_an_exception_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    with pytest.raises(RuntimeError), editing_pins(config) as pins:
        pins.pin("Y2lk", b"key", "phone", T0)
        raise RuntimeError("refused half way")
    assert read_pins(config).passkeys == []


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"

    def writer(n: int) -> None:
        for i in range(5):
            with editing_pins(config) as pins:
                pins.pin(f"k{n}-{i}", b"key%d" % n, "w", T0)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(read_pins(config).passkeys) == 40


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"placet_pinned_passkeys": 2}',
        '{"placet_pinned_passkeys": 1, "passkeys": [{"credential_id": "x"}]}',
        '{"placet_pinned_passkeys": 1, "passkeys": [{"credential_id": "x", "key_sha256": "y",'
        ' "pinned_at": "2026-01-01T00:00:00"}]}',
    ],
)
def test_a_malformed_file_is_a_config_error(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config.toml"
    pins_path(config).write_text(text)
    with pytest.raises(ConfigError) as e:
        read_pins(config)
    assert str(pins_path(config)) in e.value.message and "placet keys pin" in e.value.message
