"""placet's MCP surface: `placet serve`, a stdio server on the official `mcp` SDK.

Thin over the core: each tool is a typed function in `placet.server.tools.<group>` that
makes one call into `placet.proposals.making`, the store or the drive. `framework` is the one
wrapper every tool goes through (strict arguments, domain errors, summaries), `state` the
per-process state and the caller's scope, `app` the assembly, the sweeper and the stdio
loop. Nothing here acts on the drive or a local root: writes are proposals.
"""

from __future__ import annotations

__all__ = ["build_server", "run_stdio"]


def __getattr__(name: str) -> object:
    # Lazy: importing placet.server must not pull in the SDK for `placet --help`.
    if name in __all__:
        from placet.server import app

        return getattr(app, name)
    raise AttributeError(name)
