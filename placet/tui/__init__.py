"""The Textual review UI (`placet review`): queue, detail, decisions, history, audit.

Only `placet.cli.review` and the tests import this package; the core never does.
"""

from __future__ import annotations

from placet.tui.app import ReviewApp, make_app

__all__ = ["ReviewApp", "make_app"]
