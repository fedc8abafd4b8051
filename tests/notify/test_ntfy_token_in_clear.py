"""An ntfy access token is not sent over plain http to a host that is not loopback (anyone
on the path reads it), unless the owner opts in with `allow_insecure_token`; `placet
notify test` and `placet doctor` say why. The network path is a real HTTP listener on
127.0.0.1 acting as the proxy (`http_proxy`): whatever placet sends to
`http://ntfy.example.org` crosses it, as it would cross any router on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.notify.status import channel_checks
from tests.support.notify import Listener

TOKEN = "tk_secret-ntfy-token"
PLACET = str(Path(sys.executable).parent / "placet")


def _env(file_keyring: Path, placet_home: Path, proxy: Listener) -> dict[str, str]:
    """The environment of a `placet` run whose HTTP goes through `proxy`, with the ntfy
    token in the test's keyring file (which this process reads too)."""
    file_keyring.write_text(json.dumps({"placet/notify-ntfy-token": TOKEN}))
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env.update(PLACET_HOME=str(placet_home), http_proxy=proxy.url(""), HTTP_PROXY=proxy.url(""))
    return env


def _config(placet_home: Path, url: str, *extra: str) -> None:
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = ["[notify.ntfy]", f'url = "{url}"', *extra]
    (placet_home / "config.toml").write_text("\n".join(lines) + "\n")


def _doctor() -> tuple[str, str, str]:
    (row,) = [r for r in channel_checks(load_settings()) if r[0] == "notify ntfy"]
    return row[1], row[2], row[3]


def test_a_token_over_http_to_another_host_is_refused_and_doctor_says_why(
    file_keyring: Path, placet_home: Path, listener: Listener
) -> None:
    _config(placet_home, "http://ntfy.example.org/placet-topic")
    env = _env(file_keyring, placet_home, listener)
    r = subprocess.run(
        [PLACET, "notify", "test"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ntfy: FAILED: refusing to send the ntfy access token to ntfy.example.org" in r.stdout
    assert "allow_insecure_token = true" in r.stdout and "https://" in r.stdout
    assert listener.tried == []  # nothing crossed the path
    status, text, fix = _doctor()
    assert status == "FAIL" and "plain http://" in text and "https://" in fix


def test_the_owner_may_opt_in_and_doctor_warns(
    file_keyring: Path, placet_home: Path, listener: Listener
) -> None:
    _config(placet_home, "http://ntfy.example.org/placet-topic", "allow_insecure_token = true")
    env = _env(file_keyring, placet_home, listener)
    r = subprocess.run(
        [PLACET, "notify", "test"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "ntfy: sent" in r.stdout, r.stdout + r.stderr
    (seen,) = listener.tried
    assert seen.path == "http://ntfy.example.org/"  # as the path saw it: in clear
    assert seen.headers["authorization"] == f"Bearer {TOKEN}"
    status, text, _fix = _doctor()
    assert status == "warn" and "in clear (allow_insecure_token = true)" in text


@pytest.mark.parametrize(
    ("url", "clear"),
    [
        ("http://ntfy.example.org/t", "ntfy.example.org"),
        ("http://10.0.0.5:8080/t", "10.0.0.5"),
        ("http://[fe80::1]/t", "fe80::1"),
        ("https://ntfy.example.org/t", None),
        ("http://localhost:2586/t", None),
        ("http://ntfy.localhost/t", None),
        ("http://127.0.0.1:2586/t", None),
        ("http://127.1.2.3/t", None),
        ("http://[::1]:2586/t", None),
    ],
)
def test_which_urls_carry_a_token_in_clear(url: str, clear: str | None) -> None:
    from placet.notify.channels import token_in_clear

    assert token_in_clear(url) == clear
