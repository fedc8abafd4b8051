"""`placet serve` hands the drive the persistent remote digest cache at start-up: over a
real server and a real rclone `local` remote (digests computed by reading the files),
`drive_list(include_digest)` fills the database's remote digest cache before any plan,
and a second call, in the same server or a new one, hashes nothing.

"Hashed nothing" is shown the way a cache hit is: every file's bytes are replaced by
others of the same size and its mtime put back, so the digest a call reports is the
one cached for (size, mtime) if the file was not read, and the new bytes' if it was.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.mcp import Workspace, connect, ok

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

NAMES = ("a.txt", "b.txt", "c.txt")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _swap_keeping_size_and_mtime(path: Path, data: bytes) -> None:
    st = path.stat()
    assert len(data) == st.st_size
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _cached_rows(ws: Workspace) -> dict[str, str]:
    with sqlite3.connect(ws.home / "placet.db") as db:
        rows = db.execute(
            "SELECT path, digest FROM sync_remote_digest WHERE digest_type = 'sha256'"
        ).fetchall()
    return {p: d for p, d in rows if p.startswith("dg/")}


async def _digests(client: object, ws: Workspace) -> dict[str, str]:
    got = ok(await client.call_tool("drive_list", {"path": "dg", "include_digest": True}))  # type: ignore[attr-defined]
    assert got["digest_type"] == "sha256"
    return {e["name"]: e["digests"].get("sha256", "") for e in got["entries"]}


async def test_drive_list_digests_share_the_persistent_cache_before_any_plan(
    ws: Workspace,
) -> None:
    folder = ws.drive / "dg"
    folder.mkdir()
    old = {n: f"first {n}\n".encode() for n in NAMES}
    new = {n: f"other {n}\n".encode() for n in NAMES}
    for n in NAMES:
        (folder / n).write_bytes(old[n])
    want_old = {n: _sha(old[n]) for n in NAMES}

    async with connect(ws) as client:
        assert await _digests(client, ws) == want_old  # hashed: nothing was cached
        # Written to the database, not to a cache of the drive's own.
        assert _cached_rows(ws) == {f"dg/{n}": want_old[n] for n in NAMES}
        for n in NAMES:
            _swap_keeping_size_and_mtime(folder / n, new[n])
        assert await _digests(client, ws) == want_old  # the second call read no file

    async with connect(ws) as client:  # a new process: the persistent cache alone
        assert await _digests(client, ws) == want_old
        # A changed mtime is a miss: that file is hashed again, the others are not.
        st = (folder / "b.txt").stat()
        os.utime(folder / "b.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        again = await _digests(client, ws)
        assert again == {**want_old, "b.txt": _sha(new["b.txt"])}
    assert _cached_rows(ws)["dg/b.txt"] == _sha(new["b.txt"])


async def test_sync_plan_schema_types_its_items_and_the_design_explains_skipped_special(
    ws: Workspace,
) -> None:
    """The output schema is for validation (docs/decisions/0015-reply-budget.md): a plan
    item's fields are typed there, and what `skipped_special` covers is said in
    docs/design.md section 5, beside the reason each item gives."""
    async with connect(ws) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["sync_plan"].output_schema
    assert schema is not None
    item = schema["$defs"]["PlanItem"]
    assert item["required"] == ["path"]
    assert item["properties"]["kind"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert schema["properties"]["conflicts"] == {
        "items": {"$ref": "#/$defs/PlanItem"},
        "type": "array",
    }
    design = (Path(__file__).parents[2] / "docs" / "design.md").read_text()
    catalogue = design[design.index("## 5.") : design.index("## 6.")]
    said = " ".join(catalogue.split())
    explained = said[said.index("`skipped_special` is a special file") :]
    for words in ("symlink", "':'", "a leading '-'", "control characters", ".placet-tmp-"):
        assert words in explained, words
