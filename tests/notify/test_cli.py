"""`placet notify test|log|secret`, `placet doctor`'s channel lines, and bad `[notify]`
config refused as a clear ConfigError; all through the real `placet` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.errors import ConfigError
from placet.notify.sender import Sender
from placet.store import open_store
from tests.support.keyring_backend import file_keyring_env
from tests.support.notify import Listener, WebhookReceiver, notify_toml

PLACET = str(Path(sys.executable).parent / "placet")
SECRET = "cli-secret"


def _env(tmp_path: Path, placet_home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS")}
    env.update(file_keyring_env(tmp_path / "keyring.json"))
    env.update(PLACET_HOME=str(placet_home), XDG_RUNTIME_DIR=str(tmp_path / "no-runtime"))
    env.update(extra)
    return env


def _run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLACET, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


def _config(placet_home: Path, text: str) -> None:
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(text)


def test_notify_test_sends_through_each_channel_and_says_what_happened(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    _config(placet_home, notify_toml(listener) + "[notify.desktop]\n")
    env = _env(tmp_path, placet_home)
    r = _run(env, "notify", "test")  # no secret yet: nothing could be signed
    assert r.returncode == 1 and "webhook: FAILED: no webhook secret" in r.stdout
    assert "ntfy: sent" in r.stdout and listener.on("/hook") == []
    r = _run(env, "notify", "secret", "webhook", "--stdin", stdin=SECRET + "\n")
    assert r.returncode == 0, r.stderr
    assert "stored the webhook HMAC secret" in r.stdout
    r = _run(env, "notify", "test")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(listener.on("/")) == 2
    assert "ntfy: sent" in lines and "webhook: sent" in lines
    assert any(line.startswith("desktop: off: no D-Bus session bus") for line in lines)
    (hook,) = listener.on("/hook")
    assert hook.json()["event"] == "test"
    assert WebhookReceiver(SECRET).refuse(hook, time.time()) is None
    listener.down()
    r = _run(env, "notify", "test")
    assert r.returncode == 1
    assert "ntfy: FAILED: cannot reach http://127.0.0.1:" in r.stdout


def test_doctor_reports_each_channel(tmp_path: Path, placet_home: Path, listener: Listener) -> None:
    _config(placet_home, notify_toml(listener) + "[notify.desktop]\n")
    env = _env(tmp_path, placet_home)
    r = _run(env, "doctor")
    out = r.stdout
    assert "notify ntfy" in out and "placet-topic" not in out  # the topic stays private
    status = {line[6:].split("  ")[0].strip(): line[:5].strip() for line in out.splitlines()}
    assert status["notify ntfy"] == "ok" and status["notify webhook"] == "FAIL"
    assert status["notify desktop"] == "warn"
    assert "no HMAC secret" in out and "placet notify secret webhook" in out
    assert "no D-Bus session bus" in out
    _run(env, "notify", "secret", "webhook", "--stdin", stdin=SECRET + "\n")
    out = _run(env, "doctor").stdout
    assert "(secret in keyring)" in out and "FAIL  notify" not in out


def test_notify_log_lists_deliveries_and_final_failures(
    tmp_path: Path, placet_home: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(placet_home, notify_toml(listener, webhook=False))
    monkeypatch.setenv("PLACET_TEST_KEYRING_FILE", str(tmp_path / "keyring.json"))
    settings = load_settings()
    t0 = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    with open_store(settings) as store:
        store.create_proposal(
            kind="mkdir",
            request={"kind": "mkdir", "remote_parent": "", "name": "x"},
            evidence={"remote": {"exists": False}},
            reason="r",
            drive_spec="local:/tmp/x",
            run_id="run",
            ttl_seconds=1800,
            now=t0,
        )
        listener.status = 401
        Sender(settings, store, clock=lambda: t0 + timedelta(seconds=1)).tick()
    env = _env(tmp_path, placet_home)
    r = _run(env, "notify", "log")
    assert r.returncode == 0, r.stderr
    assert "ntfy" in r.stdout and "failed" in r.stdout and "HTTP 401" in r.stdout
    (row,) = [json.loads(x) for x in _run(env, "notify", "log", "--json").stdout.splitlines()]
    assert row["state"] == "failed" and row["attempts"] == 1 and row["channel"] == "ntfy"
    assert "1 deliveries failed for good" in _run(env, "doctor").stdout


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[notify]\ndetail = "everything"\n', "notify.detail"),
        ('[notify.ntfy]\nurl = "ftp://x/y"\n', "notify.ntfy.url"),
        ('[notify.ntfy]\nurl = "https://ntfy.sh/"\n', "notify.ntfy.url"),
        ('[notify.ntfy]\nurl = "https://u:p@ntfy.sh/t"\n', "notify.ntfy.url"),
        ('[notify.ntfy]\nurl = "https://ntfy.sh/t"\npriority = 9\n', "notify.ntfy.priority"),
        ('[notify.webhook]\nurl = "https://h/x"\nsecret = "inline"\n', "notify.webhook.secret"),
        ("[notify]\nburst_quiet_s = 0\n", "notify.burst_quiet_s"),
        ('[notify.pager]\nurl = "https://h/x"\n', "notify.pager"),
    ],
)
def test_bad_notify_config_is_a_clear_config_error(placet_home: Path, toml: str, key: str) -> None:
    _config(placet_home, toml)
    with pytest.raises(ConfigError) as e:
        load_settings()
    assert e.value.details["key"] == key
    assert f"invalid setting {key}" in e.value.message
