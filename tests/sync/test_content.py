"""`bind_content`: which transfers a plan binds to the bytes it reads, and what a remote
with digests costs (nothing). The reads here are a function standing in for
`Drive.content_sha256`; the real one is exercised against WebDAV in
tests/executor/test_sync_no_digest.py."""

from __future__ import annotations

from typing import Any

import pytest

from placet.errors import DriveUnavailable, NotFound
from placet.sync import LocalEntry, PlanCapabilities, RemoteEntry, plan
from placet.sync.content import ReadBudget, bind_content
from placet.sync.entries import BaselineEntry
from placet.sync.model import SyncPlan

SHA = "a" * 64
NO_DIGEST = PlanCapabilities(hash_types=())
SHA1 = PlanCapabilities(hash_types=("sha1",))


def _remote(path: str, size: int = 5, **digests: str) -> RemoteEntry:
    return RemoteEntry(path, "file", size, "2026-01-01T00:00:00Z", digests)


def _local(path: str, sha: str = SHA, size: int = 5) -> LocalEntry:
    return LocalEntry(path, path, "file", size, 1, sha)


def _never(path: str) -> str:
    raise AssertionError(f"read {path!r}")


def _bind(p: SyncPlan, read: Any, budget: ReadBudget | None = None) -> SyncPlan:
    return bind_content(p, None, "Agents", budget=budget, read=read)  # type: ignore[arg-type]


def test_a_remote_with_digests_reads_nothing() -> None:
    p = plan([], [_remote("a.txt", sha1="1" * 40)], {}, SHA1)
    assert [o.kind for o in p.ops] == ["download"]
    assert _bind(p, _never) is p


def test_new_uploads_read_nothing() -> None:
    p = plan([_local("a.txt")], [], {}, NO_DIGEST)
    assert _bind(p, _never) is p


def test_downloads_revisions_and_conflicts_are_read_by_drive_path() -> None:
    base = {
        "rev.txt": BaselineEntry("rev.txt", "b" * 64, size=5, mtime="2026-01-01T00:00:00Z"),
        "both.txt": BaselineEntry("both.txt", "c" * 64, size=1, mtime="2020-01-01T00:00:00Z"),
    }
    local = [_local("rev.txt"), _local("both.txt")]
    remote = [_remote("new.txt"), _remote("rev.txt"), _remote("both.txt")]
    p = plan(local, remote, base, NO_DIGEST)
    assert {o.path: o.kind for o in p.ops} == {"new.txt": "download", "rev.txt": "upload_revision"}
    assert [r.path for r in p.conflicts] == ["both.txt"]
    read: list[str] = []

    def fake(path: str) -> str:
        read.append(path)
        return path[-7:].rjust(64, "0")

    bound = _bind(p, fake)
    assert sorted(read) == ["Agents/both.txt", "Agents/new.txt", "Agents/rev.txt"]
    assert set(bound.content) == {"both.txt", "new.txt", "rev.txt"}
    assert bound.ops == p.ops and bound.reports == p.reports


def test_a_file_gone_when_read_is_unbound_and_a_drive_outage_fails_the_plan() -> None:
    p = plan([], [_remote("a.txt"), _remote("b.txt")], {}, NO_DIGEST)

    def gone(path: str) -> str:
        if path.endswith("a.txt"):
            raise NotFound("no such file")
        return SHA

    bound = _bind(p, gone)
    assert [o.path for o in bound.ops] == ["b.txt"] and bound.content == {"b.txt": SHA}
    (r,) = [r for r in bound.reports if r.kind == "unbound"]
    assert r.path == "a.txt" and "no such file" in r.detail
    assert (bound.summary["download"], bound.summary["unbound"]) == (1, 1)

    def down(path: str) -> str:
        raise DriveUnavailable("unreachable")

    with pytest.raises(DriveUnavailable):
        _bind(p, down)


def test_the_byte_budget_is_taken_in_path_order() -> None:
    remote = [_remote("a.txt", 60), _remote("b.txt", 60), _remote("c.txt", 30)]
    p = plan([], remote, {}, NO_DIGEST)
    bound = _bind(p, lambda path: SHA, ReadBudget(file_bytes=100, total_bytes=100))
    assert [o.path for o in bound.ops] == ["a.txt", "c.txt"]
    assert [r.path for r in bound.reports if r.kind == "unbound"] == ["b.txt"]
    assert bound.summary["download_bytes"] == 90
    assert SyncPlan.from_dict(bound.to_dict()) == bound  # stored and read back alike
