"""`roots_list`: the local roots the owner nominated, and the drive."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from placet.server.framework import READ_LOCAL, ToolOutput, define_tool
from placet.server.state import caller


class RootView(BaseModel):
    name: str = Field(description="Pass as `root` to tools that take a local path.")
    path: str = Field(description="Absolute path of the folder.")
    default: bool = Field(description="Used when a tool call names no root.")
    downloads: str = Field(description="new-only | allow-overwrite (the owner's policy).")
    usable: list[str] | None = Field(
        description="When your MCP client sent roots: the folders inside this root you may "
        "use (their intersection); empty means none. Null: the whole root."
    )


class RootsOut(ToolOutput):
    roots: list[RootView]
    drive: str = Field(description="The rclone path of the drive; remote paths are relative to it.")
    client_roots: list[str] | None = Field(
        description="The roots your MCP client declared (they only narrow), or null."
    )

    def summary(self) -> str:
        names = ", ".join(f"{r.name}={r.path}" for r in self.roots)
        return f"{len(self.roots)} local root(s): {names}; drive {self.drive}"


@define_tool(title="List local roots and the drive", annotations=READ_LOCAL)
async def roots_list(ctx: Context[Any, Any]) -> RootsOut:
    """The local folders placet may read from or download into, and the drive they pair with.

    Local paths in other tools are relative to a root (the first by default; name another
    with `root`), or absolute inside one. Remote paths are relative to the drive.
    """
    who = await caller(ctx)
    state = who.state
    views: list[RootView] = []
    for i, r in enumerate(state.roots):
        usable = None
        if who.allowed is not None:
            usable = [str(a) for a in who.allowed if a == r.path or r.path in a.parents]
        views.append(
            RootView(
                name=r.name,
                path=str(r.path),
                default=i == 0,
                downloads=state.settings.download_policy(r.path),
                usable=usable,
            )
        )
    return RootsOut(
        roots=views,
        drive=state.drive_spec,
        client_roots=[str(p) for p in who.client_roots] if who.client_roots is not None else None,
    )


TOOLS = (roots_list,)
