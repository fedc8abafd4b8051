"""Each test fixture is defined once: a fixture shared by several files lives in the
`conftest.py` of their common folder, so no file shadows another's."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def test_no_fixture_name_is_defined_in_two_files() -> None:
    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                _is_fixture(d) for d in node.decorator_list
            ):
                where[node.name].append(str(path.relative_to(TESTS)))
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert twice == {}
