"""A tool's description is its docstring without the docstring's indentation, then the
tail its declaration adds (placet.server.framework.define_tool): the same text whether
the interpreter keeps a docstring's indentation (Python 3.11, 3.12) or strips it when
compiling (3.13 and later), so `tools/list` is the same bytes on every Python placet
supports.
"""

from __future__ import annotations

import inspect

from mcp.server.mcpserver import Context

from placet.server.framework import (
    READ_LOCAL,
    WAITS_FOR_OWNER,
    ToolDef,
    ToolOutput,
    build_tools,
    define_tool,
)

INDENTED = """Do one thing.

    Say how, over
      an indented line.
    """
"""A docstring as Python 3.11 and 3.12 keep it (the function's body indentation)."""
DEDENTED = inspect.cleandoc(INDENTED) + "\n"
"""The same docstring as Python 3.13 compiles it: each line's common indentation gone."""


def _declared(doc: str, tail: str) -> ToolDef:
    async def example(ctx: Context) -> ToolOutput:  # type: ignore[type-arg]
        return ToolOutput()

    example.__doc__ = doc
    return define_tool(title="Example", annotations=READ_LOCAL, doc_tail=tail)(example)


def _description(doc: str, tail: str) -> str | None:
    (tool,) = build_tools([_declared(doc, tail)])
    return tool.description


def test_a_description_does_not_depend_on_how_python_indents_a_docstring() -> None:
    for tail in ("", WAITS_FOR_OWNER):
        assert _description(INDENTED, tail) == _description(DEDENTED, tail), tail


def test_a_description_is_the_docstring_then_the_tail_without_indentation() -> None:
    assert _description(INDENTED, "") == "Do one thing.\n\nSay how, over\n  an indented line."
    assert _description(INDENTED, WAITS_FOR_OWNER) == (
        inspect.cleandoc(INDENTED) + "\n" + inspect.cleandoc(WAITS_FOR_OWNER)
    )
