"""Deeply nested stdin lines, over raw pipes to a real `placet serve`: every depth up to
100,000 (arrays, objects, inside tool arguments, a notification, `clientInfo`) is answered
or, past `MAX_NESTING_DEPTH`, refused `-32600` with `data.code = limit_exceeded`, and the
server keeps serving (the parsers recurse per level: a 1,000-deep line unchecked raises
`RecursionError`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placet.server.wire import MAX_NESTING_DEPTH, Refused, recover_id, screen, too_deep
from tests.support.mcp import Raw, Workspace, make_workspace

DEPTHS = [1, 2, 10, 64, MAX_NESTING_DEPTH - 1, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1,
          200, 600, 999, 1000, 1001, 5000, 100_000]  # fmt: skip
DEEP = {"code": "limit_exceeded", "limit_depth": MAX_NESTING_DEPTH}


@pytest.fixture(scope="module")
def shared_raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Raw]:
    """One server for the module (a fresh data dir), initialized."""
    base = tmp_path_factory.mktemp("nesting")
    ws: Workspace = make_workspace(base, base / "home")
    server = Raw(ws)
    assert "result" in server.init()
    yield server
    server.close()


def nested(depth: int, pattern: str = "[") -> str:
    """A JSON value opening `depth` containers, cycling through `pattern` (`[` array,
    `{` object under key "k"), innermost an empty array."""
    opens, closes = [], []
    for n in range(depth - 1):
        if pattern[n % len(pattern)] == "[":
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k": ')
            closes.append("}")
    return "".join(opens) + "[]" + "".join(reversed(closes))


def _refused_deep(reply: dict[str, Any], rid: int | None) -> None:
    assert set(reply) == {"jsonrpc", "id", "error"}, str(reply)[:300]
    assert reply["id"] == rid
    assert reply["error"]["code"] == -32600
    assert reply["error"]["data"] == DEEP


def _send_checked(raw: Raw, line: str, total_depth: int, rid: int | None) -> dict[str, Any] | None:
    """Send `line` (nested `total_depth` deep); past the limit it must be refused, else
    the answer (None for a notification, checked by a ping after it) is returned."""
    raw.send(line)
    if total_depth > MAX_NESTING_DEPTH:
        _refused_deep(raw.recv(), rid)
        return None
    if rid is None:
        return None
    reply = raw.recv()
    assert reply["id"] == rid, str(reply)[:300]
    return reply


@pytest.mark.parametrize("depth", DEPTHS)
def test_every_nesting_depth_is_answered_and_the_server_goes_on(
    shared_raw: Raw, depth: int
) -> None:
    # a bare array or object: no JSON-RPC message at any depth, answered with id null
    for value in (nested(depth, "["), nested(depth, "{")):
        shared_raw.send(value)
        reply = shared_raw.recv()
        assert reply["id"] is None and reply["error"]["code"] in (-32600, -32700), reply
        if depth > MAX_NESTING_DEPTH:
            assert reply["error"]["data"] == DEEP
    # inside a request's params: a ping that holds it in `_meta` (3 levels around it)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"x": None}}}
    line = json.dumps(ping).replace("null", nested(depth, "{["))
    reply = _send_checked(shared_raw, line, depth + 3, 1)
    if reply is not None:
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": {}}
    # inside tool arguments (3 levels: message, params, arguments)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "drive_list", "arguments": {"path": None}}}  # fmt: skip
    line = json.dumps(call).replace("null", nested(depth, "[{"))
    reply = _send_checked(shared_raw, line, depth + 3, 2)
    if reply is not None:  # a wrong type: refused as an argument, never a crash
        assert "error" in reply or reply["result"]["isError"] is True
    # inside a notification: nothing to answer within the limit, id null past it
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 77, "reason": None}}  # fmt: skip
    _send_checked(shared_raw, json.dumps(note).replace("null", nested(depth, "[")), depth + 2, None)
    # and a normal tool call is still answered
    answer = shared_raw.call(3, "roots_list", {})
    assert answer["id"] == 3 and answer["result"]["isError"] is False


@given(
    depth=st.integers(1, 100_000) | st.sampled_from(DEPTHS),
    pattern=st.text(alphabet="[{", min_size=1, max_size=7),
)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_fuzzed_nesting_inside_tool_arguments(shared_raw: Raw, depth: int, pattern: str) -> None:
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "propose_mkdir", "arguments": {"remote_parent": "",
                       "name": None, "reason": "deep"}}}  # fmt: skip
    line = json.dumps(call).replace("null", nested(depth, pattern))
    reply = _send_checked(shared_raw, line, depth + 3, 5)
    if reply is not None:
        assert "error" in reply or reply["result"]["isError"] is True
    shared_raw.ping(6)


def test_brackets_inside_strings_do_not_count(shared_raw: Raw) -> None:
    for text in ("[" * 100_000, '\\"' + "{" * 100_000, "\\\\" + "[" * 5000):
        shared_raw.send(f'{{"jsonrpc": "2.0", "id": 7, "method": "ping", '
                 f'"params": {{"_meta": {{"x": "{text}"}}}}}}')  # fmt: skip
        assert shared_raw.recv() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    # an unterminated string: the parser stops at it, so its brackets are no depth
    shared_raw.send('{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": "' + "[" * 100_000)
    reply = shared_raw.recv()
    assert reply["id"] is None and reply["error"]["code"] == -32700
    shared_raw.ping(9)


def test_deep_client_info_is_refused_and_a_later_initialize_succeeds(
    tmp_path: Path, placet_home: Path
) -> None:
    server = Raw(make_workspace(tmp_path, placet_home))
    try:
        for depth in (MAX_NESTING_DEPTH, 1000, 100_000):
            info = f'{{"name": "deep", "version": "0", "extra": {nested(depth)}}}'
            server.send(
                '{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": '
                f'{{"protocolVersion": "2025-11-25", "capabilities": {{}}, "clientInfo": {info}}}}}'
            )
            _refused_deep(server.recv(), 0)
        assert "result" in server.init()
        answer = server.call(1, "roots_list", {})
        assert answer["result"]["isError"] is False
    finally:
        server.close()


def test_too_deep_counts_only_brackets_outside_strings() -> None:
    limit = MAX_NESTING_DEPTH
    assert not too_deep(nested(limit).encode())
    assert too_deep(nested(limit + 1).encode())
    assert too_deep(nested(limit + 1, "{").encode())
    assert not too_deep(("[]" * 100_000).encode())  # many, but side by side
    assert not too_deep(f'["{"[" * 10_000}"]'.encode())
    assert not too_deep(f'["\\"{"[" * 10_000}"]'.encode())  # an escaped quote stays inside
    assert too_deep(f'["\\\\"{"[" * 10_000}'.encode())  # an escaped backslash ends it


def test_the_screen_and_the_id_recovery_survive_a_deep_line() -> None:
    line = '{"params": ' + "[" * 100_000 + "]" * 100_000 + ', "id": 1}'
    refused = screen(line, ValueError("the SDK could not read it"))
    assert isinstance(refused, Refused) and refused.error.data == DEEP
    assert recover_id(line[:4096].encode()) is None
