"""Helpers the tests import (`from tests.support.rig import make_rig`); fixtures live in the
conftest.py of the folder whose tests share them (tests/conftest.py for every folder)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository's root: on a child process's `sys.path` it makes `tests.support` importable."""
