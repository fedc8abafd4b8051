"""Every `placet` subcommand, and every argument of each, says in one line what it does."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator

from placet.cli import build_parser
from placet.config.password import RCLONE_PASSWORD_ARGS

PLACET = [sys.executable, "-m", "placet"]
HIDDEN = {tuple(RCLONE_PASSWORD_ARGS)}
"""Internal hooks left out of the lists on purpose; their own --help still describes them."""


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse._SubParsersAction]:  # type: ignore[type-arg]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield action


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """(command path, its parser, the one-line help its parent lists for it)."""
    for sub in _subparsers(parser):
        helps = {a.dest: a.help for a in sub._choices_actions}
        for name, child in sub.choices.items():
            yield (*path, name), child, helps.get(name)
            yield from _walk(child, (*path, name))


def _flat(text: str) -> str:
    return " ".join(text.split())


def _missing() -> list[str]:
    problems: list[str] = []
    for path, parser, line in _walk(build_parser()):
        cmd = "placet " + " ".join(path)
        if path in HIDDEN:
            if not parser.description:
                problems.append(f"{cmd}: hidden, and its --help has no description")
        elif not line or not line.strip():
            problems.append(f"{cmd}: no one-line description in its parent's list")
        elif "\n" in line.strip():
            problems.append(f"{cmd}: description is not one line")
        elif not parser.description or _flat(parser.description) not in _flat(parser.format_help()):
            problems.append(f"{cmd}: its own --help shows no description")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS or not action.help.strip():
                flag = "/".join(action.option_strings) or action.dest
                problems.append(f"{cmd}: argument {flag} has no help")
    return problems


def test_every_subcommand_and_argument_has_a_description() -> None:
    commands = [p for p, _, _ in _walk(build_parser())]
    assert ("list",) in commands and ("drive", "set") in commands  # the walk reaches depth 2
    assert _missing() == []


def test_help_output_lists_each_subcommand_with_its_line() -> None:
    for args in (["--help"], ["drive", "--help"], ["show", "--help"]):
        r = subprocess.run(
            [*PLACET, *args], capture_output=True, text=True, timeout=60, env=dict(os.environ)
        )
        assert r.returncode == 0, r.stderr
        assert "usage: placet" in r.stdout
    top = subprocess.run([*PLACET, "--help"], capture_output=True, text=True, timeout=60).stdout
    for path, _, line in _walk(build_parser()):
        if len(path) == 1 and line:
            assert path[0] in top and line.split()[0] in top
