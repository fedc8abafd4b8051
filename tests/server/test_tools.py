"""`placet serve` over real stdio: the catalogue, proposals, evidence, caps, drive reads.

Every test starts the installed `placet serve` as a child process and speaks to it with
the official MCP client (`mcp.Client(StdioServerParameters)`); the drive is a real rclone
`local` remote, the store a real SQLite file read back from the test process.

Two tests also run on PostgreSQL (`ON_BOTH_BACKENDS`: proposing, reproposing and reading
back what was stored go through every store path a tool takes); the rest stay on SQLite,
since the tools' code above the store is the same on both and each server start on
PostgreSQL costs seconds of the suite (docs/decisions/0032-test-suite.md).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from placet.config import load_settings
from placet.store import open_store
from tests.support.mcp import (
    CLIENT_INFO,
    Workspace,
    connect,
    error_of,
    ok,
    sha256_of,
    snapshot,
)
from tests.support.proposals import ABSENT_REMOTE

pytestmark = pytest.mark.anyio
ON_BOTH_BACKENDS = pytest.mark.usefixtures("store_backend")


# docs/design.md section 5, argument names exactly.
CATALOGUE: dict[str, tuple[set[str], set[str]]] = {
    "roots_list": (set(), set()),
    "drive_list": ({"path", "include_digest", "cursor"}, set()),
    "drive_read": ({"path", "max_bytes"}, {"path"}),
    "propose_upload": (
        {
            "local_path",
            "remote_parent",
            "name",
            "replace_existing",
            "reason",
            "ttl_minutes",
            "root",
        },
        {"local_path", "remote_parent", "reason"},
    ),
    "propose_mkdir": (
        {"remote_parent", "name", "reason", "ttl_minutes"},
        {"remote_parent", "name", "reason"},
    ),
    "propose_download": (
        {"remote_path", "local_path", "overwrite", "reason", "ttl_minutes", "root"},
        {"remote_path", "local_path", "reason"},
    ),
    "proposal_get": ({"id"}, {"id"}),
    "proposal_list": ({"status", "cursor"}, set()),
    "proposal_wait": ({"id", "timeout_s"}, {"id"}),
    "proposal_withdraw": ({"id"}, {"id"}),
    "proposal_ops": ({"id", "cursor"}, {"id"}),
    "local_index": ({"path", "entries", "cursor", "root", "include_hidden"}, set()),
    "sync_plan": (
        {"local_path", "remote_path", "allow_empty_side", "include_hidden", "root"},
        {"local_path", "remote_path"},
    ),
    "sync_plan_ops": ({"plan_id", "kind", "folder", "cursor"}, {"plan_id"}),
    "drive_changes": ({"path", "since_anchor", "changes", "cursor"}, {"path"}),
    "propose_sync": ({"plan_id", "decisions", "reason", "ttl_minutes"}, {"plan_id", "reason"}),
}
OPEN_WORLD = {"drive_list", "drive_read", "drive_changes", "sync_plan"}
READ_ONLY = {
    "roots_list",
    "drive_list",
    "drive_read",
    "proposal_get",
    "proposal_list",
    "proposal_wait",
    "proposal_ops",
    "local_index",
    "sync_plan",
    "sync_plan_ops",
    "drive_changes",
}

# One valid call per tool (ids refer to a proposal the test creates first).
VALID_CALLS: dict[str, dict[str, Any]] = {
    "roots_list": {},
    "drive_list": {"path": ""},
    "drive_read": {"path": "remote.txt"},
    "propose_upload": {"local_path": "hello.txt", "remote_parent": "", "reason": "share it"},
    "propose_mkdir": {"remote_parent": "", "name": "reports", "reason": "a folder"},
    "propose_download": {
        "remote_path": "remote.txt",
        "local_path": "docs/remote.txt",
        "reason": "read it",
    },
    "proposal_get": {"id": 1},
    "proposal_list": {},
    "proposal_wait": {"id": 1, "timeout_s": 0},
    "proposal_withdraw": {"id": 1},
    "proposal_ops": {"id": 1},
    "local_index": {"path": ""},
    "sync_plan": {"local_path": "", "remote_path": ""},
    "drive_changes": {"path": ""},
    "propose_sync": {"plan_id": 1, "reason": "apply the plan"},
}


PROPOSAL_KEYS = [
    "id", "kind", "status", "decided", "reason", "request", "evidence", "request_hash",
    "created_at", "expires_at", "resolved_at", "resolved_by", "resolution", "attempt",
    "result", "client_name", "client_version", "label", "made_by_this_session", "sync",
]  # fmt: skip
"""A proposal's keys, as every tool that returns one declares them (docs/design.md
section 5): an object with these required keys, its fields untyped."""
RETURNS_A_PROPOSAL = {n for n in CATALOGUE if n.startswith("propos")} - {"proposal_ops"}


def keywords(schema: Any) -> set[str]:
    """Every keyword `schema` uses at any depth (property names are not keywords)."""
    if isinstance(schema, list):
        return set().union(*(keywords(s) for s in schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for k, v in schema.items():
        if k in ("properties", "$defs"):
            found |= keywords(list(v.values()))
        elif k not in ("required", "enum", "const", "default"):
            found |= keywords(v)
    return found


async def test_catalogue_schemas_annotations_and_instructions(ws: Workspace) -> None:
    async with connect(ws) as client:
        assert client.instructions is not None
        text = client.instructions
        assert "proposal" in text and "placet review" in text and "proposal_wait" in text
        assert "50 s" in text
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(CATALOGUE)
    for name, (props, required) in CATALOGUE.items():
        tool = tools[name]
        schema = tool.input_schema
        assert set(schema.get("properties", {})) == props, name
        assert set(schema.get("required", [])) == required, name
        assert schema.get("additionalProperties") is False, name
        assert "title" not in keywords(schema), name  # pydantic's, not the model's to read
        assert all(p.get("description") for p in schema.get("properties", {}).values()), name
        out = tool.output_schema
        assert out is not None and out.get("type") == "object", name
        assert keywords(out).isdisjoint({"title", "description", "default"}), name
        if name in RETURNS_A_PROPOSAL:
            props = out["properties"]
            shown = props["proposals"]["items"] if name == "proposal_list" else props["proposal"]
            assert shown == {"required": PROPOSAL_KEYS, "type": "object"}, name
        assert tool.description and tool.title, name
        if name.startswith("propose_"):  # a cancelled call may still have stored it
            assert "cancelled after the proposal was stored, it is in proposal_list" in (
                " ".join(tool.description.split())
            ), name
        if name == "proposal_list":  # ... and proposal_list says where to find it
            assert "cancelled after its proposal was stored still made it" in (
                " ".join(tool.description.split())
            )
        ann = tool.annotations
        assert ann is not None
        assert ann.read_only_hint is (name in READ_ONLY), name
        assert ann.destructive_hint is False, name
        assert ann.idempotent_hint is True, name
        assert ann.open_world_hint is (name in OPEN_WORLD), name
    assert tools["drive_read"].input_schema["properties"]["max_bytes"]["maximum"] == 16384
    assert tools["proposal_wait"].input_schema["properties"]["timeout_s"]["maximum"] == 50
    ttl = tools["propose_upload"].input_schema["properties"]["ttl_minutes"]
    assert "5" in str(ttl) and "30" in str(ttl)
    read_out = tools["drive_read"].output_schema
    assert read_out is not None
    assert {"content", "truncated", "content_is_untrusted_data"} <= set(read_out["properties"])
    assert read_out["properties"]["content_is_untrusted_data"]["const"] is True
    with_proposal = {
        n for n, t in tools.items() if '"made_by_this_session"' in json.dumps(t.output_schema)
    }
    assert with_proposal == RETURNS_A_PROPOSAL


async def test_every_tool_refuses_an_unknown_argument(ws: Workspace) -> None:
    """One wrapper enforces it for all tools: refused as a tool error the model can read
    (MCP 2025-11-25, "Error Handling"), not ignored."""
    async with connect(ws) as client:
        ok(await client.call_tool("propose_mkdir", {**VALID_CALLS["propose_mkdir"]}))
        for name, args in VALID_CALLS.items():
            err = error_of(await client.call_tool(name, {**args, "replace_exisitng": True}))
            assert err["code"] == "invalid_argument", name
            assert err["details"]["field"] == "replace_exisitng", name
            assert "unknown argument" in err["message"], name
        # Nothing was acted on: proposal 1 is still pending, and only it exists.
        listed = ok(await client.call_tool("proposal_list", {}))
        assert [(p["id"], p["status"]) for p in listed["proposals"]] == [(1, "pending")]


async def test_argument_errors_are_tool_errors_an_unknown_tool_a_protocol_error(
    ws: Workspace,
) -> None:
    async with connect(ws) as client:
        for name, args, field in [
            ("propose_mkdir", {"remote_parent": "", "name": "x"}, "reason"),  # missing
            ("propose_mkdir", {"remote_parent": "", "name": 7, "reason": "r"}, "name"),
            ("drive_read", {"path": "remote.txt", "max_bytes": 16385}, "max_bytes"),
            ("proposal_wait", {"id": 1, "timeout_s": 51}, "timeout_s"),
            ("proposal_get", {"id": "1"}, "id"),  # strict: no string-to-int coercion
        ]:
            err = error_of(await client.call_tool(name, args))
            assert err["code"] == "invalid_argument" and err["retryable"] is False, name
            assert err["details"]["field"] == field and err["details"]["tool"] == name
        with pytest.raises(MCPError) as ei:
            await client.call_tool("nope", {})
        assert ei.value.error.code == INVALID_PARAMS
        err = error_of(await client.call_tool("proposal_get", {"id": 4242}))
        assert err["code"] == "not_found" and err["retryable"] is False
        assert "4242" in err["message"]


async def test_argument_errors_stay_bounded(ws: Workspace) -> None:
    """100,000 unknown arguments with long hostile names: a short error listing ten."""
    hostile = {f"\x1b[31m{'k' * 90}{i}": i for i in range(100_000)}
    async with connect(ws) as client:
        result = await client.call_tool("proposal_list", hostile)
        err = error_of(result)
    assert err["code"] == "invalid_argument"
    assert err["details"]["error_count"] == 100_000 and len(err["details"]["errors"]) == 10
    assert "(and 99990 more)" in err["message"]
    assert "\x1b" not in err["message"] and "\x1b" not in json.dumps(err)
    size = sum(len(c.text.encode()) for c in result.content)  # type: ignore[union-attr]
    assert size < 12_000, size


async def test_propose_tools_leave_drive_and_local_root_byte_for_byte_unchanged(
    ws: Workspace,
) -> None:
    before = (snapshot(ws.root), snapshot(ws.drive))
    async with connect(ws) as client:
        for name in ("propose_upload", "propose_mkdir", "propose_download"):
            created = ok(await client.call_tool(name, VALID_CALLS[name]))
            assert created["created"] is True and created["proposal"]["status"] == "pending"
        ok(
            await client.call_tool(
                "propose_upload",
                {
                    "local_path": str(ws.root / "docs" / "guide.md"),
                    "remote_parent": "shared",
                    "name": "guide-copy.md",
                    "replace_existing": True,
                    "reason": "absolute path form",
                    "ttl_minutes": 5,
                },
            )
        )
        error_of(
            await client.call_tool(
                "propose_download",
                {"remote_path": "remote.txt", "local_path": "hello.txt", "reason": "clobber?"},
            )
        )
        listed = ok(await client.call_tool("proposal_list", {}))
        assert len(listed["proposals"]) == 4
    assert (snapshot(ws.root), snapshot(ws.drive)) == before


@ON_BOTH_BACKENDS
async def test_stored_proposal_holds_the_evidence_the_tool_reported(ws: Workspace) -> None:
    async with connect(ws, "--label", "ci bot") as client:
        up = ok(await client.call_tool("propose_upload", VALID_CALLS["propose_upload"]))
        down = ok(await client.call_tool("propose_download", VALID_CALLS["propose_download"]))
    store = open_store(load_settings())
    try:
        for reported in (up["proposal"], down["proposal"]):
            rec = store.get(reported["id"])
            assert rec.request == reported["request"]
            assert rec.evidence == reported["evidence"]
            assert rec.request_hash == reported["request_hash"]
            assert rec.reason == reported["reason"]
            assert (rec.client_name, rec.client_version) == ("placet-tests", "9.9")
            assert rec.label == "ci bot"
            assert rec.drive_spec == str(ws.drive)
    finally:
        store.close()
    hello = ws.root / "hello.txt"
    local = up["proposal"]["evidence"]["local"]
    assert local["sha256"] == sha256_of(hello)
    assert local["size"] == hello.stat().st_size
    assert local["mtime_ns"] == hello.stat().st_mtime_ns
    assert local["digest_type"] == "sha256" and local["digest"] == local["sha256"]
    assert up["proposal"]["evidence"]["remote"] == ABSENT_REMOTE
    root_ref = up["proposal"]["request"]["root"]
    assert root_ref["path"] == str(ws.root) and root_ref["inode"] == ws.root.stat().st_ino
    remote = down["proposal"]["evidence"]["remote"]
    assert remote["exists"] is True and remote["size"] == (ws.drive / "remote.txt").stat().st_size
    assert remote["digest_type"] == "sha256"
    assert remote["digest"] == sha256_of(ws.drive / "remote.txt")
    assert down["proposal"]["evidence"]["local"] is None


async def test_ttl_range(ws: Workspace) -> None:
    base = {"remote_parent": "", "reason": "ttl check"}
    async with connect(ws) as client:
        for ttl in (4, 31, 0, -5):
            err = error_of(
                await client.call_tool(
                    "propose_mkdir", {**base, "name": f"t{ttl}", "ttl_minutes": ttl}
                )
            )
            assert err["code"] == "invalid_argument"
            assert err["details"]["field"] == "ttl_minutes"
        for ttl in (5, 30):
            p = ok(
                await client.call_tool(
                    "propose_mkdir", {**base, "name": f"t{ttl}", "ttl_minutes": ttl}
                )
            )["proposal"]
            store = open_store(load_settings())
            rec = store.get(p["id"])
            store.close()
            assert rec.expires_at - rec.created_at == timedelta(minutes=ttl)
        default = ok(await client.call_tool("propose_mkdir", {**base, "name": "tdefault"}))
        store = open_store(load_settings())
        rec = store.get(default["proposal"]["id"])
        store.close()
        assert rec.expires_at - rec.created_at == timedelta(minutes=30)


async def test_owner_ttl_cap_below_30_is_a_domain_error(ws: Workspace) -> None:
    ws.write_config(max_ttl_minutes=10, default_ttl_minutes=10)
    async with connect(ws) as client:
        err = error_of(
            await client.call_tool(
                "propose_mkdir",
                {"remote_parent": "", "name": "x", "reason": "r", "ttl_minutes": 20},
            )
        )
        assert err["code"] == "invalid_argument" and "5..10" in err["message"]
        ok(
            await client.call_tool(
                "propose_mkdir",
                {"remote_parent": "", "name": "x", "reason": "r", "ttl_minutes": 10},
            )
        )


@ON_BOTH_BACKENDS
async def test_reproposing_returns_created_false_until_the_evidence_changes(
    ws: Workspace,
) -> None:
    args = VALID_CALLS["propose_upload"]
    async with connect(ws) as client:
        first = ok(await client.call_tool("propose_upload", args))
        again = ok(await client.call_tool("propose_upload", args))
        assert first["created"] is True and again["created"] is False
        assert again["proposal"]["id"] == first["proposal"]["id"]
        assert "already pending" in (await client.call_tool("propose_upload", args)).content[0].text
        (ws.root / "hello.txt").write_text("edited since\n")
        changed = ok(await client.call_tool("propose_upload", args))
        assert changed["created"] is True and changed["proposal"]["id"] != first["proposal"]["id"]


async def test_pending_per_session_cap_returns_limit_exceeded(ws: Workspace) -> None:
    ws.write_config(pending_per_session=2)
    base = {"remote_parent": "", "reason": "flood"}
    async with connect(ws) as client:
        for i in range(2):
            ok(await client.call_tool("propose_mkdir", {**base, "name": f"d{i}"}))
        err = error_of(await client.call_tool("propose_mkdir", {**base, "name": "d2"}))
        assert err["code"] == "limit_exceeded"
        # Still serving, and the identical request is still answered idempotently.
        same = ok(await client.call_tool("propose_mkdir", {**base, "name": "d0"}))
        assert same["created"] is False
    async with connect(ws) as other:  # another session has its own allowance
        ok(await other.call_tool("propose_mkdir", {**base, "name": "d2"}))


async def test_drive_read_text_truncation_and_refusals(ws: Workspace) -> None:
    (ws.drive / "long.txt").write_text("é" * 10000)  # 20000 bytes, two per character
    (ws.drive / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (ws.drive / "nul.bin").write_bytes(b"text then \x00 a NUL")
    async with connect(ws) as client:
        small = ok(await client.call_tool("drive_read", {"path": "remote.txt"}))
        assert small["content"] == "remote text\n" and small["truncated"] is False
        assert small["content_is_untrusted_data"] is True and "instructions" in small["note"]
        cut = ok(await client.call_tool("drive_read", {"path": "long.txt", "max_bytes": 101}))
        assert cut["truncated"] is True and cut["size"] == 20000
        assert cut["content"] == "é" * 50  # the half character at byte 101 is dropped whole
        assert cut["bytes_returned"] == 100
        full_cap = ok(await client.call_tool("drive_read", {"path": "long.txt"}))
        assert full_cap["truncated"] is True and full_cap["bytes_returned"] == 16384
        for path in ("image.png", "nul.bin"):
            err = error_of(await client.call_tool("drive_read", {"path": path}))
            assert err["code"] == "not_text" and "binary" in err["message"]
            assert "propose_download" in err["message"]
        assert error_of(await client.call_tool("drive_read", {"path": "shared"}))["code"] in {
            "not_regular_file",
            "not_found",
        }
        assert (
            error_of(await client.call_tool("drive_read", {"path": "missing.txt"}))["code"]
            == "not_found"
        )


async def test_drive_list_digests_and_pages(ws: Workspace) -> None:
    many = ws.drive / "many"
    many.mkdir()
    for i in range(205):
        (many / f"f{i:03}.txt").write_text(str(i))
    async with connect(ws) as client:
        top = ok(await client.call_tool("drive_list", {"path": "", "include_digest": True}))
        by_name = {e["name"]: e for e in top["entries"]}
        assert by_name["remote.txt"]["digests"] == {"sha256": sha256_of(ws.drive / "remote.txt")}
        assert by_name["shared"]["is_dir"] is True and top["digest_type"] == "sha256"
        plain = ok(await client.call_tool("drive_list", {"path": ""}))
        assert all(e["digests"] == {} for e in plain["entries"])
        page1 = ok(await client.call_tool("drive_list", {"path": "many"}))
        assert len(page1["entries"]) == 200 and page1["next_cursor"]
        page2 = ok(
            await client.call_tool("drive_list", {"path": "many", "cursor": page1["next_cursor"]})
        )
        names = [e["name"] for e in page1["entries"] + page2["entries"]]
        assert names == [f"f{i:03}.txt" for i in range(205)] and page2["next_cursor"] is None


async def test_attribution_visibility_and_withdraw_by_the_proposing_session(
    ws: Workspace, tmp_path: Path
) -> None:
    other_root = tmp_path / "elsewhere"
    other_root.mkdir()
    (other_root / "x.txt").write_text("x")
    async with connect(ws) as a:
        up = ok(await a.call_tool("propose_upload", VALID_CALLS["propose_upload"]))["proposal"]
        mk = ok(await a.call_tool("propose_mkdir", VALID_CALLS["propose_mkdir"]))["proposal"]
        assert up["made_by_this_session"] is True
        assert (up["client_name"], up["client_version"]) == ("placet-tests", "9.9")
        async with connect(ws) as b:  # same roots, another session
            seen = ok(await b.call_tool("proposal_get", {"id": up["id"]}))["proposal"]
            assert seen["made_by_this_session"] is False
            err = error_of(await b.call_tool("proposal_withdraw", {"id": up["id"]}))
            assert err["code"] == "refused"
        async with Client(
            ws.params(roots=[str(other_root)]), client_info=CLIENT_INFO
        ) as c:  # a different root
            err = error_of(await c.call_tool("proposal_get", {"id": up["id"]}))
            assert err["code"] == "not_found"
            listed = ok(await c.call_tool("proposal_list", {}))
            assert [p["id"] for p in listed["proposals"]] == [mk["id"]]  # same drive: mkdir
        gone = ok(await a.call_tool("proposal_withdraw", {"id": up["id"]}))
        assert gone["proposal"]["status"] == "withdrawn" and gone["already_withdrawn"] is False
        again = ok(await a.call_tool("proposal_withdraw", {"id": up["id"]}))
        assert again["already_withdrawn"] is True


async def test_proposal_list_filters_and_pages(ws: Workspace) -> None:
    async with connect(ws) as client:
        ids = []
        for i in range(55):
            p = ok(
                await client.call_tool(
                    "propose_mkdir", {"remote_parent": "", "name": f"n{i}", "reason": "page"}
                )
            )
            ids.append(p["proposal"]["id"])
        ok(await client.call_tool("proposal_withdraw", {"id": ids[0]}))
        page1 = ok(await client.call_tool("proposal_list", {"status": "pending"}))
        assert [p["id"] for p in page1["proposals"]] == ids[::-1][:50]
        page2 = ok(
            await client.call_tool(
                "proposal_list", {"status": "pending", "cursor": page1["next_cursor"]}
            )
        )
        assert [p["id"] for p in page2["proposals"]] == ids[1:5][::-1]
        assert page2["next_cursor"] is None
        withdrawn = ok(await client.call_tool("proposal_list", {"status": "withdrawn"}))
        assert [p["id"] for p in withdrawn["proposals"]] == [ids[0]]
        err = error_of(
            await client.call_tool(
                "proposal_list", {"status": "withdrawn", "cursor": page1["next_cursor"]}
            )
        )
        assert err["code"] == "invalid_cursor"


async def test_owner_discard_reason_reaches_the_agent(ws: Workspace) -> None:
    async with connect(ws) as client:
        p = ok(await client.call_tool("propose_mkdir", VALID_CALLS["propose_mkdir"]))["proposal"]
        assert p["resolution"] is None
        store = open_store(load_settings(ws.env))
        store.discard(p["id"], reason="wrong folder\x1b[2J, use reports/")
        for tool, args in (
            ("proposal_get", {"id": p["id"]}),
            ("proposal_wait", {"id": p["id"], "timeout_s": 1}),
        ):
            got = ok(await client.call_tool(tool, args))["proposal"]
            assert got["resolution"] == {
                "by": "owner",
                "reason": "wrong folder\\x1b[2J, use reports/",
            }, tool
        listed = ok(await client.call_tool("proposal_list", {"status": "discarded"}))
        assert listed["proposals"][0]["resolution"]["reason"].startswith("wrong folder")
