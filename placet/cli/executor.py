"""`placet executor [--once]`: run this host's approved proposals until Ctrl-C.

For a host where nothing else of placet runs (a CI runner, a container, a dev box the
agent works on): the owner accepts from another host sharing the database, and this
host's executor runs it, since its files are here (`placet.executor.service`). One line
per proposal started and ended on stdout. `--once` runs what is approved now and exits.
Ctrl-C (or SIGTERM) stops cleanly: a running proposal is cancelled and marked
`interrupted` (accept it again to resume); a second Ctrl-C quits at once. A lost
connection to the database server (a PostgreSQL restart) is said on stderr, and the
executor reconnects with backoff and rescans what is approved
(`placet.store.reconnect`). Exit 0, or the store's exit code when the database cannot be
read.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from types import FrameType
from typing import Any

from placet.config import load_settings
from placet.errors import EXIT_OK
from placet.executor.service import Ran, run_host_executor
from placet.store import open_store
from placet.store.host import host_label
from placet.store.reconnect import say_on_stderr


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `executor` to the `placet` parser."""
    p = subparsers.add_parser(
        "executor",
        help="run this host's approved proposals until stopped (Ctrl-C)",
        description="Run the approved proposals made on this host, as the owner accepts "
        "them from any host sharing the database; stop with Ctrl-C.",
    )
    p.add_argument("--once", action="store_true", help="run what is approved now, then exit")
    p.set_defaults(func=cmd_executor)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _done(ran: Ran) -> None:
    if ran.final is not None:
        _say(f"proposal {ran.proposal_id} {ran.final.status}")
    elif ran.error is not None:
        _say(f"proposal {ran.proposal_id} refused: {ran.error}")


def cmd_executor(args: argparse.Namespace) -> int:
    settings = load_settings()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        sys.stderr.write("\nstopping after cleaning up (Ctrl-C again to quit at once)\n")

    previous: dict[int, Any] = {
        s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        with open_store(settings) as store:
            _say(
                f"executor of host {host_label(socket.gethostname(), store.host_id)} "
                "running; Ctrl-C stops"
            )
            run_host_executor(
                store,
                settings,
                stop=stop,
                once=args.once,
                on_start=lambda pid: _say(f"proposal {pid} running"),
                on_done=_done,
                say=say_on_stderr,
            )
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    _say("executor stopped")
    return EXIT_OK
