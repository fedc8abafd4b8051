"""Every name a benchmark imports from placet exists (docs/design.md section 8: the
figures in docs/performance.md come from bench/, so a bench that no longer runs leaves
them unrepeatable). The layout moved modules once and a bench broke unseen; this reads
each script's imports (top level and inside functions) without running it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
BENCHES = sorted((REPO / "bench").glob("*.py"))


def _missing(path: Path) -> list[str]:
    """`module.name` strings the script imports from placet that do not resolve."""
    missing: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("placet"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                if hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    missing.append(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("placet"):
                    try:
                        importlib.import_module(alias.name)
                    except ImportError:
                        missing.append(alias.name)
    return missing


def test_there_are_benchmarks() -> None:
    assert len(BENCHES) >= 10


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.name)
def test_a_benchmark_imports_only_what_placet_has(path: Path) -> None:
    assert _missing(path) == []
