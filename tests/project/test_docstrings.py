"""Code speaks in the present (docs/decisions/0002-docs-checked.md): a module docstring says
what the module is for and where its rule comes from in at most 15 lines, and no issue or
round number appears in the code or the tests, since no issue tracker ships with them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 15
HISTORY = re.compile(r"\b(?:issue|round)\s+[0-9]+", re.IGNORECASE)


def test_every_module_docstring_is_at_most_15_lines() -> None:
    long = []
    for path in sorted((REPO / "placet").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        if doc is not None and len(doc.splitlines()) > MAX_LINES:
            long.append(f"{path.relative_to(REPO)}: {len(doc.splitlines())} lines")
    assert long == [], f"a module docstring is at most {MAX_LINES} lines; move essays to docs/"


def test_no_issue_or_round_number_in_the_code_or_the_tests() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for folder in ("placet", "tests")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != Path(__file__).resolve()
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if HISTORY.search(line)
    ]
    assert found == [], f"say the reason itself, not the issue or round: {found}"
