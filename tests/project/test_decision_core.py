"""The shells decide through one core: no module of `placet/tui`, `placet/cli`,
`placet/web` or `placet/server` touches the store's accept, discard or extend
transitions itself (`placet.decisions` does), and the three deciding shells import
`placet.decisions`. Read by AST, so a call in any form (`store.accept(...)`,
`self.store.discard(...)`, `accept = store.accept`) is found."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
SHELLS = ("tui", "cli", "web", "server")
TRANSITIONS = {"accept", "accept_set", "discard", "discard_set", "extend", "extend_set"}


def _receiver(node: ast.expr) -> str:
    """The last name of an attribute's receiver: `self.store` -> "store"."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _receiver(node.func)
    return ""


def store_transitions(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` names a store's accept/discard/extend (a receiver called like a
    store: `store`, `self.store`, `Store`, `other_store`...), as ``line: text``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in TRANSITIONS
            and "store" in _receiver(node.value).lower()
        ):
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {text}" for line, text in sorted(found)]


def test_no_shell_calls_the_store_transitions() -> None:
    offenders = {}
    for shell in SHELLS:
        for path in sorted((REPO / "placet" / shell).rglob("*.py")):
            hits = store_transitions(path.read_text(), str(path))
            if hits:
                offenders[str(path.relative_to(REPO))] = hits
    assert offenders == {}, "decide through placet.decisions, not the store"


def test_the_check_finds_a_direct_call() -> None:
    source = (
        "def f(self, store):\n"
        "    self.store.accept(1, detail={})\n"
        "    go = store.discard\n"
        "    self.fresh.discard(1)\n"  # a set's discard: not the store's
        "    rows.extend([])\n"
    )
    assert store_transitions(source) == ["2: self.store.accept", "3: store.discard"]


def test_the_deciding_shells_import_the_decision_core() -> None:
    for module in ("placet/tui/deciding.py", "placet/cli/accept.py", "placet/web/app.py"):
        tree = ast.parse((REPO / module).read_text())
        imported = {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
        } | {
            f"{n.module}.{a.name}"
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module
            for a in n.names
        }
        assert "placet.decisions" in imported, module
