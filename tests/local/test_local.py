"""Descriptor-walk I/O: races, FIFOs, hard links, swapped roots, no-clobber and trash."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from placet.errors import AlreadyExists, NotFound, PathRefused
from placet.local import atomic, walk
from placet.local.atomic import commit_temp_file, create_temp_file, discard_temp_file, is_temp_name
from placet.local.hashing import hash_fd, hash_fd_sized, sha256_fd
from placet.local.walk import open_dir_under, open_file_for_read, open_root
from placet.names import TEMP_PREFIX
from placet.paths.local import resolve_local
from placet.paths.roots import Root, parse_roots


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_bytes(b"inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.txt").write_bytes(b"SECRET")
    return tmp_path


@pytest.fixture
def root(base: Path, placet_home: Path) -> Root:
    return parse_roots([f"main={base / 'root'}"], placet_home)[0]


@pytest.fixture
def root_fd(root: Root) -> Iterator[int]:
    fd = open_root(root)
    yield fd
    os.close(fd)


def read_all(fd: int) -> bytes:
    return os.pread(fd, 1 << 20, 0)


def test_open_file_for_read_reads_and_is_blocking(root: Root) -> None:
    fd, st = open_file_for_read(root, "docs/a.txt")
    try:
        assert read_all(fd) == b"inside"
        assert st.st_size == 6 and stat.S_ISREG(st.st_mode)
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        os.close(fd)


def test_parent_swapped_for_symlink_after_check_is_refused(root: Root, base: Path) -> None:
    _, rel = resolve_local([root], "docs/a.txt")  # the proposal-time check passes
    # The race: between check and open, docs/ becomes a link to a folder outside.
    os.rename(base / "root" / "docs", base / "root" / "docs-real")
    os.symlink(base / "outside", base / "root" / "docs")
    before = open_fds()
    with pytest.raises(PathRefused) as ei:
        open_file_for_read(root, rel)
    assert ei.value.error_code == "symlink_refused"
    assert "SECRET" not in ei.value.message
    assert open_fds() == before  # no descriptor left open, so nothing outside was opened


def test_file_swapped_for_symlink_is_refused(root: Root, base: Path) -> None:
    target = base / "root" / "docs" / "a.txt"
    target.unlink()
    os.symlink(base / "outside" / "a.txt", target)
    with pytest.raises(PathRefused) as ei:
        open_file_for_read(root, "docs/a.txt")
    assert ei.value.error_code == "symlink_refused"


def test_fifo_is_refused_without_blocking(root: Root, base: Path) -> None:
    os.mkfifo(base / "root" / "docs" / "pipe")
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            fd, _ = open_file_for_read(root, "docs/pipe")
            os.close(fd)
            outcome.append(None)
        except PathRefused as e:
            outcome.append(e)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "open of a FIFO blocked"
    assert isinstance(outcome[0], PathRefused)
    assert outcome[0].error_code == "not_regular_file"


def test_socket_and_folder_are_not_regular_files(root: Root, base: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(base / "root" / "sock"))
        for name in ("sock", "docs", ""):
            with pytest.raises(PathRefused) as ei:
                open_file_for_read(root, name)
            assert ei.value.error_code == "not_regular_file", name
    finally:
        s.close()


def test_hard_linked_file_is_refused(root: Root, base: Path) -> None:
    os.link(base / "outside" / "a.txt", base / "root" / "docs" / "linked.txt")
    before = open_fds()
    with pytest.raises(PathRefused) as ei:
        open_file_for_read(root, "docs/linked.txt")
    assert ei.value.error_code == "hard_link_refused"
    assert ei.value.details["nlink"] == 2
    assert open_fds() == before


def test_missing_file_and_bad_shapes(root: Root) -> None:
    with pytest.raises(NotFound):
        open_file_for_read(root, "docs/nope.txt")
    with pytest.raises(NotFound):
        open_file_for_read(root, "nodir/a.txt")
    for bad in ("../root/docs/a.txt", "/etc/passwd", "docs\\a.txt"):
        with pytest.raises(PathRefused) as ei:
            open_file_for_read(root, bad)
        assert ei.value.error_code == "path_invalid"
    with pytest.raises(PathRefused) as ei:
        open_file_for_read(root, "docs/a.txt/x")
    assert ei.value.error_code == "not_a_directory"


def test_root_replaced_is_refused(root: Root, base: Path) -> None:
    os.rename(base / "root", base / "moved")
    (base / "root" / "docs").mkdir(parents=True)
    (base / "root" / "docs" / "a.txt").write_bytes(b"impostor")
    with pytest.raises(PathRefused) as ei:
        open_root(root)
    assert ei.value.error_code == "root_changed"
    with pytest.raises(PathRefused) as ei:
        open_file_for_read(root.to_ref(), "docs/a.txt")  # a stored RootRef works too
    assert ei.value.error_code == "root_changed"


def test_root_turned_into_symlink_or_removed_is_refused(root: Root, base: Path) -> None:
    os.rename(base / "root", base / "moved")
    os.symlink(base / "moved", base / "root")  # same dev/inode behind a link
    with pytest.raises(PathRefused) as ei:
        open_root(root)
    assert ei.value.error_code == "root_changed"
    os.unlink(base / "root")
    with pytest.raises(PathRefused) as ei:
        open_root(root)
    assert ei.value.error_code == "root_changed"


def test_open_dir_under_creates_private_dirs_and_refuses_links(root_fd: int, base: Path) -> None:
    fd = open_dir_under(root_fd, ["new", "deep"], create=True)
    os.close(fd)
    assert stat.S_IMODE(os.stat(base / "root" / "new" / "deep").st_mode) & 0o077 == 0
    os.symlink(base / "outside", base / "root" / "new" / "link")
    with pytest.raises(PathRefused) as ei:
        open_dir_under(root_fd, ["new", "link", "x"], create=True)
    assert ei.value.error_code == "symlink_refused"
    assert not (base / "outside" / "x").exists()  # create never went through the link
    with pytest.raises(NotFound):
        open_dir_under(root_fd, ["absent"])
    for bad in (["..", "x"], ["a/b"], [""]):
        with pytest.raises(PathRefused) as ei:
            open_dir_under(root_fd, bad)
        assert ei.value.error_code == "path_invalid"
    dup = open_dir_under(root_fd, [])
    assert dup != root_fd and os.fstat(dup).st_ino == os.fstat(root_fd).st_ino
    os.close(dup)


def test_create_temp_file_is_exclusive_and_private(
    root_fd: int, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(names))
    planted = f"{TEMP_PREFIX}{'0' * 16}-a.txt"
    os.symlink(base / "outside" / "a.txt", base / "root" / planted)
    fd, temp = create_temp_file(root_fd, "a.txt")
    try:
        assert temp == f"{TEMP_PREFIX}{'1' * 16}-a.txt"  # the planted link was skipped
        assert is_temp_name(temp)
        os.write(fd, b"new")
    finally:
        os.close(fd)
    assert (base / "outside" / "a.txt").read_bytes() == b"SECRET"
    st = os.lstat(base / "root" / temp)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    discard_temp_file(root_fd, temp)
    discard_temp_file(root_fd, temp)  # already gone: no error
    assert not (base / "root" / temp).exists()


def test_temp_name_pattern_truncates_long_names() -> None:
    name = atomic.temp_name_for("x" * 300)
    assert name.startswith(TEMP_PREFIX) and name.endswith("-" + "x" * 40)
    assert len(name.encode()) < 255


def _write_temp(dir_fd: int, final: str, data: bytes) -> tuple[int, str]:
    fd, temp = create_temp_file(dir_fd, final)
    os.write(fd, data)
    return fd, temp


def test_commit_without_overwrite_places_new_file(root_fd: int, base: Path) -> None:
    fd, temp = _write_temp(root_fd, "fresh.txt", b"fresh")
    try:
        assert (
            commit_temp_file(root_fd, temp, "fresh.txt", overwrite=False, trash_dir=None, fd=fd)
            is None
        )
    finally:
        os.close(fd)
    assert (base / "root" / "fresh.txt").read_bytes() == b"fresh"
    assert not (base / "root" / temp).exists()
    assert os.stat(base / "root" / "fresh.txt").st_nlink == 1


@pytest.mark.parametrize("mechanism", ["renameat2", "link"])
def test_no_clobber_commit_refuses_existing_target(
    root_fd: int, base: Path, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mechanism == "link":  # as on a kernel without renameat2
        monkeypatch.setattr(atomic, "_libc_renameat2", lambda: None)
    elif atomic._libc_renameat2() is None:
        pytest.skip("no renameat2 here")
    (base / "root" / "exists.txt").write_bytes(b"old")
    fd, temp = _write_temp(root_fd, "exists.txt", b"new")
    os.close(fd)
    with pytest.raises(AlreadyExists):
        commit_temp_file(root_fd, temp, "exists.txt", overwrite=False, trash_dir=None)
    assert (base / "root" / "exists.txt").read_bytes() == b"old"
    assert not (base / "root" / temp).exists()  # the temp was cleaned up
    fd, temp = _write_temp(root_fd, "other.txt", b"new")
    os.close(fd)
    commit_temp_file(root_fd, temp, "other.txt", overwrite=False, trash_dir=None)
    assert (base / "root" / "other.txt").read_bytes() == b"new"
    assert os.stat(base / "root" / "other.txt").st_nlink == 1


def test_no_clobber_refuses_a_dangling_symlink_target(root_fd: int, base: Path) -> None:
    os.symlink(base / "outside" / "planted.txt", base / "root" / "t.txt")
    fd, temp = _write_temp(root_fd, "t.txt", b"new")
    os.close(fd)
    with pytest.raises(AlreadyExists):
        commit_temp_file(root_fd, temp, "t.txt", overwrite=False, trash_dir=None)
    assert not (base / "outside" / "planted.txt").exists()


def test_overwrite_moves_old_to_trash(root_fd: int, base: Path, placet_home: Path) -> None:
    trash = placet_home / "trash"
    (base / "root" / "r.txt").write_bytes(b"old content")
    fd, temp = _write_temp(root_fd, "r.txt", b"new content")
    try:
        trashed = commit_temp_file(root_fd, temp, "r.txt", overwrite=True, trash_dir=trash, fd=fd)
    finally:
        os.close(fd)
    assert (base / "root" / "r.txt").read_bytes() == b"new content"
    assert trashed is not None and trashed.parent == trash
    assert trashed.read_bytes() == b"old content"
    assert trashed.name.endswith("-r.txt")
    assert stat.S_IMODE(os.stat(trash).st_mode) == 0o700
    assert os.stat(trashed).st_nlink == 1  # the old name was replaced, only the trash holds it
    # Overwrite with nothing to replace: no trash entry.
    fd, temp = _write_temp(root_fd, "n.txt", b"x")
    os.close(fd)
    assert commit_temp_file(root_fd, temp, "n.txt", overwrite=True, trash_dir=trash) is None
    with pytest.raises(Exception, match="trash_dir"):
        commit_temp_file(root_fd, temp, "n.txt", overwrite=True, trash_dir=None)


def test_overwrite_across_filesystems_copies_to_trash(root_fd: int, base: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(base).st_dev:
        pytest.skip("needs a second filesystem for the trash")
    trash = Path(tempfile.mkdtemp(dir=shm)) / "trash"
    try:
        (base / "root" / "r.txt").write_bytes(b"old" * 100_000)
        fd, temp = _write_temp(root_fd, "r.txt", b"new")
        os.close(fd)
        trashed = commit_temp_file(root_fd, temp, "r.txt", overwrite=True, trash_dir=trash)
        assert trashed is not None and trashed.read_bytes() == b"old" * 100_000
        assert (base / "root" / "r.txt").read_bytes() == b"new"
    finally:
        shutil.rmtree(trash.parent)


def test_overwrite_refuses_symlink_target(root_fd: int, base: Path, placet_home: Path) -> None:
    os.symlink(base / "outside" / "a.txt", base / "root" / "l.txt")
    fd, temp = _write_temp(root_fd, "l.txt", b"new")
    os.close(fd)
    with pytest.raises(PathRefused) as ei:
        commit_temp_file(root_fd, temp, "l.txt", overwrite=True, trash_dir=placet_home / "t")
    assert ei.value.error_code == "symlink_refused"
    assert (base / "outside" / "a.txt").read_bytes() == b"SECRET"
    assert not (base / "root" / temp).exists()


def test_hashes_match_hashlib_in_one_pass(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    p = tmp_path / "blob"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        os.lseek(fd, 5, os.SEEK_SET)
        digests, size = hash_fd_sized(fd, ["sha256", "sha1", "md5"], chunk=65536)
        assert size == len(data)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 5  # position untouched
        for t in ("sha256", "sha1", "md5"):
            assert digests[t] == hashlib.new(t, data).hexdigest()
        assert sha256_fd(fd) == (hashlib.sha256(data).hexdigest(), len(data))
        assert hash_fd(fd, ["sha1"]) == {"sha1": hashlib.sha1(data).hexdigest()}
        with pytest.raises(Exception, match="quickxor"):
            hash_fd(fd, ["quickxor"])
    finally:
        os.close(fd)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    fd = os.open(empty, os.O_RDONLY)
    try:
        assert sha256_fd(fd) == (hashlib.sha256(b"").hexdigest(), 0)
    finally:
        os.close(fd)


_AS_NOBODY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from placet.errors import PathRefused
    from placet.local.walk import open_file_for_read
    from placet.paths.roots import Root
    path, dev, ino, rel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    try:
        fd, st = open_file_for_read(Root("r", Path(path), dev, ino), rel)
    except PathRefused as e:
        print("refused", e.error_code)
    else:
        print("ok", st.st_size)
    """
)


def test_unreadable_file_is_refused_for_an_unprivileged_user() -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to drop privileges")
    top = Path(tempfile.mkdtemp(prefix="placet-perm-"))  # tmp_path is 0700: nobody cannot enter
    try:
        os.chmod(top, 0o755)
        (top / "open.txt").write_bytes(b"hello")
        (top / "closed.txt").write_bytes(b"private")
        os.chmod(top / "open.txt", 0o644)
        os.chmod(top / "closed.txt", 0o600)
        st = os.stat(top)

        def run(rel: str) -> str:
            proc = subprocess.run(
                [
                    "setpriv",
                    "--reuid=nobody",
                    "--regid=nogroup",
                    "--clear-groups",
                    sys.executable,
                    "-c",
                    _AS_NOBODY,
                    str(top),
                    str(st.st_dev),
                    str(st.st_ino),
                    rel,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
            )
            assert proc.returncode == 0, proc.stderr
            return proc.stdout.strip()

        assert run("open.txt") == "ok 5"  # the setup is reachable as nobody
        assert run("closed.txt") == "refused permission_denied"
    finally:
        shutil.rmtree(top)


def test_errno_mapping_reraises_unknown_errors(root_fd: int) -> None:
    err = OSError(errno.EIO, "I/O error")
    with pytest.raises(OSError) as ei:
        walk._refusal_for(root_fd, "x", "x", err)
    assert ei.value.errno == errno.EIO


def test_hash_errors_in_parallel_passes_propagate() -> None:
    r, w = os.pipe()  # pread on a pipe fails (ESPIPE) in every pass
    try:
        with pytest.raises(OSError) as ei:
            hash_fd_sized(r, ["sha256", "sha1"])
        assert ei.value.errno == errno.ESPIPE
    finally:
        os.close(r)
        os.close(w)


def test_parallel_hashes_over_many_lockstep_rounds(tmp_path: Path) -> None:
    data = os.urandom(200 * 4096 + 3)  # 200 chunks of 4 KiB: several barrier rounds
    p = tmp_path / "blob"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        digests, size = hash_fd_sized(fd, ["md5", "sha256", "sha1", "sha256"], chunk=4096)
    finally:
        os.close(fd)
    assert size == len(data)
    assert digests == {t: hashlib.new(t, data).hexdigest() for t in ("md5", "sha256", "sha1")}
