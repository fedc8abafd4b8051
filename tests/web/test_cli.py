"""The commands: `placet web` serves on 127.0.0.1 and stops on SIGTERM; `placet web pair`
prints a one-time link (and a QR code on a terminal); `placet keys` lists and revokes."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from placet.config import Settings
from placet.store import open_store
from placet.web.app import CSP
from tests.support.rig import PLACET
from tests.support.terminal import PtyProcess
from tests.support.web import free_port


def test_placet_web_serves_on_loopback_and_stops_on_sigterm() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [str(PLACET), "web", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == f"placet web: http://localhost:{port}/"
        assert "placet web pair" in proc.stdout.readline()  # no passkey yet
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://localhost:{port}/", timeout=5)
            except urllib.error.HTTPError as e:  # the sign-in page: no session
                body = e.read().decode()
                assert e.code == 401 and e.headers["Content-Security-Policy"] == CSP
                break
            except OSError:
                assert time.monotonic() < deadline, "placet web did not answer"
                time.sleep(0.05)
        assert "placet web pair" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_pair_prints_a_one_time_link_and_a_qr_code_on_a_terminal(settings: Settings) -> None:
    r = subprocess.run(
        [str(PLACET), "web", "pair", "--port", "9000"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    m = re.match(r"^http://localhost:9000/pair/([A-Za-z0-9_-]{43})$", r.stdout.splitlines()[0])
    assert m, r.stdout
    assert "valid 10 minutes" in r.stdout and "▀" not in r.stdout  # no QR into a pipe
    with open_store(settings) as store:
        store.check_pairing(m.group(1))  # usable

    p = PtyProcess([str(PLACET), "web", "pair"], dict(os.environ))
    try:
        assert p.wait_exit(60) == 0
    finally:
        p.kill()
    out = p.bytes().decode()
    assert "http://localhost:8765/pair/" in out
    assert "▀" in out or "▄" in out or "█" in out  # the QR code, in half blocks


def test_keys_lists_and_revokes(settings: Settings) -> None:
    def keys(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PLACET), "keys", *args], capture_output=True, text=True, timeout=60
        )

    assert "no passkeys" in keys().stdout
    with open_store(settings) as store:
        token = store.create_pairing()
        store.register_passkey(
            token, credential_id="Y3JlZA", public_key=b"\xa5", sign_count=0, name='my "phone"'
        )
    listed = keys()
    assert listed.returncode == 0 and listed.stdout.startswith('1  "my \\"phone\\""  added ')
    revoke = keys("revoke", "1")
    assert revoke.returncode == 0 and "revoked" in revoke.stdout
    assert "no passkeys" in keys().stdout
    rows = [json.loads(line) for line in keys("--all", "--json").stdout.splitlines()]
    assert rows[0]["id"] == 1 and rows[0]["revoked_at"] is not None
    # The passkey's fields but its public key, and whether it is pinned.
    shown = "id credential_id name sign_count created_at last_used_at revoked_at pinned"
    assert sorted(rows[0]) == sorted(shown.split())
    again = keys("revoke", "1")
    assert again.returncode == 3 and "no active passkey 1" in again.stderr


def test_placet_web_serves_over_tls_off_loopback(tmp_path: Path) -> None:
    """With --cert and --key, another listen address is allowed; the page answers over
    https under its --name, with HSTS."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    port = free_port()
    proc = subprocess.Popen(
        [str(PLACET), "web", "--host", "0.0.0.0", "--port", str(port),
         "--cert", str(cert_file), "--key", str(key_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"placet web: https://localhost:{port}/"
        context = ssl.create_default_context(cafile=str(cert_file))
        deadline = time.monotonic() + 20
        while True:
            try:
                url = f"https://localhost:{port}/"
                urllib.request.urlopen(url, timeout=5, context=context)
            except urllib.error.HTTPError as e:  # the sign-in page: no session
                assert e.code == 401
                assert e.headers["Strict-Transport-Security"] == "max-age=31536000"
                break
            except (OSError, ssl.SSLError):
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
