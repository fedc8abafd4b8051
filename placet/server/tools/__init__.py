"""The tool modules of `placet serve`, one per tool group.

Each module defines its tools with `placet.server.framework.define_tool` and lists them
in a module-level `TOOLS` tuple. Adding a tool group is one new module here plus one
line in `TOOL_MODULES`; the server registers whatever the modules list, in order.
"""

from __future__ import annotations

import importlib

from placet.server.framework import ToolDef

TOOL_MODULES: tuple[str, ...] = (
    "placet.server.tools.roots",
    "placet.server.tools.drive",
    "placet.server.tools.propose",
    "placet.server.tools.proposals",
    "placet.server.tools.proposal_ops",
    "placet.server.tools.sync",
)


def all_tools() -> list[ToolDef]:
    """Every `ToolDef` of every module in `TOOL_MODULES`, in order."""
    defs: list[ToolDef] = []
    for name in TOOL_MODULES:
        defs.extend(importlib.import_module(name).TOOLS)
    return defs
