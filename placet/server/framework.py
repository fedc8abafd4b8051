"""How a placet tool is declared, registered and answered: one wrapper for every tool.

mcp 2.3's `MCPServer` derives a tool's schemas from its typed parameters and return
model; this module overrides three of its defaults in one place (docs/design.md section
9, "Tool arguments and errors"; docs/decisions/0012-mcp-tools.md): argument models are
rebuilt with `extra="forbid"` and `strict=True` and the JSON-in-a-string rescue is off
(`_ExactArguments`); an argument error is a tool error, `invalid_argument`, listing at
most `MAX_LISTED_FIELDS` fields by name, never their values; a `PlacetError` becomes
`error_result` (a text line and its JSON, at most `MAX_ERROR_BYTES`, no structured
content), anything else a logged `internal_error`. A success is a one-line summary beside
the structured result. No reply exceeds `reply_budget` bytes: one that would is a bug,
answered `reply_too_large` and logged (docs/decisions/0015-reply-budget.md). Load is
bounded by `placet.server.flow`."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError

from placet.errors import PlacetError, UsageError
from placet.server.budget import json_bytes
from placet.server.flow import ToolSlots
from placet.server.schemas import published_input, published_output
from placet.text import inert

log = logging.getLogger("placet.server")

# The tool catalogue's hint sets (docs/design.md section 5; docs/decisions/0012-mcp-tools.md).
READ_LOCAL = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Reads placet's own state (roots, the proposal queue)."""
READ_DRIVE = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
"""Reads the remote drive: an external system whose content placet does not control."""
PROPOSE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Writes one inert row to placet's queue; touches neither the drive nor local files."""
WITHDRAW = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Moves the caller's own pending proposal to `withdrawn`; destroys no data."""


class ToolOutput(BaseModel):
    """Base of every tool's result model: the structured content plus a one-line summary."""

    def summary(self) -> str:
        """One line for the text content; override per tool."""
        return type(self).__name__


MAX_ID = 2**63 - 1
"""The largest id SQLite can hold (a signed 64-bit INTEGER): every id argument is declared
`ge=1, le=MAX_ID`, so a larger one is a schema violation, not an OverflowError."""

ToolFn = Callable[..., Awaitable[ToolOutput]]


@dataclass(frozen=True)
class ToolDef:
    """A tool as a module declares it; `build_tools` turns it into the SDK's `Tool`."""

    fn: ToolFn
    title: str
    annotations: ToolAnnotations

    @property
    def name(self) -> str:
        return self.fn.__name__


WAITS_FOR_OWNER = """\
It waits for the owner until its TTL ends (ttl_minutes, default 30 minutes), then
expires. For the outcome call proposal_wait(id): each call waits up to 50 s; while
it answers timed_out, call it again after poll_after_s seconds and relay its
one-line `status` to the user.
If the call is cancelled after the proposal was stored, it is in proposal_list."""
"""The end of every proposing tool's description (`define_tool(doc_tail=...)`): how the
agent learns the outcome."""


def define_tool(
    *, title: str, annotations: ToolAnnotations, doc_tail: str = ""
) -> Callable[[ToolFn], ToolDef]:
    """Decorator for a tool function: `async def name(ctx: Context, <flat params>) -> Out`.

    The function's name is the tool name, its docstring the description (followed by
    `doc_tail` on a next line; both sent without their indentation, which Python 3.13
    strips from a docstring and 3.11 keeps), its parameters
    (`Annotated[T, Field(description=...)]`) the input schema and its return model (a
    `ToolOutput`) the output schema.
    """

    def wrap(fn: ToolFn) -> ToolDef:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn.__name__} must be async (blocking work goes to a thread)")
        if doc_tail:
            fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n" + inspect.cleandoc(doc_tail)
        return ToolDef(fn=fn, title=title, annotations=annotations)

    return wrap


class _ExactArguments(FuncMetadata):
    """Arguments as sent: no JSON-in-a-string rescue.

    The SDK's `pre_parse_json` turns a string argument into the JSON it spells when the
    parameter is not plain `str`, so `name="null"` on a `str | None` parameter became
    `None` and `name="[1]"` a list. A file may well be called `null`; placet takes
    strings as strings.
    """

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return data


def _strict_tool(td: ToolDef) -> Tool:
    tool = Tool.from_function(
        td.fn,
        name=td.name,
        title=td.title,
        description=inspect.cleandoc(td.fn.__doc__ or ""),
        annotations=td.annotations,
        structured_output=True,
    )
    meta = tool.fn_metadata
    loose = meta.arg_model
    # strict: the schema says integer, so "5" is refused rather than coerced;
    # extra="forbid": an unknown argument is refused, never ignored.
    strict: type[BaseModel] = type(
        loose.__name__,
        (loose,),
        {
            "model_config": ConfigDict(**{**loose.model_config, "extra": "forbid", "strict": True}),
            "__module__": loose.__module__,
        },
    )
    if meta.output_schema is None:  # pragma: no cover - a declaration bug, caught at start
        raise TypeError(f"tool {td.name} must return a ToolOutput model")
    tool.fn_metadata = _ExactArguments(
        arg_model=strict,
        output_schema=published_output(meta.output_schema),
        output_model=meta.output_model,
        wrap_output=meta.wrap_output,
    )
    tool.parameters = published_input(strict.model_json_schema(by_alias=True))
    return tool


def build_tools(defs: Iterable[ToolDef]) -> list[Tool]:
    """The SDK `Tool`s for `defs`, each with a strict (`additionalProperties: false`) schema.

    Raises:
        ValueError: two definitions share a name.
    """
    tools: list[Tool] = []
    seen: set[str] = set()
    for td in defs:
        if td.name in seen:
            raise ValueError(f"duplicate tool name {td.name!r}")
        seen.add(td.name)
        tools.append(_strict_tool(td))
    return tools


MAX_LISTED_FIELDS = 10
"""Most offending fields an `invalid_argument` error lists (the rest are counted)."""
MAX_FIELD_CHARS = 80
"""Characters of one field name in an error at most (an unknown name is the caller's)."""
MAX_ERROR_BYTES = 8192
"""Most bytes of an error result's JSON; above it the details are left out."""


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    # Field names and pydantic's message only: the rejected values are the caller's data
    # and may be long or hostile; the names too are cut and made inert.
    out: list[dict[str, str]] = []
    for err in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        if len(field) > MAX_FIELD_CHARS:
            field = field[: MAX_FIELD_CHARS - 1] + "…"
        msg = "unknown argument" if err["type"] == "extra_forbidden" else err["msg"]
        out.append({"field": inert(field), "problem": msg})
    return out


def argument_error(tool: Tool, exc: ValidationError) -> UsageError:
    """The `invalid_argument` error for arguments that violate `tool`'s input schema:
    at most `MAX_LISTED_FIELDS` fields listed, `details.field` the first of them."""
    fields = _field_errors(exc)
    accepted = sorted(tool.parameters.get("properties", {}))
    shown = fields[:MAX_LISTED_FIELDS]
    listed = "; ".join(f"{f['field']}: {f['problem']}" for f in shown)
    more = f" (and {len(fields) - len(shown)} more)" if len(fields) > len(shown) else ""
    return UsageError(
        f"invalid arguments for {tool.name}: {listed}{more}. "
        f"Accepted arguments: {', '.join(accepted) or '(none)'}",
        details={
            "tool": tool.name,
            "field": shown[0]["field"] if shown else None,
            "errors": shown,
            "error_count": len(fields),
        },
    )


def error_result(err: PlacetError) -> CallToolResult:
    """A domain error as a tool error: one text line, then the JSON `{code, message,
    retryable, details}` (at most `MAX_ERROR_BYTES`; details dropped above)."""
    line = f"{err.error_code}: {err.message}".replace("\n", " ")
    payload = err.to_dict()
    body = json.dumps(payload, ensure_ascii=False)
    if len(body.encode("utf-8", "surrogatepass")) > MAX_ERROR_BYTES:
        payload["details"] = {"left_out": "the details were too long for one reply"}
        body = json.dumps(payload, ensure_ascii=False)
    if len(line) > SUMMARY_MAX:
        line = line[: SUMMARY_MAX - 1] + "…"
    return CallToolResult(
        is_error=True,
        content=[TextContent(type="text", text=line), TextContent(type="text", text=body)],
    )


SUMMARY_MAX = 2000
"""Characters of a reply's text summary at most (a summary naming a long path is cut)."""

DEFAULT_REPLY_BUDGET = 40_000


def success_result(out: ToolOutput, budget: int = DEFAULT_REPLY_BUDGET) -> CallToolResult:
    """The result of a successful call: the summary as text, `out` as structured content.

    Returns the error `reply_too_large` instead when the structured content exceeds
    `budget` bytes (module docstring).
    """
    data = out.model_dump(mode="json", by_alias=True)
    size = json_bytes(data)
    if size > budget:
        log.error("%s reply of %d bytes is over the %d-byte budget", type(out).__name__, size,
                  budget)  # fmt: skip
        return error_result(
            PlacetError(
                f"placet's reply would be {size} bytes, over the {budget}-byte reply budget "
                "(a placet bug: pages should fit); the details are in the server's log",
                code="reply_too_large",
                details={"bytes": size, "budget": budget},
            )
        )
    text = out.summary().replace("\n", " ")
    if len(text) > SUMMARY_MAX:
        text = text[: SUMMARY_MAX - 1] + "…"
    return CallToolResult(structured_content=data, content=[TextContent(type="text", text=text)])


class PlacetMCP(MCPServer[Any]):
    """`MCPServer` whose `call_tool` is the one wrapper around every placet tool."""

    def __init__(
        self,
        *args: Any,
        tools: Sequence[Tool],
        reply_budget: int = DEFAULT_REPLY_BUDGET,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, tools=list(tools), **kwargs)
        self._placet_tools: dict[str, Tool] = {t.name: t for t in tools}
        self._slots = ToolSlots()
        self.reply_budget = reply_budget

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        tool = self._placet_tools.get(name)
        if tool is None:
            shown = inert(name if len(name) <= MAX_FIELD_CHARS else name[:MAX_FIELD_CHARS] + "…")
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool '{shown}'; placet's tools are: "
                + ", ".join(sorted(self._placet_tools)),
                data={"code": "invalid_argument", "tool": shown},
            )
        if context is None:
            context = Context(mcp_server=self)
        if self._slots.full():
            log.warning("tool %s refused: server busy", name)
            return error_result(self._slots.busy(name))
        async with self._slots:
            return await self._run(tool, name, arguments, context)

    async def _run(
        self, tool: Tool, name: str, arguments: dict[str, Any], context: Context[Any, Any]
    ) -> CallToolResult:
        try:
            out = await tool.run(arguments, context, convert_result=False)
        except UnexpectedToolError as e:
            cause = e.__cause__
            if isinstance(cause, PlacetError):
                log.info("tool %s refused: %s %r", name, cause.error_code, cause.message)
                return error_result(cause)
            log.error("tool %s crashed", name, exc_info=cause or e)
            return error_result(
                PlacetError(
                    f"placet hit an internal error running {name}; the details are in the "
                    "server's log (stderr). Report it; retrying the same call will likely fail "
                    "again",
                    code="internal_error",
                )
            )
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                err = argument_error(tool, e.__cause__)
                log.info("tool %s refused: invalid_argument %r", name, err.message[:200])
                return error_result(err)
            raise  # pragma: no cover - placet tools raise PlacetError, not ToolError
        if not isinstance(out, ToolOutput):  # pragma: no cover - a declaration bug
            raise TypeError(f"tool {name} returned {type(out).__name__}, not a ToolOutput")
        return success_result(out, self.reply_budget)
