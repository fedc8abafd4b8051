"""Lines the SDK cannot read or would refuse bare, over raw pipes to a real `placet serve`:
each gets a JSON-RPC answer (or, for a client's identity, a repair) and the server keeps
serving.

Covers `placet.server.wire` (lone surrogates, bad ids, unparseable lines, a `tools/call`
of the wrong shape) and the line
cap of `placet.server.stdio.StdinLines` (oversized lines: constant memory, linear CPU).
"""

from __future__ import annotations

import fcntl
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from placet.config import load_settings
from placet.server.stdio import MAX_LINE_BYTES
from placet.server.wire import SURROGATE_PROBLEM, recover_id
from placet.store import open_store
from tests.support.mcp import Raw, Workspace


@pytest.fixture
def raw(ws: Workspace) -> Any:
    server = Raw(ws)
    yield server
    server.close()


# ---- unpaired surrogates --------------------------------------------------------------

# (tool, arguments as raw JSON with a lone surrogate, the field the answer names)
SURROGATE_CALLS = [
    ("drive_list", '{"path": "d/\\ud800"}', "path"),
    ("local_index", '{"path": "\\udc80x"}', "path"),
    ("proposal_list", '{"cursor": "\\ud800"}', "cursor"),
    (
        "propose_upload",
        '{"local_path": "a", "remote_parent": "", "reason": "why \\udfff"}',
        "reason",
    ),
    ("propose_sync", '{"plan_id": 1, "decisions": {"a\\ud800": "skip"}, "reason": "r"}',
     "decisions.a\ufffd"),
]  # fmt: skip


def test_lone_surrogates_in_tool_arguments_are_refused_naming_the_field(raw: Raw) -> None:
    assert "result" in raw.init()
    for n, (tool, args, _) in enumerate(SURROGATE_CALLS, start=1):
        raw.send(
            f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", '
            f'"params": {{"name": "{tool}", "arguments": {args}}}}}'
        )
    answers = {a["id"]: a for a in (raw.recv() for _ in SURROGATE_CALLS)}
    for n, (tool, _, field) in enumerate(SURROGATE_CALLS, start=1):
        err = answers[n]["error"]
        assert err["code"] == -32602
        assert err["data"]["code"] == "invalid_argument"
        assert err["data"]["tool"] == tool
        assert err["data"]["errors"] == [{"field": field, "problem": SURROGATE_PROBLEM}]
        assert f"invalid arguments for {tool}: {field}:" in err["message"]
    # a proper surrogate pair is valid Unicode and reaches the tool
    raw.send(
        '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "drive_list",'
        ' "arguments": {"path": "no-such-\\ud83d\\ude00"}}}'
    )
    reply = raw.recv()
    assert reply["id"] == 9 and reply["result"]["isError"] is True
    assert json.loads(reply["result"]["content"][1]["text"])["code"] == "not_found"
    assert raw.call(10, "roots_list", {})["result"]["isError"] is False


def test_lone_surrogates_elsewhere_in_a_request_are_refused(raw: Raw) -> None:
    raw.init()
    raw.send('{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"x": "\\ud800"}}}')
    err = raw.recv()["error"]
    assert err["code"] == -32602
    assert err["data"]["errors"][0]["field"] == "params._meta.x"
    raw.send('{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}')  # id unusable
    assert _err(raw.recv()) == (None, -32600)
    # a notification cannot be answered: repaired and delivered, the server goes on
    raw.send('{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": '
             '{"requestId": 77, "reason": "\\ud800"}}')  # fmt: skip
    raw.ping(2)


# ---- a tools/call of the wrong shape ---------------------------------------------------

# (params as raw JSON, the fields the answer names, the tool it names or None)
MISSHAPEN_CALLS = [
    ('{"name": "roots_list", "arguments": [1]}', ["params.arguments"], "roots_list"),
    ('{"name": "drive_list", "arguments": "x"}', ["params.arguments"], "drive_list"),
    ('{"name": "roots_list", "arguments": 1}', ["params.arguments"], "roots_list"),
    ('{"name": "roots_list", "arguments": true}', ["params.arguments"], "roots_list"),
    ('{"name": 7, "arguments": {}}', ["params.name"], None),
    ('{"arguments": [1]}', ["params.name", "params.arguments"], None),
]  # fmt: skip


def test_a_tool_call_whose_arguments_are_not_an_object_gets_invalid_argument(
    raw: Raw,
) -> None:
    raw.init()
    for n, (params, _, _) in enumerate(MISSHAPEN_CALLS, start=1):
        raw.send(f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", "params": {params}}}')
    answers = {a["id"]: a for a in (raw.recv() for _ in MISSHAPEN_CALLS)}
    for n, (_, fields, tool) in enumerate(MISSHAPEN_CALLS, start=1):
        err = answers[n]["error"]
        assert err["code"] == -32602
        assert err["data"]["code"] == "invalid_argument"
        assert [e["field"] for e in err["data"]["errors"]] == fields
        assert err["data"].get("tool") == tool
        assert "as a JSON object of named arguments" in err["message"]
    # arguments left out are no arguments; an object reaches the tool
    raw.send('{"jsonrpc": "2.0", "id": 20, "method": "tools/call", '
             '"params": {"name": "roots_list"}}')  # fmt: skip
    assert raw.recv()["result"]["isError"] is False
    assert raw.call(21, "roots_list", {})["result"]["isError"] is False


def _err(reply: dict[str, Any]) -> tuple[object, int]:
    """(id, error code) of an error answer."""
    assert set(reply) == {"jsonrpc", "id", "error"}, reply
    return reply["id"], int(reply["error"]["code"])


def test_client_info_with_lone_surrogates_is_repaired_and_kept(ws: Workspace, raw: Raw) -> None:
    reply = raw.init('{"name": "evil\\udc80", "version": "\\ud8001.0"}')
    assert reply["id"] == 0 and "result" in reply
    answer = raw.call(
        1, "propose_mkdir", {"remote_parent": "", "name": "new", "reason": "make a folder"}
    )
    assert answer["result"]["isError"] is False, answer
    pid = answer["result"]["structuredContent"]["proposal"]["id"]
    rec = open_store(load_settings()).get(pid)
    assert (rec.client_name, rec.client_version) == ("evil\ufffd", "\ufffd1.0")


# ---- ids and unreadable lines ---------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["1.5", "-0.0", "true", "null", "{}", "[]", '{"a": 1}'])
def test_a_request_with_an_invalid_id_gets_invalid_request_with_id_null(
    raw: Raw, bad_id: str
) -> None:
    raw.init()
    raw.send(f'{{"jsonrpc": "2.0", "id": {bad_id}, "method": "ping"}}')
    reply = raw.recv()
    assert reply["id"] is None and reply["error"]["code"] == -32600
    assert "id must be a string or an integer" in reply["error"]["message"]
    raw.ping(5)


def test_unreadable_lines_are_answered_and_blank_lines_ignored(raw: Raw) -> None:
    raw.init()
    raw.send("")
    raw.send("   ")
    raw.send("{not json")
    assert _err(raw.recv()) == (None, -32700)
    raw.send('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]')  # batches are not MCP
    assert _err(raw.recv()) == (None, -32600)
    raw.send('{"jsonrpc": "2.0", "id": 3}')  # neither request nor response
    assert _err(raw.recv()) == (3, -32600)
    raw.send('{"jsonrpc": "2.0", "id": "s", "method": "ping", "params": [1]}')
    assert _err(raw.recv()) == ("s", -32600)
    raw.send('{"jsonrpc": "2.0", "id": 4, "method": "ping"')  # cut short
    assert _err(raw.recv()) == (None, -32700)
    raw.ping(6)


# ---- oversized lines ------------------------------------------------------------------


def _absorb(raw: Raw, mib: int, rid: int) -> float:
    """Write one `mib` MiB request line; return the server CPU seconds it cost."""
    before = raw.cpu_seconds()
    raw.stdin.write(
        f'{{"jsonrpc": "2.0", "id": {rid}, "method": "ping", "params": {{"x": "'.encode()
    )
    block = b"A" * (1 << 20)
    for _ in range(mib):
        raw.stdin.write(block)
    raw.stdin.write(b'"}}\n')
    raw.stdin.flush()
    reply = raw.recv(120)
    assert reply["id"] == rid and reply["error"]["code"] == -32600, reply
    assert reply["error"]["data"] == {"code": "limit_exceeded", "limit_bytes": MAX_LINE_BYTES}
    return raw.cpu_seconds() - before


@pytest.mark.timeout(300)
def test_an_oversized_line_is_refused_in_linear_time(raw: Raw) -> None:
    """Refused whatever its size; CPU seconds (not wall time, so load does not matter)
    grow with the bytes. Memory: bench/server_memory.py."""
    raw.init()
    small = _absorb(raw, 2 * MAX_LINE_BYTES >> 20, 1)
    big = _absorb(raw, 8 * MAX_LINE_BYTES >> 20, 2)
    # 4x the bytes: linear costs ~4x (plus fixed costs); the old quadratic rescan cost 16x.
    assert big / max(small, 0.1) < 8, (small, big)
    raw.ping(3)
    # a line of exactly the cap is read and answered
    head = b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": {"pad": "'
    tail = b'"}}}'
    raw.send(head + b"B" * (MAX_LINE_BYTES - len(head) - len(tail)) + tail)
    assert raw.recv(120) == {"jsonrpc": "2.0", "id": 4, "result": {}}
    # one byte more is refused
    raw.send(head.replace(b"4", b"5") + b"B" * (MAX_LINE_BYTES - len(head) - len(tail) + 1) + tail)
    reply = raw.recv(120)
    assert reply["id"] == 5 and reply["error"]["code"] == -32600


def test_an_oversized_line_whose_id_comes_late_is_dropped_and_the_server_goes_on(
    raw: Raw,
) -> None:
    raw.init()
    raw.stdin.write(b'{"jsonrpc": "2.0", "method": "ping", "params": {"x": "')
    raw.stdin.write(b"C" * (MAX_LINE_BYTES + 10))
    raw.stdin.write(b'"}, "id": 7}\n')
    raw.stdin.flush()
    # its id is past the kept head, so the refusal goes out with id null
    assert _err(raw.recv(120)) == (None, -32600)
    raw.ping(8)


def test_recover_id_reads_only_a_top_level_id_before_the_cut() -> None:
    assert recover_id(b'{"jsonrpc": "2.0", "id": 42, "method": "x", "params": {"a": "BBB') == 42
    assert recover_id(b'{ "id" : "abc" , "params": {') == "abc"
    assert recover_id(b'{"method": "x", "params": {"id": 5, "a": "BBB') is None  # nested
    assert recover_id(b'{"id": true, "method"') is None
    assert recover_id(b'{"id": 1.5}') is None
    assert recover_id(b'{"params": {"x": "cut here') is None
    assert recover_id(b"[1, 2") is None


# ---- the outstanding-bytes budget (placet.server.flow) --------------------------------


def _rchar(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")  # pragma: no cover


@pytest.mark.timeout(300)
def test_large_unread_requests_are_held_to_the_byte_budget(raw: Raw) -> None:
    raw.init()
    fcntl.fcntl(raw.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)  # a few answers fill the pipe
    fillers, bigs, pad = 20, 24, (MAX_LINE_BYTES >> 20) - 1 << 20  # 24 lines of 15 MiB
    done = threading.Event()

    def writer() -> None:
        for i in range(1, fillers + 1):
            raw.send(json.dumps(
                {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                 "params": {"name": "roots_list", "arguments": {}}}
            ))  # fmt: skip
        for i in range(fillers + 1, fillers + bigs + 1):
            raw.send(f'{{"jsonrpc": "2.0", "id": {i}, "method": "ping", "params": {{"_meta": '
                     f'{{"pad": "{"P" * pad}"}}}}}}')  # fmt: skip
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    last, still = -1, 0
    while still < 4:  # wait for the server to stop reading stdin (2 s without a byte)
        assert not done.is_set(), "the server read every line with its answers unread"
        now = _rchar(raw.proc.pid)
        still = still + 1 if now == last else 0
        last = now
        time.sleep(0.5)
    # the server stopped reading with most lines unwritten: without the budget it would
    # have held all 24 (360 MiB); bench/server_memory.py measures what it holds
    seen = {raw.recv(120)["id"] for _ in range(fillers + bigs)}
    assert seen == set(range(1, fillers + bigs + 1))
    thread.join(60)
    assert done.is_set()
