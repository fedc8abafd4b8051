"""Parameter and reply-field types that several tools share, each worded once.

A parameter or reply field that means the same thing in two tools is declared here, so
their schemas describe it with the same words and a change to the wording reaches every
tool.
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
NextCursor = Annotated[
    str | None, Field(description="Pass as `cursor` for the next page; null: done.")
]
"""A paged reply's cursor for its next call (`Cursor`), null on the last page."""
