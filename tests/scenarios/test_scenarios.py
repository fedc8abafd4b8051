"""Runs every scenario file in this folder: a real local tree, an in-memory remote.

Each `*.toml` holds a description, the remote's capabilities (`hash_types`,
`case_insensitive`), the local tree (`[[local]]`: files with `content`, `kind` = dir |
fifo | symlink with `target`, optional `mode`), the remote listing (`[[remote]]`:
`content`, or `kind = "dir"`; `digest` = native | upper | missing), an optional
`[[baseline]]`, and the golden classification `[expect]` (path -> op kind, report kind,
or `conflict:<kind>`). `[[steps]]` script more than one plan: `do = "plan"` (with
`expect` and, optionally, `hashed`: files the indexer must read) or `do = "rewrite"`
(same inode, mtime set back). `index_as = "nobody"` runs the indexer as uid 65534.

For every plan the runner also checks that each indexed file's SHA-256 is that of the
bytes it last wrote, so a stale cache cannot pass unnoticed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import tomllib
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from placet.sync import PlanCapabilities, baseline_for, choose_digest_type, plan
from placet.sync.cache import MemoryDigestCache
from placet.sync.entries import BaselineEntry, LocalEntry, RemoteEntry
from placet.sync.index_file import RACY_WINDOW_NS
from placet.sync.indexer import index_local
from placet.sync.local_tree import LocalTree
from tests.support.listings import classify, index_as_nobody, make_public, public_dir

HERE = Path(__file__).parent
SCENARIOS = sorted(HERE.glob("*.toml"))
MTIME = "2025-01-01T00:00:00Z"


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def _remote_entry(item: dict[str, Any], hash_types: list[str]) -> RemoteEntry:
    if item.get("kind") == "dir":
        return RemoteEntry(item["path"], "dir", 0, MTIME)
    data = item["content"].encode()
    digests = {t: hashlib.new(t, data).hexdigest() for t in hash_types}
    mode = item.get("digest", "native")
    if mode == "upper":
        digests = {t: v.upper() for t, v in digests.items()}
    elif mode == "missing":
        digests = {}
    return RemoteEntry(item["path"], "file", len(data), item.get("mtime", MTIME), digests)


def _baseline(item: dict[str, Any], hash_types: list[str]) -> BaselineEntry:
    remote = _remote_entry(item, hash_types)
    data = item.get("content", "").encode()
    local = LocalEntry(
        item["path"],
        item["path"],
        "dir" if item.get("kind") == "dir" else "file",
        len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    return baseline_for(item["path"], local, remote)


class Runner:
    def __init__(self, spec: dict[str, Any], root: Path) -> None:
        self.spec, self.root = spec, root
        self.hash_types: list[str] = spec.get("hash_types", [])
        self.caps = PlanCapabilities(
            hash_types=tuple(self.hash_types),
            case_insensitive=spec.get("case_insensitive", False),
        )
        self.as_nobody = spec.get("index_as", "root") == "nobody"
        self.cache = MemoryDigestCache()
        self.written: dict[str, bytes] = {}  # on-disk name -> bytes
        self.remote = [_remote_entry(i, self.hash_types) for i in spec.get("remote", [])]
        self.baseline = {
            b.path: b for b in (_baseline(i, self.hash_types) for i in spec.get("baseline", []))
        }

    def build(self) -> None:
        modes: list[tuple[Path, int]] = []
        for item in self.spec.get("local", []):
            p = self.root / item["path"]
            p.parent.mkdir(parents=True, exist_ok=True)
            kind = item.get("kind", "file")
            if kind == "file":
                self.write(item["path"], item["content"])
            elif kind == "dir":
                p.mkdir(exist_ok=True)
            elif kind == "fifo":
                os.mkfifo(p)
            elif kind == "symlink":
                p.symlink_to(item["target"])
            if "mode" in item:
                modes.append((p, item["mode"]))
        if self.as_nobody:
            make_public(self.root)
        for p, mode in modes:
            p.chmod(mode)

    def write(self, rel: str, content: str) -> None:
        (self.root / rel).write_bytes(content.encode())
        self.written[rel] = content.encode()

    def rewrite(self, rel: str, content: str) -> None:
        """Same inode, same size, mtime set back; waits for the coarse ctime clock to tick,
        the precondition that makes ctime the detector (the racy rule covers the rest)."""
        p = self.root / rel
        before = os.stat(p)
        assert len(content.encode()) == before.st_size, "a rewrite keeps the size"
        deadline = time.monotonic() + 5
        while True:
            with open(p, "r+b") as f:
                f.write(content.encode())
            os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
            if os.stat(p).st_ctime_ns != before.st_ctime_ns or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        after = os.stat(p)
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )
        self.written[rel] = content.encode()

    def plan_step(self, expect: dict[str, str], hashed: int | None) -> None:
        dtype = choose_digest_type(self.hash_types)
        if self.as_nobody:
            entries = index_as_nobody(self.root, "", dtype or "")
        else:
            tree = LocalTree(
                self.root,
                "",
                digest_types=[dtype] if dtype else [],
                cache=self.cache,
                root_key="scenario",
                now_ns=time.time_ns() + 10 * RACY_WINDOW_NS,  # scenario files are settled
            )
            res = index_local(tree)
            entries = list(res.entries)
            if hashed is not None:
                assert res.hashed_count == hashed, "files hashed by this index"
        for e in entries:
            if e.kind == "file" and e.raw_path in self.written:
                assert e.sha256 == hashlib.sha256(self.written[e.raw_path]).hexdigest(), e.path
        p = plan(entries, self.remote, self.baseline, self.caps)
        assert classify(p) == {_nfc(k): v for k, v in expect.items()}


@pytest.fixture
def scenario_root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    spec = request.node.callspec.params["path"]
    if tomllib.loads(spec.read_text(encoding="utf-8")).get("index_as") == "nobody":
        d = public_dir()
        yield d
        shutil.rmtree(d)
    else:
        yield tmp_path / "root"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, scenario_root: Path) -> None:
    spec = tomllib.loads(path.read_text(encoding="utf-8"))
    assert spec.get("description"), "every scenario says what it shows"
    scenario_root.mkdir(exist_ok=True)
    run = Runner(spec, scenario_root)
    run.build()
    steps = spec.get("steps") or [{"do": "plan", "expect": spec["expect"]}]
    for step in steps:
        if step["do"] == "plan":
            run.plan_step(step["expect"], step.get("hashed"))
        elif step["do"] == "rewrite":
            run.rewrite(step["path"], step["content"])
        else:
            raise AssertionError(f"unknown step {step['do']!r}")


def test_every_scenario_is_collected() -> None:
    assert len(SCENARIOS) >= 11
