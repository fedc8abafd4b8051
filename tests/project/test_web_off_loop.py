"""`placet web` leaves the event loop one way (the rule in `placet.web`'s docstring): every
route's endpoint is a plain `async def` (Starlette would run a plain `def` in its thread
pool behind the rule's back), and only `placet.web.state` hands work to a thread pool
(`WebState.off_loop`). Read by AST, so an import or call in any form is found."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from starlette.routing import Route

from placet.web.app import ROUTES

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
THREAD_POOLS = {"run_in_threadpool", "to_thread", "run_in_executor", "run_sync"}
"""Names that hand a function to a thread: Starlette's, anyio's and asyncio's."""


def thread_hand_offs(source: str) -> list[str]:
    """Where `source` names a thread pool's entry (`THREAD_POOLS`), as ``line: name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in THREAD_POOLS:
            found.append(f"{node.lineno}: {node.attr}")
        elif isinstance(node, ast.Name) and node.id in THREAD_POOLS:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name.rsplit(".", 1)[-1] in THREAD_POOLS:
            found.append(f"{getattr(node, 'lineno', 0)}: {node.name}")
    return found


def test_every_route_is_a_plain_async_handler() -> None:
    assert ROUTES
    sync = [
        r.path
        for r in ROUTES
        if not (isinstance(r, Route) and inspect.iscoroutinefunction(r.endpoint))
    ]
    assert sync == [], "a handler is `async def`; its store work goes through off_loop"


def test_only_the_web_state_hands_work_to_a_thread_pool() -> None:
    offenders = {}
    for path in sorted((REPO / "placet" / "web").rglob("*.py")):
        if path.name == "state.py":
            continue
        hits = thread_hand_offs(path.read_text())
        if hits:
            offenders[path.name] = hits
    assert offenders == {}, "run store work through WebState.off_loop (placet.web.state)"
    assert thread_hand_offs((REPO / "placet" / "web" / "state.py").read_text())


def test_the_check_finds_each_form_of_hand_off() -> None:
    source = (
        "from starlette.concurrency import run_in_threadpool\n"
        "import anyio\n"
        "async def f(loop):\n"
        "    await anyio.to_thread.run_sync(g)\n"
        "    await asyncio.to_thread(g)\n"
        "    await loop.run_in_executor(None, g)\n"
    )
    assert sorted(hit.split(": ")[1] for hit in thread_hand_offs(source)) == [
        "run_in_executor", "run_in_threadpool", "run_sync", "to_thread", "to_thread",
    ]  # fmt: skip
