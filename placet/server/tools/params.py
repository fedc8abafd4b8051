"""Parameter types that several tools share, each worded once.

A parameter that means the same thing in two tools is declared here, so their schemas
describe it with the same words and a change to the wording reaches every tool.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

RootName = Annotated[
    str | None,
    Field(description="Name of the local root (see roots_list); default: the first root."),
]
Cursor = Annotated[
    str | None, Field(description="The next_cursor of a previous call; omit to start.")
]
