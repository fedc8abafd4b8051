# ruff: noqa: F821, F722  (dbus-fast reads D-Bus signatures from string annotations)
"""A private D-Bus session bus and a stand-in freedesktop notification server (tests only).

`session_bus(tmp)` starts `dbus-daemon --session` on a socket in `tmp` and yields its
address; `NotificationServer(address)` owns ``org.freedesktop.Notifications`` on it (the
interface desktop notification daemons implement) and records every `Notify` call as
(app name, summary, body). Stops by itself on exit.
"""

import asyncio
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dbus_fast import BusType
from dbus_fast.aio import MessageBus
from dbus_fast.service import ServiceInterface, method, signal

DBUS_DAEMON = shutil.which("dbus-daemon")


@contextmanager
def session_bus(tmp: Path) -> Iterator[str]:
    address = f"unix:path={tmp / 'bus'}"
    proc = subprocess.Popen(
        [str(DBUS_DAEMON), "--session", "--nofork", "--print-address=1", f"--address={address}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # printed once it listens
        yield address
    finally:
        proc.terminate()
        proc.wait(10)


class _Notifications(ServiceInterface):
    def __init__(self, got: list[tuple[str, str, str]], cond: threading.Condition) -> None:
        super().__init__("org.freedesktop.Notifications")
        self.got, self.cond, self.next_id = got, cond, 0

    @method(name="Notify")
    def notify(  # type: ignore[no-untyped-def]
        self,
        app_name: "s",
        replaces_id: "u",
        app_icon: "s",
        summary: "s",
        body: "s",
        actions: "as",
        hints: "a{sv}",
        expire_timeout: "i",
    ) -> "u":
        with self.cond:
            self.got.append((app_name, summary, body))
            self.cond.notify_all()
        self.next_id += 1
        return self.next_id

    @method(name="GetCapabilities")
    def get_capabilities(self) -> "as":
        return ["body"]

    @method(name="CloseNotification")
    def close_notification(self, nid: "u"):  # type: ignore[name-defined,no-untyped-def]
        return None

    @method(name="GetServerInformation")
    def get_server_information(self) -> "ssss":
        return ["placet-tests", "placet", "1", "1.2"]

    @signal(name="NotificationClosed")
    def notification_closed(self) -> "uu":
        return [0, 0]

    @signal(name="ActionInvoked")
    def action_invoked(self) -> "us":
        return [0, ""]


class NotificationServer:
    def __init__(self, address: str) -> None:
        self.got: list[tuple[str, str, str]] = []
        self.cond = threading.Condition()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve() -> None:
            bus = await MessageBus(bus_address=address, bus_type=BusType.SESSION).connect()
            bus.export("/org/freedesktop/Notifications", _Notifications(self.got, self.cond))
            await bus.request_name("org.freedesktop.Notifications")
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(serve())
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(10), "the stand-in notification server did not start"

    def wait_for(self, n: int, timeout: float = 20.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.got) >= n, timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def __enter__(self) -> "NotificationServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
