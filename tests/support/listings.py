"""Builders for sync listings in tests: entries from text content, digests computed.

`L("a.txt", "hello")` is a local file whose SHA-256 and SHA-1 are those of b"hello";
`R("a.txt", "hello")` the remote file as a SHA-1 remote lists it; `B("a.txt", "hello")`
the baseline recorded after both held "hello". `classify(plan)` flattens a plan to
{path: "upload" | "skip" | "conflict:content_differs" | ...} for table assertions.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from placet.sync.entries import BaselineEntry, LocalEntry, PlanCapabilities, RemoteEntry
from placet.sync.model import SyncPlan

MTIME = "2025-01-01T00:00:00Z"
SHA1 = PlanCapabilities(hash_types=("sha1",))
NO_HASH = PlanCapabilities(hash_types=())


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def digest(kind: str, text: str) -> str:
    return hashlib.new(kind, text.encode()).hexdigest()


def L(
    path: str,
    content: str | None = "",
    *,
    kind: str = "file",
    raw: str | None = None,
    dtype: str | None = "sha1",
    note: str = "",
) -> LocalEntry:
    if kind != "file" or content is None:
        return LocalEntry(path, raw or path, kind, note=note)  # type: ignore[arg-type]
    return LocalEntry(
        path,
        raw or path,
        "file",
        size=len(content.encode()),
        mtime_ns=1,
        sha256=sha256(content),
        digest_type=dtype,
        digest=digest(dtype, content) if dtype else None,
        verified=True,
        note=note,
    )


def R(
    path: str,
    content: str | None = "",
    *,
    kind: str = "file",
    types: Iterable[str] = ("sha1",),
    upper: bool = False,
    mtime: str = MTIME,
) -> RemoteEntry:
    if kind != "file" or content is None:
        return RemoteEntry(path, "dir", 0, mtime)
    digests = {t: digest(t, content) for t in types}
    if upper:
        digests = {t: v.upper() for t, v in digests.items()}
    return RemoteEntry(path, "file", len(content.encode()), mtime, digests)


def B(
    path: str,
    content: str | None,
    *,
    remote_type: str | None = "sha1",
    mtime: str = MTIME,
) -> BaselineEntry:
    if content is None:
        return BaselineEntry(path, None)
    return BaselineEntry(
        path,
        sha256(content),
        remote_digest_type=remote_type,
        remote_digest=digest(remote_type, content) if remote_type else None,
        size=len(content.encode()),
        mtime=mtime,
    )


def base(*entries: BaselineEntry) -> dict[str, BaselineEntry]:
    return {b.path: b for b in entries}


def classify(p: SyncPlan) -> dict[str, str]:
    """{path: classification}; fails if a path is classified twice."""
    out: dict[str, str] = {}
    for o in p.ops:
        assert o.path not in out, f"{o.path!r} classified twice"
        out[o.path] = o.kind
    for r in p.reports:
        assert r.path not in out, f"{r.path!r} classified twice"
        out[r.path] = f"conflict:{r.conflict_kind}" if r.kind == "conflict" else r.kind
    return out


# ---- running the indexer as an unprivileged user ---------------------------------------

NOBODY = 65534
_INDEX_SCRIPT = """
import json, sys, time
from pathlib import Path
from placet.sync.cache import MemoryDigestCache
from placet.sync.indexer import index_local
from placet.sync.local_tree import LocalTree
root, rel, types = sys.argv[1], sys.argv[2], [t for t in sys.argv[3].split(",") if t]
res = index_local(LocalTree(Path(root), rel, digest_types=types, cache=MemoryDigestCache(),
                            root_key="k", now_ns=time.time_ns() + 10**10))
json.dump([e.to_dict() for e in res.entries], sys.stdout, ensure_ascii=True)
"""


def public_dir() -> Path:
    """A fresh folder under /tmp that an unprivileged user can traverse (pytest's own
    tmp_path sits under a 0700 folder)."""
    d = Path(tempfile.mkdtemp(prefix="placet-test-", dir="/tmp"))
    d.chmod(0o755)
    return d


def make_public(root: Path) -> None:
    """Let `nobody` read everything under `root` (tests run as root with umask 022 or 077)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p) and os.path.isfile(p):
                os.chmod(p, 0o644)


def index_as_nobody(root: Path, rel: str = "", digest_types: str = "sha1") -> list[LocalEntry]:
    """Run `index_local` in a subprocess dropped to uid/gid 65534 (root reads everything,
    so a permission test run as root proves nothing)."""
    out = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-c",
            _INDEX_SCRIPT,
            str(root),
            rel,
            digest_types,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
    )
    return [LocalEntry.from_dict(d) for d in json.loads(out.stdout)]
