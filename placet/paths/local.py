"""Local paths: which root-relative or absolute local paths an agent may name.

Decided before anything is stored or touched (docs/design.md sections 6 and 9): first
the **shape**, without the disk (``..``, backslashes, NUL and control characters, drive
letters, UNC prefixes, Windows device names, components over 255 bytes, depth over 16,
length over 4096 bytes); then the path is ``realpath``-resolved and must lie inside its
root by whole components, and every component is ``lstat``-ed from the root down with any
symlink refused, even one pointing inside. This check is advisory: `placet.local.walk`
repeats it by descriptor at execution, which closes the race. A component starting with
``.placet-tmp-`` is ``path_reserved``. Every refusal is a `PathRefused` naming the path
(inert) and saying what to do instead. Stdlib only."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath

from placet.errors import NotFound, PathRefused
from placet.names import check_not_reserved
from placet.paths.roots import Root, find_root, is_within
from placet.paths.shape import MAX_COMPONENT_BYTES, control_char, invalid_path, utf8_len
from placet.text import inert, quote

__all__ = [
    "MAX_LOCAL_DEPTH",
    "MAX_LOCAL_PATH_BYTES",
    "check_local_shape",
    "resolve_local",
]

MAX_LOCAL_DEPTH = 16
MAX_LOCAL_PATH_BYTES = 4096

_DRIVE_LETTER = re.compile(r"[A-Za-z]:")
# Windows reserves these names with any extension and trailing dots/spaces; the digit
# may also be a superscript 1-3.
_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{p}{d}" for p in ("COM", "LPT") for d in "123456789\u00b9\u00b2\u00b3"}
)


def _is_device_name(component: str) -> bool:
    stem = component.split(".", 1)[0].rstrip(" ")
    return stem.upper() in _DEVICE_NAMES


def _check_local_components(path: str, parts: Sequence[str]) -> None:
    if len(parts) > MAX_LOCAL_DEPTH:
        raise invalid_path(
            path,
            f"it is {len(parts)} levels deep; the limit is {MAX_LOCAL_DEPTH}",
            "name a shallower path",
        )
    for part in parts:
        if part == "..":
            raise invalid_path(
                path, "it contains '..'", "name the path from the root down, without '..'"
            )
        if utf8_len(part) > MAX_COMPONENT_BYTES:
            raise invalid_path(
                path,
                f"a component is {utf8_len(part)} bytes long; the limit is "
                f"{MAX_COMPONENT_BYTES} bytes of UTF-8",
                "use shorter names",
            )
        if _is_device_name(part):
            raise invalid_path(
                path,
                f"{quote(part)} is a reserved Windows device name",
                "rename the file or folder",
            )


def _check_local_chars(path: str) -> None:
    if len(path) > MAX_LOCAL_PATH_BYTES or utf8_len(path) > MAX_LOCAL_PATH_BYTES:
        raise invalid_path(
            path[:200],
            f"it is longer than {MAX_LOCAL_PATH_BYTES} bytes",
            "name a shorter path",
        )
    bad = control_char(path)
    if bad is not None:
        raise invalid_path(
            path,
            f"it contains the control or invalid character {inert(bad)}",
            "name the file by its plain name",
        )
    if "\\" in path:
        raise invalid_path(
            path, "it contains a backslash", "separate folders with '/' (POSIX paths only)"
        )
    if _DRIVE_LETTER.match(path):
        raise invalid_path(
            path, "it starts with a drive letter", "give a path relative to a root, with '/'"
        )


def check_local_shape(rel: str) -> PurePosixPath:
    """Check a root-relative local path by shape alone (no disk access).

    Returns:
        The normalised relative path (``"a//b/./c"`` becomes ``a/b/c``); ``""`` and
        ``"."`` give ``PurePosixPath(".")``, the root itself (``parts == ()``).

    Raises:
        PathRefused (code ``path_invalid``): absolute (leading ``/``; `resolve_local`
            accepts absolute paths), a ``..`` component, backslash, NUL or another
            control character, a lone surrogate, a drive letter (``C:``), a UNC prefix,
            a Windows device name (``CON``, ``nul.txt``, ``com1``...), a component over
            255 bytes of UTF-8, more than 16 components, more than 4096 bytes.
    """
    _check_local_chars(rel)
    if rel.startswith("/"):
        if rel.startswith("//"):
            raise invalid_path(rel, "it is a UNC or network path", "give a path relative to a root")
        raise invalid_path(
            rel,
            "it is absolute where a root-relative path is expected",
            "give the path relative to the root",
        )
    pure = PurePosixPath(rel)
    _check_local_components(rel, pure.parts)
    return pure


def _split_absolute(roots: Sequence[Root], path: str, root_name: str | None) -> tuple[Root, str]:
    if path.startswith("//"):
        raise invalid_path(path, "it is a UNC or network path", "give a path inside a root")
    pure = PurePosixPath(path)
    if ".." in pure.parts:
        raise invalid_path(path, "it contains '..'", "name the path from the root down")
    candidates = [find_root(roots, root_name)] if root_name is not None else list(roots)
    inside = [r for r in candidates if is_within(os.fspath(pure), r.path)]
    if not inside and root_name is not None:
        # The path is in another root than the one named: say which, not "outside".
        owners = [r for r in roots if is_within(os.fspath(pure), r.path)]
        if owners:
            owner = max(owners, key=lambda r: len(r.path.parts))
            named = candidates[0]
            raise PathRefused(
                f"refusing path {quote(path)} with root={quote(root_name)}: it lies in the root "
                f"{quote(owner.name)} ({quote(str(owner.path))}), not in {quote(named.name)} "
                f"({quote(str(named.path))}); pass root={quote(owner.name)}, or omit root",
                code="path_outside_root",
                details={"path": path, "root": named.name, "path_root": owner.name},
            )
    if not inside:
        where = ", ".join(f"{r.name}={quote(str(r.path))}" for r in candidates)
        raise PathRefused(
            f"refusing path {quote(path)}: it is outside every local root ({where}); "
            "name a path inside a root, or ask the owner to add one with --root",
            code="path_outside_root",
            details={"path": path, "roots": [str(r.path) for r in candidates]},
        )
    # Nested roots: the deepest one owns the path.
    root = max(inside, key=lambda r: len(r.path.parts))
    return root, os.path.relpath(os.fspath(pure), root.path)


def resolve_local(
    roots: Sequence[Root], path: str, root_name: str | None = None, *, must_exist: bool = True
) -> tuple[Root, PurePosixPath]:
    """Resolve an agent-named local path to (root, path relative to it), checking it.

    `path` is relative to the root named `root_name` (the first root when None), or
    absolute, in which case it must lie (lexically, by whole components) inside the named
    root or, with no name, inside some root; the deepest matching root is chosen.
    Then: shape rules (`check_local_shape`), realpath containment, root identity,
    and an ``lstat`` of every component from the root down.

    Args:
        must_exist: when False, a missing tail is allowed (a download target); the
            existing part is still checked.

    Returns:
        The root and the normalised relative path (``parts == ()`` for the root itself).

    Raises:
        PathRefused: ``root_unknown`` (no such root name), ``path_invalid`` (shape),
            ``path_outside_root`` (absolute path under no root, or the resolved path
            escapes the root, e.g. through a symlink pointing outside),
            ``symlink_refused`` (any component is a symlink, even pointing inside),
            ``not_a_directory`` (a non-final component is a file), ``root_changed``
            (the root directory is gone or was replaced), ``path_reserved`` (a component
            starts with ``.placet-tmp-``, placet's temporary files).
        NotFound: the path does not exist and `must_exist` is True.
    """
    if not roots:
        raise PathRefused(
            "no local root is configured; the owner must start placet with --root DIR",
            code="root_unknown",
        )
    _check_local_chars(path)
    if path.startswith("/"):
        root, rel_str = _split_absolute(roots, path, root_name)
        rel = check_local_shape("" if rel_str == "." else rel_str)
    else:
        root = find_root(roots, root_name) if root_name is not None else roots[0]
        rel = check_local_shape(path)

    check_not_reserved(rel.as_posix())
    _check_root_identity(root)
    joined = root.path.joinpath(*rel.parts)
    resolved = os.path.realpath(joined)
    if not is_within(resolved, root.path):
        raise PathRefused(
            f"refusing path {quote(path)}: it resolves to {quote(resolved)}, outside the root "
            f"{root.name}={quote(str(root.path))}; name a real file inside the root",
            code="path_outside_root",
            details={"path": path, "resolved": resolved, "root": root.name},
        )
    _lstat_walk(root, rel, path, must_exist=must_exist)
    return root, rel


def _check_root_identity(root: Root) -> None:
    try:
        st = os.lstat(root.path)
        ok = stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (root.device, root.inode)
        why = "it was replaced"
    except OSError as e:
        ok, why = False, e.strerror or "it cannot be read"
    if not ok:
        raise PathRefused(
            f"the local root {root.name}={quote(str(root.path))} is no longer the folder the "
            f"owner nominated ({why}); restart placet with the right --root",
            code="root_changed",
            details={"root": root.name, "path": str(root.path)},
        )


def _lstat_walk(root: Root, rel: PurePosixPath, path: str, *, must_exist: bool) -> None:
    current = root.path
    for i, part in enumerate(rel.parts):
        current = current / part
        shown = "/".join(rel.parts[: i + 1])
        try:
            st = os.lstat(current)
        except FileNotFoundError as e:
            if must_exist:
                raise NotFound(
                    f"local path {quote(path)} does not exist in root {root.name} "
                    f"({quote(shown)} is missing); check the name with local_index",
                    details={"path": path, "missing": shown, "root": root.name},
                ) from e
            return
        except NotADirectoryError as e:  # a parent checked below; kept for races
            raise _not_a_dir(path, shown, root) from e
        if stat.S_ISLNK(st.st_mode):
            raise PathRefused(
                f"refusing path {quote(path)}: {quote(shown)} is a symbolic link; placet never "
                "follows links in a root, even ones pointing inside: name the real path",
                code="symlink_refused",
                details={"path": path, "link": shown, "root": root.name},
            )
        if i < len(rel.parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise _not_a_dir(path, shown, root)


def _not_a_dir(path: str, shown: str, root: Root) -> PathRefused:
    return PathRefused(
        f"refusing path {quote(path)}: {quote(shown)} is not a folder; check the path",
        code="not_a_directory",
        details={"path": path, "component": shown, "root": root.name},
    )
