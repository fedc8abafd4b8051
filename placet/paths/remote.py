"""Remote paths: relative to the drive root, they only ever fill the path-within-the-drive
slot of an rclone argument, so anything rclone could read as an option (leading ``-``) or
as a remote prefix (``:``) is refused, with ``.``, ``..``, empty segments and control
characters (docs/design.md section 9). Stdlib only.
"""

from __future__ import annotations

from placet.errors import NotFound, PathRefused
from placet.names import is_reserved_name, reserved_refusal
from placet.paths.shape import MAX_COMPONENT_BYTES, control_char, invalid_path, utf8_len
from placet.text import inert, quote

__all__ = ["MAX_REMOTE_DEPTH", "check_name", "check_remote_path", "refuse_unless_file"]

MAX_REMOTE_DEPTH = 64
_MAX_REMOTE_PATH_CHARS = MAX_REMOTE_DEPTH * (MAX_COMPONENT_BYTES + 1)


def _check_remote_segment(path: str, seg: str, *, what: str) -> None:
    if seg == "" and what == "name":
        raise invalid_path(path, "the name is empty", "give a file or folder name")
    if seg in {"", ".", ".."}:
        shown = "an empty segment ('//')" if seg == "" else f"a {quote(seg)} segment"
        raise invalid_path(path, f"the {what} has {shown}", "name each folder explicitly")
    if seg.startswith("-"):
        raise invalid_path(
            path,
            f"{quote(seg)} starts with '-' (it could be read as an rclone option)",
            "rename it so it does not start with '-'",
        )
    if utf8_len(seg) > MAX_COMPONENT_BYTES:
        raise invalid_path(
            path,
            f"a segment is {utf8_len(seg)} bytes long; the limit is {MAX_COMPONENT_BYTES}",
            "use shorter names",
        )
    if is_reserved_name(seg):
        raise reserved_refusal(path, seg)


REPLACEMENT_CHAR = "\ufffd"
"""U+FFFD: rclone lists a remote name that is not valid UTF-8 with this character in place
of each bad byte (``b\\xe4d.txt`` lists as ``b\ufffdd.txt``), and that listed name reaches
no object. A name containing it is refused everywhere
(docs/decisions/0010-names-on-the-drive.md): in a sync plan it is reported
``skipped_special``, never planned."""


def _check_remote_chars(path: str, *, what: str) -> None:
    if len(path) > _MAX_REMOTE_PATH_CHARS:
        raise invalid_path(path[:200], f"the {what} is too long", "name a shorter path")
    c = control_char(path)
    if c is not None:
        raise invalid_path(
            path,
            f"the {what} contains the control or invalid character {inert(c)}",
            "use plain names",
        )
    if REPLACEMENT_CHAR in path:
        raise invalid_path(
            path,
            f"the {what} contains U+FFFD, the replacement character: a drive lists a name "
            "that is not valid UTF-8 that way, and the name it lists does not reach the file",
            "rename it on the drive to a valid UTF-8 name without U+FFFD",
        )
    if ":" in path:
        raise invalid_path(
            path,
            f"the {what} contains ':' (rclone would read it as a remote or backend prefix)",
            "paths are relative to the drive root; drop the prefix or rename",
        )
    if "\\" in path:
        raise invalid_path(path, f"the {what} contains a backslash", "separate folders with '/'")


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
        raise invalid_path(
            p,
            "remote paths are relative to the drive root and must not start with '/'",
            f'write {quote(p.lstrip("/"))} (or "" for the drive root)',
        )
    norm = p[:-1] if p.endswith("/") else p
    if norm == "":
        return ""
    segments = norm.split("/")
    if len(segments) > MAX_REMOTE_DEPTH:
        raise invalid_path(
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
        raise invalid_path(
            name,
            "a name cannot contain '/'",
            "give the folder part in the parent path and the last part as the name",
        )
    _check_remote_segment(name, name, what="name")
    return name


def refuse_unless_file(path: str, is_dir: bool | None, *, verb: str, hint: str) -> None:
    """Refuse the checked remote `path` unless it names a file (`is_dir`: what the drive
    holds there, None for nothing).

    Raises:
        NotFound: nothing is at `path`.
        PathRefused (code ``not_regular_file``): `path` is a folder; the message says the
            `verb` refused ("read", "download") and the `hint` what to do instead.
    """
    if is_dir is None:
        raise NotFound(
            f"remote {quote(path)} does not exist; check the name with drive_list",
            details={"remote_path": path},
        )
    if is_dir:
        raise PathRefused(
            f"refusing to {verb} remote {quote(path)}: it is a folder; {hint}",
            code="not_regular_file",
            details={"remote_path": path},
        )
