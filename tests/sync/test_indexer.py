"""The local indexer on real folders: kinds, digests, the cache, races, permissions."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placet.errors import LimitExceeded, NotFound, PathRefused, UsageError
from placet.paths.local import MAX_LOCAL_DEPTH
from placet.sync.cache import MemoryDigestCache
from placet.sync.entries import LocalEntry
from placet.sync.index_file import RACY_WINDOW_NS, IndexResult
from placet.sync.indexer import index_local
from placet.sync.local_tree import LocalTree
from tests.support.listings import index_as_nobody, make_public, public_dir

SETTLED = 10 * RACY_WINDOW_NS  # a scan clock far enough ahead that every file is settled


def idx(
    root: Path,
    rel: str = "",
    cache: MemoryDigestCache | None = None,
    *,
    now_ns: int | None = None,
    types: tuple[str, ...] = ("sha1",),
    **kw: object,
) -> IndexResult:
    tree = LocalTree(
        root,
        rel,
        digest_types=types,
        cache=cache if cache is not None else MemoryDigestCache(),
        root_key="root",
        now_ns=time.time_ns() + SETTLED if now_ns is None else now_ns,
        **kw,  # type: ignore[arg-type]
    )
    return index_local(tree)


def by_path(res: IndexResult) -> dict[str, LocalEntry]:
    return {e.path: e for e in res.entries}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"hello")
    (root / "empty").write_bytes(b"")
    (root / "sub" / "b.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    (root / ".env").write_text("SECRET=1")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x")
    return root


def test_entries_kinds_and_digests(tree: Path) -> None:
    res = idx(tree, types=("sha1", "md5"))
    got = by_path(res)
    assert list(got) == sorted(got)
    assert set(got) == {"a.txt", "empty", "sub", "sub/b.bin", "sub/deeper"}
    a = got["a.txt"]
    assert a.kind == "file" and a.size == 5 and a.verified
    assert a.sha256 == hashlib.sha256(b"hello").hexdigest()
    assert (a.digest_type, a.digest) == ("sha1", hashlib.sha1(b"hello").hexdigest())
    big = (tree / "sub" / "b.bin").read_bytes()
    assert got["sub/b.bin"].sha256 == hashlib.sha256(big).hexdigest()
    assert got["empty"].sha256 == hashlib.sha256(b"").hexdigest()
    assert got["sub"].kind == "dir"
    assert res.hashed_count == 3 and res.cache_hits == 0
    assert res.bytes_hashed == 5 + len(big)


def test_hidden_included_on_request(tree: Path) -> None:
    got = by_path(idx(tree, include_hidden=True))
    assert {".env", ".git", ".git/config"} <= set(got)


def test_sha256_remote_type_and_no_remote_type(tree: Path) -> None:
    a = by_path(idx(tree, types=("SHA256",)))["a.txt"]
    assert (a.digest_type, a.digest) == ("sha256", a.sha256)
    a = by_path(idx(tree, types=()))["a.txt"]
    assert (a.digest_type, a.digest) == (None, None)
    with pytest.raises(UsageError, match="whirlpool"):
        idx(tree, types=("whirlpool",))


def test_single_worker_gives_the_same_entries(tree: Path) -> None:
    assert idx(tree, workers=1).entries == idx(tree, workers=4).entries


def test_warm_reindex_hashes_nothing(tree: Path) -> None:
    cache = MemoryDigestCache()
    cold = idx(tree, cache=cache)
    warm = idx(tree, cache=cache)
    assert cold.hashed_count == 3
    assert warm.hashed_count == 0 and warm.cache_hits == 3
    assert warm.entries == cold.entries


def test_cache_of_the_root_serves_a_subfolder(tree: Path) -> None:
    cache = MemoryDigestCache()
    idx(tree, cache=cache)
    sub = idx(tree, "sub", cache=cache)
    assert sub.hashed_count == 0 and sub.cache_hits == 1
    assert [e.path for e in sub.entries] == ["b.bin", "deeper"]


def test_cache_needs_every_requested_type(tree: Path) -> None:
    cache = MemoryDigestCache()
    idx(tree, cache=cache, types=("sha1",))
    res = idx(tree, cache=cache, types=("md5",))
    assert res.hashed_count == 3
    assert by_path(res)["a.txt"].digest == hashlib.md5(b"hello").hexdigest()


def test_racily_clean_file_is_hashed_until_settled(tmp_path: Path) -> None:
    f = tmp_path / "fresh.txt"
    f.write_text("just written")
    cache = MemoryDigestCache()
    now = time.time_ns()
    first = idx(tmp_path, cache=cache, now_ns=now)
    assert first.hashed_count == 1
    assert first.entries[0].verified is False
    assert cache.get("root", "fresh.txt") is not None
    assert cache.get("root", "fresh.txt").verified is False  # type: ignore[union-attr]
    assert idx(tmp_path, cache=cache, now_ns=now).hashed_count == 1  # still racy
    later = now + RACY_WINDOW_NS + 1
    settled = idx(tmp_path, cache=cache, now_ns=later)
    assert settled.hashed_count == 1 and settled.entries[0].verified
    assert idx(tmp_path, cache=cache, now_ns=later).hashed_count == 0


def _wait_for_new_ctime(path: Path, old_ctime: int) -> None:
    """Rewrite precondition: the kernel's coarse clock must have ticked past `old_ctime`."""
    deadline = time.monotonic() + 5
    while os.stat(path).st_ctime_ns == old_ctime and time.monotonic() < deadline:
        time.sleep(0.01)
        os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns))


def test_same_size_and_mtime_rewrite_is_caught_by_ctime(tmp_path: Path) -> None:
    f = tmp_path / "doc.txt"
    f.write_bytes(b"version one")
    os.utime(f, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    cache = MemoryDigestCache()
    first = idx(tmp_path, cache=cache)
    st1 = os.stat(f)
    time.sleep(0.02)
    with open(f, "r+b") as fh:  # in place: same inode
        fh.write(b"version two")
    os.utime(f, ns=(st1.st_atime_ns, st1.st_mtime_ns))
    _wait_for_new_ctime(f, st1.st_ctime_ns)
    st2 = os.stat(f)
    assert (st2.st_size, st2.st_mtime_ns, st2.st_ino) == (st1.st_size, st1.st_mtime_ns, st1.st_ino)
    second = idx(tmp_path, cache=cache)
    assert second.hashed_count == 1
    assert second.entries[0].sha256 == hashlib.sha256(b"version two").hexdigest()
    assert second.entries[0].sha256 != first.entries[0].sha256


def test_replace_by_rename_is_caught_by_inode(tmp_path: Path) -> None:
    f = tmp_path / "doc.txt"
    f.write_bytes(b"version one")
    cache = MemoryDigestCache()
    idx(tmp_path, cache=cache)
    st1 = os.stat(f)
    tmp = tmp_path / "doc.tmp"
    tmp.write_bytes(b"version two")
    os.utime(tmp, ns=(st1.st_atime_ns, st1.st_mtime_ns))
    os.replace(tmp, f)
    assert os.stat(f).st_ino != st1.st_ino
    res = idx(tmp_path, cache=cache)
    assert res.hashed_count == 1
    assert res.entries[0].sha256 == hashlib.sha256(b"version two").hexdigest()


@pytest.mark.timeout(30)
def test_specials_are_skipped_unopened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")  # opening it for reading would block forever
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "inside.txt").write_text("x")
    (tmp_path / "link-dir").symlink_to(tmp_path / "target")
    (tmp_path / "link-file").symlink_to(tmp_path / "target" / "inside.txt")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "target" / "up").symlink_to("..")
    try:
        got = by_path(idx(tmp_path))
    finally:
        sock.close()
    notes = {p: e.note for p, e in got.items() if e.kind == "skipped"}
    assert notes == {
        "pipe": "fifo: not synced",
        "sock": "socket: not synced",
        "link-dir": "symlink: not synced",
        "link-file": "symlink: not synced",
        "loop1": "symlink: not synced",
        "loop2": "symlink: not synced",
        "target/up": "symlink: not synced",
    }
    assert not any(p.startswith("link-dir/") for p in got)


def test_device_node_skipped(tmp_path: Path) -> None:
    try:
        os.mknod(tmp_path / "null", 0o600 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod not permitted in this container")
    assert by_path(idx(tmp_path))["null"].note == "character device: not synced"


def test_hard_linked_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / "c").write_text("y")
    got = by_path(idx(tmp_path))
    assert got["a"].kind == got["b"].kind == "skipped"
    assert got["a"].note.startswith("2 hard links")
    assert got["a"].sha256 is None
    assert got["c"].kind == "file"


def test_nfd_name_keeps_raw_path(tmp_path: Path) -> None:
    (tmp_path / "cafe\u0301.txt").write_text("x")
    (e,) = idx(tmp_path).entries
    assert e.path == "caf\u00e9.txt" and e.raw_path == "cafe\u0301.txt"


def test_non_utf8_name_is_an_error(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xffname"), "wb") as f:
        f.write(b"x")
    (e,) = idx(tmp_path).entries
    assert e.kind == "error" and "not valid UTF-8" in e.note
    assert os.fsencode(e.raw_path) == b"bad\xffname"


def test_depth_limit(tmp_path: Path) -> None:
    d = tmp_path
    for i in range(MAX_LOCAL_DEPTH + 1):
        d = d / f"d{i}"
    d.mkdir(parents=True)
    got = by_path(idx(tmp_path))
    deepest = max(got, key=lambda p: p.count("/"))
    assert deepest.count("/") == MAX_LOCAL_DEPTH - 1
    assert got[deepest].kind == "error" and "deeper than" in got[deepest].note


def test_entry_cap(tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"f{i}").write_text(str(i))
    with pytest.raises(LimitExceeded):
        idx(tmp_path, entry_cap=5)
    assert len(idx(tmp_path, entry_cap=6).entries) == 6


def test_rel_refusals(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "file").write_text("x")
    with pytest.raises(PathRefused) as ei:
        idx(tmp_path, "link")
    assert ei.value.error_code == "symlink_refused"
    with pytest.raises(PathRefused):
        idx(tmp_path, "file")
    with pytest.raises(PathRefused) as ei:
        idx(tmp_path, "real/../..")
    assert ei.value.error_code == "path_invalid"
    with pytest.raises(NotFound):
        idx(tmp_path, "missing")


@pytest.fixture
def public() -> Iterator[Path]:
    d = public_dir()
    yield d
    shutil.rmtree(d)


def test_unreadable_folder_and_file_as_unprivileged_user(public: Path) -> None:
    (public / "locked").mkdir()
    (public / "locked" / "inner.txt").write_text("hidden from nobody")
    (public / "open").mkdir()
    (public / "open" / "ok.txt").write_text("fine")
    (public / "secret.txt").write_text("no")
    make_public(public)
    (public / "locked").chmod(0o000)
    (public / "secret.txt").chmod(0o600)
    got = {e.path: e for e in index_as_nobody(public)}
    assert set(got) == {"locked", "open", "open/ok.txt", "secret.txt"}
    assert got["locked"].kind == "error" and "Permission denied" in got["locked"].note
    assert got["secret.txt"].kind == "error" and "cannot open file" in got["secret.txt"].note
    assert got["open/ok.txt"].sha256 == hashlib.sha256(b"fine").hexdigest()


files = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d/e", "d/f", "g/h/i"]), st.binary(max_size=2000), min_size=1
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=files, workers=st.sampled_from([1, 3]))
def test_warm_reindex_hashes_zero_files_property(files: dict[str, bytes], workers: int) -> None:
    root = public_dir()
    try:
        for rel, data in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        cache = MemoryDigestCache()
        cold = idx(root, cache=cache, workers=workers)
        warm = idx(root, cache=cache, workers=workers)
        assert cold.hashed_count == len(files)
        assert warm.hashed_count == 0 and warm.cache_hits == len(files)
        assert warm.entries == cold.entries
        sums = {e.path: e.sha256 for e in warm.entries if e.kind == "file"}
        assert sums == {p: hashlib.sha256(d).hexdigest() for p, d in files.items()}
    finally:
        shutil.rmtree(root)
