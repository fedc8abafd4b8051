"""The desktop channel over a real (private) D-Bus session bus, with a stand-in
freedesktop notification server on it; and off, said so, without a bus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.support.mcp import make_workspace, ok

pytest.importorskip("dbus_fast")  # desktop-notifier's D-Bus library: Linux only
from tests.support.dbus_notifications import DBUS_DAEMON, NotificationServer, session_bus

PLACET = str(Path(sys.executable).parent / "placet")

pytestmark = pytest.mark.skipif(DBUS_DAEMON is None, reason="dbus-daemon is not installed")


def _config(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text("[notify]\nburst_quiet_s = 0.2\n[notify.desktop]\n")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_proposal_shows_on_the_desktop(
    tmp_path: Path, placet_home: Path, anyio_backend: str
) -> None:
    ws = make_workspace(tmp_path, placet_home)
    _config(placet_home)
    with session_bus(tmp_path) as address, NotificationServer(address) as server:
        ws.extra_env["DBUS_SESSION_BUS_ADDRESS"] = address
        async with Client(ws.params()) as client:
            r = await client.call_tool(
                "propose_mkdir", {"remote_parent": "", "name": "desk\u202etop", "reason": "r"}
            )
            pid = ok(r)["proposal"]["id"]
            assert await anyio.to_thread.run_sync(server.wait_for, 1)
        ((app, summary, body),) = server.got
        assert app == "placet" and summary == "placet: 1 proposal waits for you"
        assert f"#{pid} mkdir, drive:desk\\u202etop" in body and "\u202e" not in body

        env = {**os.environ, **ws.env}
        r2 = subprocess.run(
            [PLACET, "notify", "test"], env=env, capture_output=True, text=True, timeout=60
        )
        assert r2.returncode == 0 and "desktop: sent" in r2.stdout, r2.stdout + r2.stderr
        assert server.wait_for(2) and server.got[1][1] == "placet: test notification"


def test_without_a_session_bus_the_desktop_is_off_and_doctor_says_so(
    tmp_path: Path, placet_home: Path
) -> None:
    _config(placet_home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS")}
    env.update(PLACET_HOME=str(placet_home), XDG_RUNTIME_DIR=str(tmp_path / "none"))
    r = subprocess.run(
        [PLACET, "notify", "test"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "desktop: off: no D-Bus session bus" in r.stdout
    r = subprocess.run([PLACET, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    line = next(x for x in r.stdout.splitlines() if "notify desktop" in x)
    assert line.startswith("warn") and "no D-Bus session bus" in line
