"""The commands around pinned passkeys (`placet.config.pins`): `placet web pair` records
its link beside config.toml; `placet keys` says which passkeys are not pinned; `placet
keys pin ID` pins one only after a code typed at the terminal (never from stdin);
`placet keys unpin ID` and `revoke` take the pin back. And `placet web` on a port in use
says so (``port_in_use``) before printing any URL."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess

from placet.config import Settings
from placet.config.pins import key_sha256, read_pins
from placet.store import open_store
from placet.store.passkeys import token_hash
from tests.support.rig import PLACET
from tests.support.terminal import PtyProcess


def keys(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLACET), "keys", *args], capture_output=True, text=True, timeout=60)


def test_pair_records_its_link_beside_config_toml(settings: Settings) -> None:
    r = subprocess.run([str(PLACET), "web", "pair"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    token = r.stdout.splitlines()[0].rsplit("/", 1)[1]
    pins = read_pins(settings.config_file)
    assert [p.token_sha256 for p in pins.pairings] == [token_hash(token)]


def test_keys_pin_needs_the_code_at_the_terminal(settings: Settings) -> None:
    with open_store(settings) as store:  # registered in the database alone
        store.register_passkey(
            store.create_pairing(), credential_id="Y3JlZA", public_key=b"\xa5", sign_count=0,
            name="old phone",
        )  # fmt: skip
    listed = keys()
    assert "NOT PINNED" in listed.stdout and "placet keys pin ID" in listed.stdout
    assert json.loads(keys("--json").stdout)["pinned"] is False

    piped = subprocess.run(
        [str(PLACET), "keys", "pin", "1"], input="AAAAAA\n", capture_output=True, text=True,
        timeout=60, start_new_session=True,  # no controlling terminal
    )  # fmt: skip
    assert piped.returncode == 4 and "no_terminal" in piped.stderr, piped.stderr
    assert read_pins(settings.config_file).pin_of("Y3JlZA") is None

    wrong = PtyProcess([str(PLACET), "keys", "pin", "1"], dict(os.environ))
    try:
        assert wrong.wait_for(b"type the code ")
        assert key_sha256(b"\xa5")[:16].encode() in wrong.bytes()  # the key it would pin
        wrong.send("XXXXXX\r")
        assert wrong.wait_exit(60) == 4
    finally:
        wrong.kill()
    assert b"confirmation_mismatch" in wrong.bytes()
    assert read_pins(settings.config_file).pin_of("Y3JlZA") is None

    p = PtyProcess([str(PLACET), "keys", "pin", "1"], dict(os.environ))
    try:
        assert p.wait_for(b"type the code ")
        m = re.search(rb"type the code ([A-Z0-9]{6})", p.bytes())
        assert m, p.bytes()
        p.send(m.group(1).decode() + "\r")
        assert p.wait_exit(60) == 0, p.bytes().decode(errors="replace")
    finally:
        p.kill()
    pin = read_pins(settings.config_file).pin_of("Y3JlZA")
    assert pin is not None and pin.key_sha256 == key_sha256(b"\xa5") and pin.unpinned_at is None
    assert json.loads(keys("--json").stdout)["pinned"] is True
    assert "already pinned" in keys("pin", "1").stdout  # no code needed for nothing

    unpin = keys("unpin", "1")
    assert unpin.returncode == 0 and "unpinned" in unpin.stdout
    assert "NOT PINNED" in keys().stdout
    assert keys("unpin", "1").returncode == 3
    assert keys("revoke", "1").returncode == 0
    pin = read_pins(settings.config_file).pin_of("Y3JlZA")
    assert pin is not None and pin.unpinned_at is not None  # kept for audit --verify


def test_a_port_in_use_is_refused_before_the_url_is_printed() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = subprocess.run(
            [str(PLACET), "web", "--port", str(port)], capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "port_in_use" in r.stderr and f"127.0.0.1:{port}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "placet web:" not in r.stdout, r.stdout


def test_doctor_tells_a_signed_mode_with_no_pinned_passkey(settings: Settings) -> None:
    """A newcomer who sets `approvals = "signed"` before pairing can approve nothing;
    `placet doctor` says so, with the commands, and warns that `PLACET_HOME` keeps the
    pins in the database's folder (docs/security.md, "Passkeys pinned outside the
    database")."""
    from tests.support.pins import register_pinned
    from tests.support.rig import write_config

    def doctor() -> tuple[int, str]:
        r = subprocess.run([str(PLACET), "doctor"], capture_output=True, text=True, timeout=120)
        lines = [ln for ln in r.stdout.splitlines() if ln.split()[:2][-1:] == ["approvals"]]
        return r.returncode, (lines or [""])[0] + "\n" + r.stdout

    write_config(settings, approvals="signed")
    with open_store(settings) as store:
        store.register_passkey(
            store.create_pairing(), credential_id="bm90LXBpbm5lZA", public_key=b"\xa5",
            sign_count=0, name="added in the database",
        )  # fmt: skip
    code, out = doctor()
    assert code == 1 and out.startswith("FAIL") and "no registered passkey is pinned" in out
    assert "placet web pair" in out and "holds both the pinned passkeys and the database" in out
    with open_store(settings) as store:
        register_pinned(store, "b3duZXI", b"\xa5\x01", "owner's phone")
    code, out = doctor()
    assert out.startswith("ok") and "signed, 1 pinned passkey(s)" in out, out
