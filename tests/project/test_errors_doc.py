"""docs/errors.md lists every error code placet raises or journals, with its class and
that class's exit code, and nothing else (placet.errors; docs/design.md section 5).

The codes are found in the source, not in a hand-kept list: the `code="..."` arguments
of every call (a conditional `code="a" if x else "b"` gives both), the `"code": "..."`
entries of dict literals (journal details, JSON-RPC error data), a helper's code
parameter passed on to an error class (`_refuse("undecided_conflict", ...)`), and the
default `code` of every class of the error tree.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

from placet.errors import PlacetError

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PACKAGE = REPO / "placet"
DOC = REPO / "docs" / "errors.md"
ROW = re.compile(r"^\| `([a-z_]+)` \| (?:`([A-Za-z]+)`|—) \| (\d|—) \|", re.M)
NO_CLASS = "—"

Pair = tuple[str, str | None]  # (code, class name; None when the source does not say)


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        yield name, ast.parse(path.read_text(), filename=str(path))


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _strings(node: ast.expr) -> list[str]:
    """The string constants `node` can evaluate to (a constant, or a conditional of them)."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and node.value else []
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    return []


def error_tree(modules: list[tuple[str, ast.Module]]) -> dict[str, type[PlacetError]]:
    """Every subclass of `PlacetError` defined in placet/, by class name."""
    where = {"PlacetError": "placet.errors"}
    grown = True
    while grown:
        grown = False
        for module, tree in modules:
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ClassDef)
                    and node.name not in where
                    and any(_name(b) in where for b in node.bases)
                ):
                    where[node.name] = module
                    grown = True
    classes = {n: getattr(importlib.import_module(m), n) for n, m in where.items()}
    assert all(issubclass(c, PlacetError) for c in classes.values())
    return classes


def _helpers(modules: list[tuple[str, ast.Module]], errors: set[str]) -> dict[str, tuple[int, str]]:
    """Module-level functions with a `code` parameter they pass on as an error class's
    `code=`: "module.function" -> (the parameter's position, the class)."""
    found: dict[str, tuple[int, str]] = {}
    for module, tree in modules:
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            if "code" not in params:
                continue
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and _name(call.func) in errors):
                    continue
                passed = [kw.value for kw in call.keywords if kw.arg == "code"]
                if any(isinstance(v, ast.Name) and v.id == "code" for v in passed):
                    found[f"{module}.{fn.name}"] = (params.index("code"), str(_name(call.func)))
    return found


def _visible(module: str, tree: ast.Module, helpers: dict[str, tuple[int, str]]) -> dict[str, str]:
    """The helpers `module` can call by a plain name: its own, and those it imports."""
    names = {h.rpartition(".")[2]: h for h in helpers if h.rpartition(".")[0] == module}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in helpers:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def codes_in_source(modules: list[tuple[str, ast.Module]], errors: set[str]) -> set[Pair]:
    """Every (code, class) the source raises or journals; class None when not known."""
    helpers = _helpers(modules, errors)
    found: set[Pair] = set()
    for module, tree in modules:
        visible = _visible(module, tree, helpers)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = _name(node.func)
                cls = func if func in errors else None
                if isinstance(node.func, ast.Name) and node.func.id in visible:
                    index, cls = helpers[visible[node.func.id]]
                    if index < len(node.args):
                        found |= {(c, cls) for c in _strings(node.args[index])}
                for kw in node.keywords:
                    if kw.arg == "code":
                        found |= {(c, cls) for c in _strings(kw.value)}
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        found |= {(c, None) for c in _strings(value)}
    return found


def documented() -> list[tuple[str, str | None, str]]:
    """The rows of docs/errors.md's code table: (code, class or None, exit code)."""
    return [(code, cls or None, exit_) for code, cls, exit_ in ROW.findall(DOC.read_text())]


def _row(code: str, cls: type[PlacetError] | None) -> str:
    if cls is None:
        return f"| `{code}` | {NO_CLASS} | {NO_CLASS} |"
    return f"| `{code}` | `{cls.__name__}` | {cls.exit_code} |"


def test_docs_errors_md_lists_every_code_with_its_class_and_exit_code() -> None:
    modules = list(_modules())
    tree = error_tree(modules)
    source = codes_in_source(modules, set(tree)) | {(c.code, n) for n, c in tree.items()}
    rows = documented()
    assert rows, f"no code table found in {DOC}"
    doc_pairs = {(code, cls) for code, cls, _ in rows}
    doc_codes = {code for code, _, _ in rows}

    missing = sorted(
        _row(code, tree[cls])
        for code, cls in source
        if cls is not None and (code, cls) not in doc_pairs
    )
    missing += sorted(
        _row(code, None) for code, cls in source if cls is None and code not in doc_codes
    )
    assert missing == [], "add these rows to docs/errors.md:\n" + "\n".join(missing)

    source_codes = {code for code, _ in source}
    stale, wrong_exit = [], []
    for code, cls, exit_ in rows:
        if cls is None:
            if code not in source_codes or exit_ != NO_CLASS:
                stale.append(_row(code, None))
            continue
        if cls not in tree or (code, cls) not in source:
            stale.append(f"| `{code}` | `{cls}` |")
        elif exit_ != str(tree[cls].exit_code):
            wrong_exit.append(f"{code} ({cls}): documented {exit_}, raised {tree[cls].exit_code}")
    assert stale == [], "docs/errors.md names codes placet no longer uses:\n" + "\n".join(stale)
    assert wrong_exit == [], "docs/errors.md gives the wrong exit code:\n" + "\n".join(wrong_exit)
    assert len(doc_pairs) == len(rows), "docs/errors.md lists a (code, class) row twice"


def test_the_scan_finds_codes_raised_every_way() -> None:
    """The scan itself: a keyword, a conditional, a helper's parameter, a dict entry and a
    class default are each found, so the doc check cannot pass by finding nothing."""
    modules = list(_modules())
    tree = error_tree(modules)
    source = codes_in_source(modules, set(tree))
    assert {
        ("path_reserved", "PathRefused"),  # PathRefused(..., code="path_reserved")
        ("store_busy", "StoreError"),  # code="store_busy" if is_busy(e) else None
        ("undecided_conflict", "UsageError"),  # _refuse("undecided_conflict", ...)
        ("skipped_by_owner", None),  # {"code": "skipped_by_owner", ...}
    } <= source
    assert tree["EmptySideRefused"].code == "empty_side"
    assert tree["DriveUnavailable"].exit_code == 5
