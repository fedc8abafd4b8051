"""One thread per channel, so that a channel that hangs delays no other.

A running sender (`placet.notify.sender.Sender.start`) groups events in its own thread
and sends nothing there: each channel it can send through has a `ChannelWorker`, woken
when deliveries of that channel are due, which claims and sends them (`send_channel`),
each send bounded by the channel's own timeout (`placet.notify.channels.post`). A webhook
that holds its connection for the whole timeout holds the webhook's thread only: ntfy
and the desktop go on. A wake that comes while the worker sends is kept, so the worker
looks again as soon as it is free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from placet.errors import PlacetError

log = logging.getLogger("placet.notify")

IDLE_S = 1.0
"""Longest sleep between checks of the stop flag when nothing wakes the worker."""


class ChannelWorker:
    """Sends the due deliveries of one channel (`send_channel(name)`) when woken,
    until `stop` is set."""

    def __init__(
        self, name: str, send_channel: Callable[[str], int], stop: threading.Event
    ) -> None:
        self.name = name
        self._send_channel = send_channel
        self._stop = stop
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"placet-notify-{name}", daemon=True)

    def start(self) -> ChannelWorker:
        self._thread.start()
        return self

    def wake(self) -> None:
        """Look for due deliveries now (or as soon as the send in progress ends)."""
        self._wake.set()

    def join(self, timeout: float) -> None:
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._wake.wait(IDLE_S):
                continue
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._send_channel(self.name)
            except PlacetError as e:
                log.warning("notify %s: %s: %s (will retry)", self.name, e.error_code, e.message)
            except Exception:
                log.exception("notify %s failed (will retry)", self.name)
