"""`placet serve`: the MCP server an agent host launches over stdio.

    placet serve --root [NAME=]DIR [--root ...] [--drive SPEC] [--label NAME]

Everything that can be refused is refused before the first MCP byte (no `--root`, a root
that is `/`, the home or overlaps placet's folders, an invalid label, an unusable config
or database), with one line on stderr a host shows in its MCP log. While it serves it
runs this host's executor loop (docs/decisions/0021-hosts.md), silently. stdout carries
only MCP frames; logs go to stderr. The run id is random per process: it ties this
session's proposals together for attribution and `proposal_withdraw`, and grants nothing."""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import unicodedata

from placet.config import load_settings
from placet.errors import EXIT_OK, UsageError
from placet.paths.roots import parse_roots

LABEL_MAX = 64


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `serve` to the `placet` parser."""
    p = subparsers.add_parser(
        "serve",
        help="run the MCP server over stdio (an agent host starts this)",
        description="Serve placet's MCP tools over stdio. Writes are inert proposals; "
        "the owner decides in `placet review`.",
    )
    p.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="[NAME=]DIR",
        help="a local folder agents may upload from / download into (repeatable; "
        "at least one; not / or your home directory)",
    )
    p.add_argument(
        "--drive",
        metavar="SPEC",
        help="rclone path of the drive (overrides config.toml and PLACET_DRIVE)",
    )
    p.add_argument(
        "--label",
        metavar="NAME",
        help="a short name shown to the owner beside this server's proposals",
    )
    p.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="stderr log level (default WARNING)",
    )
    p.set_defaults(func=cmd_serve)


def check_label(label: str | None) -> str | None:
    """A label is one line of at most 64 printable characters.

    Raises:
        UsageError: empty, too long, or holding a control/format/separator character.
    """
    if label is None:
        return None
    text = label.strip()
    bad = any(unicodedata.category(c)[0] in "CZ" and c != " " for c in text)
    if not text or len(text) > LABEL_MAX or bad:
        raise UsageError(
            f"refusing --label: give one line of at most {LABEL_MAX} printable characters",
            details={"field": "label"},
        )
    return text


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="placet serve: %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    logging.getLogger("placet").setLevel(level)
    if level == "DEBUG":
        logging.getLogger("mcp").setLevel(logging.DEBUG)


def cmd_serve(args: argparse.Namespace) -> int:
    """Validate everything, open the store and the drive, then serve until stdin closes."""
    _configure_logging(args.log_level)
    settings = load_settings()
    if args.drive:
        settings = settings.model_copy(update={"drive": args.drive})
    label = check_label(args.label)
    roots = parse_roots(args.root, settings)

    # Imported here: `placet --help` and the other commands need neither mcp nor rclone.
    from placet.drive import drive_for
    from placet.server.app import run_stdio
    from placet.server.state import ServerState
    from placet.store import open_store

    store = open_store(settings)
    try:
        drive = drive_for(settings)
    except BaseException:
        store.close()
        raise
    state = ServerState(
        settings=settings,
        store=store,
        drive=drive,
        roots=tuple(roots),
        run_id=secrets.token_hex(8),
        drive_spec=drive.spec,
        label=label,
    )
    logging.getLogger("placet.server").info(
        "serving roots %s, drive %s, run %s",
        [f"{r.name}={r.path}" for r in roots],
        drive.spec,
        state.run_id,
    )
    from placet.executor.service import HostLoop
    from placet.notify.sender import start_sender

    notifier = start_sender(settings)  # tells the owner proposals wait (placet.notify)
    loop = HostLoop(store, settings).start()  # this host's approved proposals (quiet)
    try:
        run_stdio(state)
    finally:
        loop.stop()
        if notifier is not None:
            notifier.close()
    return EXIT_OK
