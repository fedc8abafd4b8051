"""`placet review`: the owner's terminal UI over the approval queue.

The UI (placet/tui) is imported only when the command runs, so `placet list` and the
MCP server never pay for, or depend on, Textual. Review needs a terminal on both ends:
accepting from a pipe would defeat the point of showing the owner the exact effect
first, so without one it refuses and names the headless commands instead. While it
runs, this host's executor loop runs too (`placet.executor.service.HostLoop`): what the
owner approved for this host elsewhere runs here; the UI runs what it accepts itself.
"""

from __future__ import annotations

import argparse
import sys

from placet.config import load_settings
from placet.errors import EXIT_OK, UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `review` to the `placet` parser."""
    p = subparsers.add_parser(
        "review",
        help="review pending proposals in a terminal UI (accept, discard, history, audit)",
        description=(
            "Open the review UI: pending proposals with their exact effect, placet's risk "
            "flags and the agent's reason; accept (a), discard (d), extend (e), help (?)."
        ),
    )
    p.set_defaults(func=cmd_review)


def cmd_review(args: argparse.Namespace) -> int:
    """Run the review app until the owner quits.

    Raises:
        UsageError: stdin or stdout is not a terminal.
        ConfigError, StoreError: from opening the store (see `placet.store.open_store`).
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "placet review needs a terminal on stdin and stdout; from a script use "
            "`placet list`, `placet show ID`, `placet accept ID` or `placet discard ID`"
        )
    from placet.executor.service import HostLoop
    from placet.notify.sender import start_sender
    from placet.store import open_store
    from placet.tui import make_app

    settings = load_settings()
    store = open_store(settings)
    notifier = start_sender(settings)  # the review UI also sends what the outbox holds
    loop = HostLoop(store, settings).start()  # runs what was approved elsewhere
    try:
        make_app(settings, store).run()
    finally:
        loop.stop()
        if notifier is not None:
            notifier.close()
        store.close()
    return EXIT_OK
