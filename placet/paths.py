"""Path rules: which local roots exist, which local and remote paths an agent may name.

An agent names paths; the owner nominated roots. This module decides, before anything is
stored or touched, whether a named path is acceptable (docs/design.md sections 6 and 9):

* **Roots** (`placet.roots`, re-exported here: `Root`, `PlacetDirs`, `parse_roots`...)
  are the folders the owner nominated; placet's own folders and the home are refused.
* **Local paths** are refused by *shape* first, without touching the disk: ``..``,
  backslashes, NUL and control characters, drive letters, UNC prefixes, Windows device
  names (a file named ``nul.txt`` cannot be synced to or from Windows), components over
  255 bytes, depth over 16, length over 4096 bytes. Shape rules are cheap, give the
  clearest messages, and hold whatever the disk looks like.
* Then the path is joined to its root and ``realpath``-resolved; the resolved path must
  lie inside the root, compared by whole components (``/tmp/root-evil`` is not inside
  ``/tmp/root``). Then every component is ``lstat``-ed from the root down and any
  symlink is refused, even one pointing inside: a link the agent can retarget between
  this check and the execution is a link placet would follow. This check is advisory;
  `placet.localfs` repeats it at execution by descriptor walk, which closes the race.
* **Remote paths** are relative to the drive root and only ever fill the
  path-within-the-drive slot of an rclone argument, so anything rclone could read as an
  option (leading ``-``) or as a remote prefix (``:``) is refused, with ``.``, ``..``,
  empty segments and control characters.
* **Reserved names**: no component of a local or remote path an agent names may start
  with ``.placet-tmp-`` (`RESERVED_PREFIX`): placet's temporary files bear it, hide it
  from listings and delete it in cleanup (``path_reserved``).

Every refusal is a `PathRefused` whose message names the path (escaped by
`placet.text.inert`) and says what to do instead. Stdlib only.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from placet.errors import NotFound, PathRefused
from placet.roots import (
    PlacetDirs,
    PlacetLocations,
    Root,
    find_root,
    parse_root_spec,
    parse_roots,
)
from placet.text import inert

__all__ = [
    "MAX_COMPONENT_BYTES",
    "MAX_LOCAL_DEPTH",
    "MAX_LOCAL_PATH_BYTES",
    "MAX_REMOTE_DEPTH",
    "RESERVED_PREFIX",
    "PlacetDirs",
    "PlacetLocations",
    "Root",
    "check_local_shape",
    "check_name",
    "check_not_reserved",
    "check_remote_path",
    "find_root",
    "is_reserved_name",
    "parse_root_spec",
    "parse_roots",
    "resolve_local",
]

MAX_COMPONENT_BYTES = 255
MAX_LOCAL_DEPTH = 16
MAX_LOCAL_PATH_BYTES = 4096
MAX_REMOTE_DEPTH = 64
RESERVED_PREFIX = ".placet-tmp-"
"""Names starting with this are placet's temporary files (`placet.localfs.TEMP_PREFIX`,
`placet.drive.base.TEMP_PREFIX`): hidden from listings and removed by cleanup, so an
agent may never name one, local or remote."""
_MAX_REMOTE_PATH_CHARS = MAX_REMOTE_DEPTH * (MAX_COMPONENT_BYTES + 1)

_DRIVE_LETTER = re.compile(r"[A-Za-z]:")
# Windows reserves these names with any extension and trailing dots/spaces; the digit
# may also be a superscript 1-3.
_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{p}{d}" for p in ("COM", "LPT") for d in "123456789\u00b9\u00b2\u00b3"}
)


def _q(path: str) -> str:
    return f"'{inert(path)}'"


def _invalid(path: str, what: str, instead: str, **details: object) -> PathRefused:
    return PathRefused(
        f"refusing path {_q(path)}: {what}; {instead}",
        code="path_invalid",
        details={"path": path, **details},
    )


def _is_within(child: Path | str, parent: Path | str) -> bool:
    """True if `child` is `parent` or lies below it, compared by whole components."""
    c, p = os.fspath(child), os.fspath(parent)
    return os.path.commonpath([c, p]) == p


def _has_control(s: str) -> str | None:
    for c in s:
        if unicodedata.category(c) in {"Cc", "Cs"}:
            return c
    return None


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _is_device_name(component: str) -> bool:
    stem = component.split(".", 1)[0].rstrip(" ")
    return stem.upper() in _DEVICE_NAMES


def _check_local_components(path: str, parts: Sequence[str]) -> None:
    if len(parts) > MAX_LOCAL_DEPTH:
        raise _invalid(
            path,
            f"it is {len(parts)} levels deep; the limit is {MAX_LOCAL_DEPTH}",
            "name a shallower path",
        )
    for part in parts:
        if part == "..":
            raise _invalid(
                path, "it contains '..'", "name the path from the root down, without '..'"
            )
        if _utf8_len(part) > MAX_COMPONENT_BYTES:
            raise _invalid(
                path,
                f"a component is {_utf8_len(part)} bytes long; the limit is "
                f"{MAX_COMPONENT_BYTES} bytes of UTF-8",
                "use shorter names",
            )
        if _is_device_name(part):
            raise _invalid(
                path,
                f"{_q(part)} is a reserved Windows device name",
                "rename the file or folder",
            )


def _check_local_chars(path: str) -> None:
    if len(path) > MAX_LOCAL_PATH_BYTES or _utf8_len(path) > MAX_LOCAL_PATH_BYTES:
        raise _invalid(
            path[:200],
            f"it is longer than {MAX_LOCAL_PATH_BYTES} bytes",
            "name a shorter path",
        )
    bad = _has_control(path)
    if bad is not None:
        raise _invalid(
            path,
            f"it contains the control or invalid character {inert(bad)}",
            "name the file by its plain name",
        )
    if "\\" in path:
        raise _invalid(
            path, "it contains a backslash", "separate folders with '/' (POSIX paths only)"
        )
    if _DRIVE_LETTER.match(path):
        raise _invalid(
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
            raise _invalid(rel, "it is a UNC or network path", "give a path relative to a root")
        raise _invalid(
            rel,
            "it is absolute where a root-relative path is expected",
            "give the path relative to the root",
        )
    pure = PurePosixPath(rel)
    _check_local_components(rel, pure.parts)
    return pure


def _split_absolute(roots: Sequence[Root], path: str, root_name: str | None) -> tuple[Root, str]:
    if path.startswith("//"):
        raise _invalid(path, "it is a UNC or network path", "give a path inside a root")
    pure = PurePosixPath(path)
    if ".." in pure.parts:
        raise _invalid(path, "it contains '..'", "name the path from the root down")
    candidates = [find_root(roots, root_name)] if root_name is not None else list(roots)
    inside = [r for r in candidates if _is_within(os.fspath(pure), r.path)]
    if not inside and root_name is not None:
        # The path is in another root than the one named: say which, not "outside".
        owners = [r for r in roots if _is_within(os.fspath(pure), r.path)]
        if owners:
            owner = max(owners, key=lambda r: len(r.path.parts))
            named = candidates[0]
            raise PathRefused(
                f"refusing path {_q(path)} with root={_q(root_name)}: it lies in the root "
                f"{_q(owner.name)} ({_q(str(owner.path))}), not in {_q(named.name)} "
                f"({_q(str(named.path))}); pass root={_q(owner.name)}, or omit root",
                code="path_outside_root",
                details={"path": path, "root": named.name, "path_root": owner.name},
            )
    if not inside:
        where = ", ".join(f"{r.name}={_q(str(r.path))}" for r in candidates)
        raise PathRefused(
            f"refusing path {_q(path)}: it is outside every local root ({where}); "
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
    if not _is_within(resolved, root.path):
        raise PathRefused(
            f"refusing path {_q(path)}: it resolves to {_q(resolved)}, outside the root "
            f"{root.name}={_q(str(root.path))}; name a real file inside the root",
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
            f"the local root {root.name}={_q(str(root.path))} is no longer the folder the "
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
                    f"local path {_q(path)} does not exist in root {root.name} "
                    f"({_q(shown)} is missing); check the name with local_index",
                    details={"path": path, "missing": shown, "root": root.name},
                ) from e
            return
        except NotADirectoryError as e:  # a parent checked below; kept for races
            raise _not_a_dir(path, shown, root) from e
        if stat.S_ISLNK(st.st_mode):
            raise PathRefused(
                f"refusing path {_q(path)}: {_q(shown)} is a symbolic link; placet never "
                "follows links in a root, even ones pointing inside: name the real path",
                code="symlink_refused",
                details={"path": path, "link": shown, "root": root.name},
            )
        if i < len(rel.parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise _not_a_dir(path, shown, root)


def _not_a_dir(path: str, shown: str, root: Root) -> PathRefused:
    return PathRefused(
        f"refusing path {_q(path)}: {_q(shown)} is not a folder; check the path",
        code="not_a_directory",
        details={"path": path, "component": shown, "root": root.name},
    )


def _check_remote_segment(path: str, seg: str, *, what: str) -> None:
    if seg == "" and what == "name":
        raise _invalid(path, "the name is empty", "give a file or folder name")
    if seg in {"", ".", ".."}:
        shown = "an empty segment ('//')" if seg == "" else f"a {_q(seg)} segment"
        raise _invalid(path, f"the {what} has {shown}", "name each folder explicitly")
    if seg.startswith("-"):
        raise _invalid(
            path,
            f"{_q(seg)} starts with '-' (it could be read as an rclone option)",
            "rename it so it does not start with '-'",
        )
    if _utf8_len(seg) > MAX_COMPONENT_BYTES:
        raise _invalid(
            path,
            f"a segment is {_utf8_len(seg)} bytes long; the limit is {MAX_COMPONENT_BYTES}",
            "use shorter names",
        )
    if is_reserved_name(seg):
        raise _reserved(path, seg)


def _check_remote_chars(path: str, *, what: str) -> None:
    if len(path) > _MAX_REMOTE_PATH_CHARS:
        raise _invalid(path[:200], f"the {what} is too long", "name a shorter path")
    for c in path:
        if unicodedata.category(c) in {"Cc", "Cs"}:
            raise _invalid(
                path,
                f"the {what} contains the control or invalid character {inert(c)}",
                "use plain names",
            )
    if ":" in path:
        raise _invalid(
            path,
            f"the {what} contains ':' (rclone would read it as a remote or backend prefix)",
            "paths are relative to the drive root; drop the prefix or rename",
        )
    if "\\" in path:
        raise _invalid(path, f"the {what} contains a backslash", "separate folders with '/'")


def check_remote_path(p: str) -> str:
    """Check and normalise a drive-relative remote path; ``""`` is the drive root.

    One trailing ``/`` is dropped (``"docs/"`` names the folder ``docs``); nothing else
    is rewritten (no Unicode normalisation: the remote's own name must be matched).

    Returns:
        The normalised path.

    Raises:
        PathRefused (code ``path_invalid``): a leading ``/`` (paths are relative to the
            drive root), ``.``/``..``/empty segments, a segment starting with ``-``, a
            ``:`` anywhere, a backslash, a control character (C0, DEL, C1, NUL) or lone
            surrogate, a segment over 255 bytes of UTF-8, more than 64 segments;
            (code ``path_reserved``) a segment starting with ``.placet-tmp-``.
    """
    _check_remote_chars(p, what="remote path")
    if p.startswith("/"):
        raise _invalid(
            p,
            "remote paths are relative to the drive root and must not start with '/'",
            f'write {_q(p.lstrip("/"))} (or "" for the drive root)',
        )
    norm = p[:-1] if p.endswith("/") else p
    if norm == "":
        return ""
    segments = norm.split("/")
    if len(segments) > MAX_REMOTE_DEPTH:
        raise _invalid(
            p,
            f"it is {len(segments)} levels deep; the limit is {MAX_REMOTE_DEPTH}",
            "name a shallower path",
        )
    for seg in segments:
        _check_remote_segment(p, seg, what="remote path")
    return norm


def check_name(name: str) -> str:
    """Check one remote name (the `name` of an upload or mkdir): a single segment.

    Returns:
        `name` unchanged.

    Raises:
        PathRefused (code ``path_invalid``): empty, ``.``/``..``, contains ``/``, and
            every rule of `check_remote_path`; (code ``path_reserved``) it starts with
            ``.placet-tmp-``. The sync planner calls this for every name it would create.
    """
    _check_remote_chars(name, what="name")
    if "/" in name:
        raise _invalid(
            name,
            "a name cannot contain '/'",
            "give the folder part in the parent path and the last part as the name",
        )
    _check_remote_segment(name, name, what="name")
    return name


def is_reserved_name(name: str) -> bool:
    """True when one path component starts with `RESERVED_PREFIX` (``.placet-tmp-``)."""
    return name.startswith(RESERVED_PREFIX)


def _reserved(path: str, component: str) -> PathRefused:
    # placet's own temporary files carry this prefix: they are hidden from listings and
    # removed by cleanup, so a file an owner approved must never bear it.
    return PathRefused(
        f"refusing path {_q(path)}: {_q(component)} starts with {_q(RESERVED_PREFIX)}, a "
        "prefix reserved for placet's temporary files (hidden from listings, removed by "
        "cleanup); choose another name",
        code="path_reserved",
        details={"path": path, "component": component, "prefix": RESERVED_PREFIX},
    )


def check_not_reserved(path: str) -> str:
    """Refuse a local or remote POSIX path any of whose components starts with
    ``.placet-tmp-`` (`RESERVED_PREFIX`). Shape is not checked here.

    Returns:
        `path` unchanged.

    Raises:
        PathRefused (code ``path_reserved``): a component bears the reserved prefix.
    """
    for component in path.split("/"):
        if is_reserved_name(component):
            raise _reserved(path, component)
    return path
