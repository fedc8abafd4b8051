"""placet: an approval queue between coding agents and the owner's cloud drive.

Agents propose (over MCP, `placet serve`); the owner accepts or discards (`placet review`,
`placet accept`). The core (store, drive, sync, paths, executor) never imports `mcp` or
`textual`; `server/` and `tui/` are thin shells over it.
"""

__version__ = "0.1.0"
