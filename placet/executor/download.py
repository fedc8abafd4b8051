"""The download op: remote file -> new temp file under the destination's directory
descriptor -> verified -> fsynced -> renamed into place (docs/design.md sections 4, 6, 9).

The destination folder is opened by descriptor walk from the root; already_done is asked
first, then stale. An existing local target is replaced only if the proposal asked, the
root's policy allows it now and the file is still the one the owner saw (the replaced
file goes to placet's trash). `rclone cat` streams into an ``O_EXCL|O_NOFOLLOW`` temp file
(journaled first), hashed as it arrives and compared before a no-replace rename, so a
name only receives approved bytes. Containment holds to the rename: the folder must not be
one of placet's own and must still be the one the root's walk reaches
(``destination_moved``; docs/decisions/0028-risk-and-own-folders.md)."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import Any

from placet.config import Settings
from placet.errors import AlreadyExists, NotFound, PathRefused, PlacetError, PolicyRefused
from placet.executor.checks import (
    RemoteProbe,
    local_as_seen,
    local_found,
    remote_as_seen,
    remote_found,
)
from placet.executor.progress import OpOutcome
from placet.executor.steps import OpContext, failed, stale
from placet.local import atomic, hashing, walk
from placet.paths.local import check_local_shape
from placet.paths.roots import PlacetDirs
from placet.schema import LocalFileEvidence, Op, RemoteEvidence
from placet.text import quote


def _holds_approved(
    dir_fd: int,
    name: str,
    st: os.stat_result,
    src: RemoteEvidence,
    seen: LocalFileEvidence | None,
    probe: RemoteProbe,
) -> str | None:
    """How the local target is known to hold the approved bytes, or None if it does not.

    A target unchanged since the proposal holds what the evidence recorded, so it is
    compared by digest without reading it; otherwise it is hashed.
    """
    if not stat.S_ISREG(st.st_mode) or src.size is None or st.st_size != src.size:
        return None
    if seen is not None and local_as_seen(st, seen):
        same = seen.digest_type == src.digest_type and seen.digest is not None
        return f"digest:{src.digest_type}" if same and seen.digest == src.digest else None
    try:
        fd, _ = walk.open_regular_at(dir_fd, name)
    except PlacetError:
        return None
    try:
        if src.digest_type and src.digest:
            got = hashing.hash_fd(fd, [src.digest_type])[src.digest_type]
            return _verified_by(src) if got == src.digest.lower() else None
        if not remote_as_seen(probe, src):
            return None
        local_sha = hashing.sha256_fd(fd)[0]
        return "readback:sha256" if local_sha == probe.readback_sha256() else None
    finally:
        os.close(fd)


def _verified_by(src: RemoteEvidence) -> str:
    """How bytes matching the evidence are known to be the approved ones: the remote's
    digest, the SHA-256 of the bytes placet read at proposal time (``readback:sha256``,
    a remote without digests), or, for evidence recorded without either, size only."""
    if src.read_by_placet:
        return "readback:sha256"
    return f"digest:{src.digest_type}" if src.digest else "size"


def run_download(ctx: OpContext, op: Op) -> OpOutcome:
    """Download `op.remote_path` to `op.local_path` in the root; see the module docstring."""
    src = op.expected_remote
    if src is None or op.local_path is None or ctx.root is None or not op.remote_path:
        raise PlacetError(
            f"download op {op.index} has no source, target or evidence; the request is malformed",
            code="request_invalid",
        )
    parts = check_local_shape(op.local_path).parts
    if not parts:
        raise PathRefused(
            "refusing to download onto the root folder itself", code="not_regular_file"
        )
    parent, name = parts[:-1], parts[-1]
    root_fd = walk.open_root(ctx.root)
    try:
        dir_fd = walk.open_dir_under(root_fd, parent, create=ctx.proposal_kind == "sync")
    finally:
        os.close(root_fd)
    try:
        _refuse_placet_folder(ctx, dir_fd, op.local_path)
        return _download_in(ctx, op, src, dir_fd, parent, name)
    finally:
        os.close(dir_fd)


def _placet_folder_holding(dir_fd: int, settings: Settings) -> Path | None:
    """The placet folder (`PlacetDirs`) that the folder `dir_fd` is or lies inside, found
    by (st_dev, st_ino) while walking ``..`` up to the filesystem root, so neither a
    symlink, a bind mount nor a rename can hide it; None when there is none."""
    own: dict[tuple[int, int], Path] = {}
    for _what, path, _fix in PlacetDirs.of(settings).folders:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            own[(st.st_dev, st.st_ino)] = path
    if not own:
        return None
    fd = os.dup(dir_fd)
    try:
        for _ in range(4096):
            st = os.fstat(fd)
            hit = own.get((st.st_dev, st.st_ino))
            if hit is not None:
                return hit
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            ust = os.fstat(up)
            os.close(fd)
            fd = up
            if (ust.st_dev, ust.st_ino) == (st.st_dev, st.st_ino):
                return None  # the filesystem root
        return None
    finally:
        os.close(fd)


def _refuse_placet_folder(ctx: OpContext, dir_fd: int, local_path: str) -> None:
    """Defence in depth behind the root rule of `placet.paths.local`: a download never writes
    into placet's data, config or database folder
    (docs/decisions/0028-risk-and-own-folders.md), e.g. from a root nominated under
    another PLACET_HOME than the one accepting.

    Raises:
        PathRefused (code ``placet_own_path``).
    """
    own = _placet_folder_holding(dir_fd, ctx.settings)
    if own is not None:
        raise PathRefused(
            f"refusing to write local {quote(local_path)}: its folder is, or lies inside, "
            f"placet's own folder {quote(str(own))} (settings, database or audit records); "
            "nothing was written: discard this proposal and start placet serve with a "
            "--root apart from placet's folders",
            code="placet_own_path",
            details={"path": local_path, "placet_folder": str(own)},
        )


def _recheck_destination(ctx: OpContext, dir_fd: int, parent: tuple[str, ...], shown: str) -> None:
    """Just before the final rename: the folder held open as `dir_fd` must still be the
    one the root's descriptor walk reaches (same st_dev/st_ino), and still not a placet
    folder. A folder renamed out of the root (or swapped) during the transfer would
    otherwise receive the file outside the root.

    What remains is the window between this check and the rename (microseconds, not a
    transfer's length): POSIX offers no rename conditional on a directory's path.

    Raises:
        PathRefused (code ``destination_moved``), or ``root_changed`` / ``symlink_refused``
            / ``not_a_directory`` from the walk, or ``placet_own_path``.
    """
    assert ctx.root is not None
    held = os.fstat(dir_fd)
    root_fd = walk.open_root(ctx.root)
    try:
        try:
            again = walk.open_dir_under(root_fd, parent)
        except NotFound as e:
            raise _moved(shown, ctx.root.path) from e
    finally:
        os.close(root_fd)
    try:
        now = os.fstat(again)
    finally:
        os.close(again)
    if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
        raise _moved(shown, ctx.root.path)
    _refuse_placet_folder(ctx, dir_fd, shown)


def _moved(shown: str, root_path: str) -> PathRefused:
    return PathRefused(
        f"refusing to write local {quote(shown)}: its folder was moved or replaced during the "
        f"transfer, so it may no longer lie inside the root {quote(root_path)}; nothing was "
        "written under the target name (the temporary file was removed): check the folder "
        "and accept again",
        code="destination_moved",
        details={"path": shown, "root": root_path},
    )


def _download_in(
    ctx: OpContext, op: Op, src: RemoteEvidence, dir_fd: int, parent: tuple[str, ...], name: str
) -> OpOutcome:
    assert op.local_path is not None and op.remote_path is not None and ctx.root is not None
    probe = RemoteProbe(ctx.drive, op.remote_path)
    seen = op.expected_local
    st = walk.lstat_at(dir_fd, name)
    if st is not None:
        how = _holds_approved(dir_fd, name, st, src, seen, probe)
        if how is not None:
            return OpOutcome(
                "already_done",
                {
                    "local_path": op.local_path,
                    "size": st.st_size,
                    "digest_type": src.digest_type,
                    "digest": src.digest,
                    "verification": how,
                },
            )
    if not remote_as_seen(probe, src, streamed=True):
        return stale(
            "remote",
            op.remote_path,
            src.model_dump(mode="json"),
            remote_found(probe, src.digest_type),
            "changed",
        )
    policy = ctx.settings.download_policy(Path(ctx.root.path))
    replacing = st is not None
    if st is not None:
        if not op.replace:
            return failed(
                AlreadyExists(
                    f"refusing to write local {quote(op.local_path)}: a file appeared there "
                    "after the proposal, which did not ask to overwrite; nothing was "
                    "changed: move it away and accept again, or ask for a new proposal",
                    details={"path": op.local_path, "found": local_found(st)},
                )
            )
        if policy != "allow-overwrite":
            return failed(
                PolicyRefused(
                    f"refusing to overwrite local {quote(op.local_path)}: the root's policy is "
                    f'downloads = {policy!r}; set downloads = "allow-overwrite" for '
                    f"{quote(ctx.root.path)} in config.toml, then accept again",
                    details={"path": op.local_path, "policy": policy},
                )
            )
        if seen is None or not stat.S_ISREG(st.st_mode) or not local_as_seen(st, seen):
            why = "appeared" if seen is None else "changed"
            expected = None if seen is None else seen.model_dump(mode="json")
            return stale("local", op.local_path, expected, local_found(st), why)
    elif seen is not None:
        return stale("local", op.local_path, seen.model_dump(mode="json"), {"exists": False},
                     "vanished")  # fmt: skip
    return _transfer(ctx, op, src, dir_fd, parent, name, replacing)


def _transfer(
    ctx: OpContext,
    op: Op,
    src: RemoteEvidence,
    dir_fd: int,
    parent: tuple[str, ...],
    name: str,
    replacing: bool,
) -> OpOutcome:
    assert op.local_path is not None and op.remote_path is not None
    rel_parent = "/".join(parent)
    started = time.monotonic()
    fd, temp = atomic.create_temp_file(dir_fd, name)
    committed = False
    try:
        ctx.journal_temp("local", f"{rel_parent}/{temp}" if rel_parent else temp)
        result = ctx.drive.download_to_fd(op.remote_path, fd, progress=ctx.progress)
        got: dict[str, Any] = {"size": result.size}
        if src.digest_type:
            got["digest_type"] = src.digest_type
            got["digest"] = result.digest_by_type.get(src.digest_type)
        bad_size = src.size is not None and result.size != src.size
        bad_digest = (
            bool(src.digest_type and src.digest) and got.get("digest") != (src.digest or "").lower()
        )
        if bad_size or bad_digest:
            return stale(
                "remote", op.remote_path, src.model_dump(mode="json"), got,
                "changed while it was downloaded (nothing was written under the target name)",
            )  # fmt: skip
        _recheck_destination(ctx, dir_fd, parent, op.local_path)
        trashed = atomic.commit_temp_file(
            dir_fd,
            temp,
            name,
            overwrite=replacing,
            trash_dir=ctx.settings.trash_dir,
            fd=fd,
        )
        committed = True
    except AlreadyExists as e:
        return failed(e, local_path=op.local_path)
    except NotFound as e:
        return stale("remote", op.remote_path, src.model_dump(mode="json"), {"exists": False},
                     f"vanished ({e.message})")  # fmt: skip
    finally:
        os.close(fd)
        if not committed:
            with contextlib.suppress(OSError, PlacetError):
                atomic.discard_temp_file(dir_fd, temp)
    return OpOutcome(
        "done",
        {
            "local_path": op.local_path,
            "size": result.size,
            "sha256": result.sha256,
            "digest_type": src.digest_type,
            "digest": got.get("digest"),
            "remote_digest": src.digest,
            "verification": _verified_by(src),
            "replaced": replacing,
            "trash_path": str(trashed) if trashed else None,
            "seconds": round(time.monotonic() - started, 3),
        },
    )
