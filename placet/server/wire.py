"""What `placet serve` does with a stdin line the SDK cannot turn into a request.

The SDK drops a line its parser refuses with a debug log, so the client waits forever.
Each such line gets a JSON-RPC answer here (JSON-RPC 2.0 section 5;
docs/decisions/0016-stdio-limits.md): a lone UTF-16 surrogate in a request's `params` is
`-32602` `invalid_argument` naming the field (elsewhere it becomes U+FFFD); an id that is
not a string or an integer gets `-32600` with id null; not JSON is `-32700`, JSON that is
no JSON-RPC message `-32600`. Oversized lines (dropped by `placet.server.stdio`) and lines
nested deeper than `MAX_NESTING_DEPTH` (`too_deep`, counted before any parser recurses)
are `-32600` `limit_exceeded`. A `tools/call` the SDK reads but whose `name` is no string
or whose `arguments` is no object is `-32602` `invalid_argument` (`call_shape_refusal`).
Other lines the SDK reads fine cost nothing extra."""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any

import mcp_types
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
)

from placet.server.streams import WrappedReadStream
from placet.text import inert

log = logging.getLogger("placet.server")

_SURROGATE = re.compile("[\ud800-\udfff]")
SURROGATE_PROBLEM = (
    "holds an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not valid Unicode; "
    "send the text as UTF-8 or as a proper surrogate pair"
)


@dataclass(frozen=True)
class Refused:
    """A line `StdinLines` refused without parsing; `request_id` as recovered, or None."""

    request_id: int | str | None
    error: ErrorData


MAX_NESTING_DEPTH = 128
"""The deepest nesting of arrays and objects a stdin line may hold (module docstring)."""

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = [0] * 256
for _b, _s in zip(b"[{]}", (1, 1, -1, -1), strict=True):
    _STEP[_b] = _s


def too_deep(line: bytes, limit: int = MAX_NESTING_DEPTH) -> bool:
    """Whether `line` (one JSON text) opens more than `limit` arrays or objects at once.

    Brackets inside strings do not count: escaped backslashes and quotes are dropped
    first (left to right, as a JSON parser pairs them), then everything but quotes and
    brackets, then every other run between quotes. Costs two `bytes.count` calls for a
    line with at most `limit` brackets in all, else a few linear passes at C speed (and
    one in Python over the brackets outside strings, only when they exceed `limit`);
    never recurses.
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    bare = line.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    outside = b"".join(bare.split(b'"')[0::2])
    if outside.count(b"[") + outside.count(b"{") <= limit:
        return False
    return max(accumulate(map(_STEP.__getitem__, outside))) > limit


def too_deep_error(request_id: int | str | None) -> Refused:
    """The refusal of a line nested deeper than `MAX_NESTING_DEPTH`."""
    return _error(
        request_id,
        INVALID_REQUEST,
        f"Invalid Request: the message nests arrays or objects more than "
        f"{MAX_NESTING_DEPTH} levels deep and was discarded unread; send a flatter request",
        {"code": "limit_exceeded", "limit_depth": MAX_NESTING_DEPTH},
    )


class LineLog:
    """The lines `StdinLines` handed the SDK's reader, in order, until screened.

    The SDK's reader turns every line into exactly one item (a message or an exception),
    so the n-th item the screen receives came from the n-th entry here.
    """

    def __init__(self) -> None:
        self.entries: deque[str | Refused] = deque()


def _bad_const(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(line: str) -> Any:
    return json.loads(line, parse_constant=_bad_const)


def valid_id(value: object) -> bool:
    """A JSON-RPC id MCP accepts: an integer (not a boolean) or a string of valid Unicode."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and not _SURROGATE.search(value)


def recover_id(prefix: bytes) -> int | str | None:
    """The top-level `id` of the JSON object that `prefix` begins, if it shows before any
    value the prefix cuts off; else None (never a nested `id`)."""
    text = prefix.decode("utf-8", errors="replace")
    dec = json.JSONDecoder(parse_constant=_bad_const)
    ws = re.compile(r"\s*")

    def skip(i: int) -> int:
        m = ws.match(text, i)
        return m.end() if m else i

    i = skip(0)
    if not text.startswith("{", i):
        return None
    i = skip(i + 1)
    try:
        while i < len(text) and text[i] == '"':
            key, i = dec.raw_decode(text, i)
            i = skip(i)
            if not text.startswith(":", i):
                return None
            value, i = dec.raw_decode(text, skip(i + 1))
            if key == "id":
                return value if valid_id(value) else None
            i = skip(i)
            if not text.startswith(",", i):
                return None
            i = skip(i + 1)
    except (ValueError, RecursionError):
        return None
    return None


def _surrogate_fields(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths (keys, with U+FFFD for surrogates) of every string or key holding one."""
    out: list[tuple[str, ...]] = []
    if isinstance(value, str):
        if _SURROGATE.search(value):
            out.append(path)
    elif isinstance(value, dict):
        for k, v in value.items():
            key = _SURROGATE.sub("\ufffd", k)
            if _SURROGATE.search(k):
                out.append((*path, key))
            out.extend(_surrogate_fields(v, (*path, key)))
    elif isinstance(value, list):
        for n, v in enumerate(value):
            out.extend(_surrogate_fields(v, (*path, str(n))))
    return out


def _clean(value: Any) -> Any:
    """`value` with every lone surrogate (in strings and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _error(request_id: int | str | None, code: int, message: str, data: Any = None) -> Refused:
    return Refused(request_id, ErrorData(code=code, message=message, data=data))


def _surrogate_refusal(msg: dict[str, Any], request_id: int | str) -> Refused | None:
    """The answer to a request whose params hold lone surrogates (None: none left)."""
    params = msg.get("params")
    fields = _surrogate_fields(params)
    if not fields:
        return None
    tool = msg.get("method") == "tools/call" and isinstance(params, dict)
    name = _SURROGATE.sub("\ufffd", str(params.get("name"))) if isinstance(params, dict) else None
    errors = []
    for path in fields:
        if tool and path[:1] == ("arguments",) and len(path) > 1:
            path = path[1:]
        else:
            path = ("params", *path)
        errors.append({"field": ".".join(path), "problem": SURROGATE_PROBLEM})
    listed = "; ".join(f"{e['field']}: {e['problem']}" for e in errors[:10])
    what = f"arguments for {name}" if tool else f"params of {msg.get('method')}"
    data: dict[str, Any] = {"code": "invalid_argument", "errors": errors}
    if tool:
        data["tool"] = name
    return _error(request_id, INVALID_PARAMS, f"invalid {what}: {listed}", data)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else "null"


def call_shape_refusal(message: JSONRPCRequest) -> Refused | None:
    """The answer to a `tools/call` whose `name` is not a string or whose `arguments` is
    present but not an object (the SDK would answer a bare "Invalid request parameters");
    None for any other request."""
    if message.method != "tools/call":
        return None
    params = message.params or {}
    name, args = params.get("name"), params.get("arguments")
    errors = []
    if not isinstance(name, str):
        errors.append({"field": "params.name", "problem": f"is {_kind(name)}, not a string"})
    if args is not None and not isinstance(args, dict):
        errors.append({"field": "params.arguments", "problem": f"is {_kind(args)}, not an object"})
    if not errors:
        return None
    listed = "; ".join(f"{e['field']}: {e['problem']}" for e in errors)
    data: dict[str, Any] = {"code": "invalid_argument", "errors": errors}
    if isinstance(name, str):
        data["tool"] = name = inert(name[:80])
    return _error(
        message.id,
        INVALID_PARAMS,
        f"invalid params of tools/call{f' for {name}' if 'tool' in data else ''}: {listed}. "
        "Send the tool's name as a string and its arguments as a JSON object of named "
        "arguments ({} when it takes none); tools/list gives each tool's input schema",
        data,
    )


def screen(line: str, parsed: Any) -> SessionMessage | Refused | None:
    """Decide on a line the SDK failed to read (`parsed` is its exception) or read as a
    notification (`parsed` is that message): a message to pass on, a refusal to answer,
    or None to pass `parsed` on unchanged."""
    is_note = isinstance(parsed, SessionMessage)
    if is_note and '"id"' not in line:
        return None
    try:
        msg = _loads(line)
    except RecursionError:
        return too_deep_error(None)
    except ValueError:
        return None if is_note else _error(None, PARSE_ERROR, "Parse error: not valid JSON")
    if not isinstance(msg, dict):
        return _error(None, INVALID_REQUEST, "Invalid Request: not a JSON object (no batches)")
    has_id = "id" in msg
    rid = msg.get("id") if has_id and valid_id(msg.get("id")) else None
    if is_note:
        if not has_id:
            return None
        if rid is not None:  # a valid id on a message the SDK could only read as a notification
            return _error(rid, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request")
        return _error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if "method" in msg and has_id:
        if rid is None:
            return _error(
                None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
            )
        if not isinstance(msg["method"], str) or _SURROGATE.search(msg["method"]):
            return _error(rid, INVALID_REQUEST, "Invalid Request: method is not a valid string")
        if msg["method"] == "initialize" and isinstance(msg.get("params"), dict):
            info = msg["params"].get("clientInfo")
            if info is not None:  # self-reported, display only: repaired, not refused
                msg["params"] = {**msg["params"], "clientInfo": _clean(info)}
        refusal = _surrogate_refusal(msg, rid)
        if refusal is not None:
            return refusal
    else:  # a notification or a response: nothing to answer, so repair and pass on
        msg = _clean(msg)
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_python(msg, by_name=False)
    except ValueError:
        return _error(rid, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    return SessionMessage(message)


def _is_note(item: object) -> bool:
    return isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCNotification)


class ScreenedReadStream(WrappedReadStream):
    """The SDK's read stream with `screen` applied; refusals are written to `reply`
    (the transport's own write stream) and never reach the dispatcher."""

    def __init__(self, inner: Any, lines: LineLog, reply: Any) -> None:
        self.inner = inner
        self.lines = lines
        self.reply = reply
        self.last_line_chars = 0
        """Length of the line the last item came from (for `flow.RequestGate`)."""

    async def receive(self) -> Any:
        while True:
            item = await self.inner.receive()
            entry = self.lines.entries.popleft() if self.lines.entries else None
            self.last_line_chars = len(entry) if isinstance(entry, str) else 0
            decided: SessionMessage | Refused | None
            if isinstance(entry, Refused):
                decided = entry
            elif isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                decided = call_shape_refusal(item.message)
            elif entry is None or not (
                isinstance(item, Exception)
                or (
                    isinstance(item, SessionMessage)
                    and isinstance(item.message, JSONRPCNotification)
                )
            ):
                return item
            else:
                decided = screen(entry, item)
            if decided is None:
                return item
            if isinstance(decided, SessionMessage):
                return replace(decided, metadata=getattr(item, "metadata", None))
            log.warning(  # the message quotes the agent's keys and method: inert on stderr
                "refused a message without reading it (id %r): %s",
                decided.request_id,
                inert(decided.error.message),
            )
            answer = JSONRPCError(jsonrpc="2.0", id=decided.request_id, error=decided.error)
            await self.reply.send(SessionMessage(answer))
