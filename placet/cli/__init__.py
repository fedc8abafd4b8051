"""The `placet` command: parses arguments and turns domain errors into exit codes.

Each command group lives in its own module under `placet/cli/` exposing
`register(subparsers) -> None`; every subcommand sets `func(args) -> int` with
`set_defaults`, and gives itself and each argument a one-line `help=` (a subcommand's
line is also the description of its own `--help`; `tests/cli/test_help.py` checks every
one). A `PlacetError` becomes one clear line on stderr and the exit code of its
class (`placet.errors`); nothing prints a traceback to a user.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from placet import __version__
from placet.config.password import RCLONE_PASSWORD_ARGS, print_for_rclone
from placet.errors import EXIT_STORE, EXIT_USAGE, PlacetError

# One line per command group; each module defines register(subparsers).
COMMAND_MODULES: tuple[str, ...] = (
    "placet.cli.proposals",
    "placet.cli.hostconfig",
    "placet.cli.serve",
    "placet.cli.review",
    "placet.cli.accept",
    "placet.cli.executor",
    "placet.cli.doctor",
    "placet.cli.drive",
    "placet.cli.notify",
    "placet.cli.rules",
    "placet.cli.web",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placet",
        description="An approval queue between coding agents and your cloud drive.",
    )
    parser.add_argument("--version", action="version", version=f"placet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand its one-line `help=` as the description of its own `--help`
    too (argparse shows `help=` only in the parent's list), recursively."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        lines = {a.dest: a.help for a in action._choices_actions}
        for name, child in action.choices.items():
            line = lines.get(name)
            if child.description is None and line:
                child.description = line[:1].upper() + line[1:] + "."
            _describe(child)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    if tuple(sys.argv[1:] if argv is None else argv) == RCLONE_PASSWORD_ARGS:
        return print_for_rclone()  # rclone's --password-command: skip loading every command
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args))
    except PlacetError as e:
        print(f"placet: {e.error_code}: {e.message}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("placet: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader closed stdout (`placet ... | head`): stop quietly like other unix
        # tools. Point stdout at devnull so the interpreter's final flush cannot fail.
        _silence_stdout()
        return 0
    except OSError as e:
        # sqlite3/OS failures that escaped a domain wrapper: still one line, no traceback.
        print(f"placet: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_STORE


def run() -> int:
    """The `placet` console script and `python -m placet`: `main()` (the exit code), then
    `gc.freeze()`, so the interpreter's shutdown no longer walks every object of the heap
    the process is about to hand back whole: 1 to 5 s per `placet serve` exit on a busy
    2-CPU machine, past the 2 s an MCP host waits before it kills the server. Atexit
    handlers and the final flush of stdout and stderr still run. Not in `main`, which
    tests call in-process."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(run())
