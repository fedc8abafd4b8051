"""Roots: which local folders the owner nominated, and which placet refuses as roots.

A root is a directory the owner passed as ``--root DIR`` or ``--root NAME=DIR``
(docs/design.md sections 6 and 9, "Roots"). Refused: the filesystem root, the home directory
and any ancestor of it (a root above the home exposes all of it), and any folder that
equals, contains or lies inside one of placet's own folders (`PlacetDirs`): the data
directory (database, audit anchor, trash), the config directory (``config.toml``: an
accepted download there could set ``allow_yes``) and the database's folder. Both rules
compare by realpath and by device and inode (the root and every folder above it against
placet's folders; the root against every folder above each placet folder), so a bind
mount of placet's home, which realpath cannot see through, is refused too. Each root
records its device and inode so that the executor can tell if the directory was
replaced after the proposal was made.

Stdlib only (apart from `Root.to_ref`, which imports the pydantic request model lazily).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from placet.errors import PathRefused, UsageError
from placet.text import quote

if TYPE_CHECKING:
    from placet.config import Settings
    from placet.schema import RootRef

__all__ = [
    "PlacetDirs",
    "Root",
    "find_root",
    "is_below",
    "parse_root_spec",
    "parse_roots",
]

_ROOT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Root:
    """A local root as the owner nominated it.

    `path` is absolute and resolved (no symlink in it); `device`/`inode` are its
    ``st_dev``/``st_ino`` when nominated (docs/design.md section 9, "Roots").
    """

    name: str
    path: Path
    device: int
    inode: int

    def to_ref(self) -> RootRef:
        """The root as stored in a proposal (`placet.schema.RootRef`)."""
        from placet.schema import RootRef

        return RootRef(name=self.name, path=str(self.path), device=self.device, inode=self.inode)


_Id = tuple[int, int]


@dataclass(frozen=True)
class PlacetDirs:
    """placet's own folders, resolved: no root may equal, contain or lie inside one.

    `folders` holds (what, path, advice) triples: what the folder is to the owner, its
    realpath, and how to move it out of the way (docs/design.md section 9, "Roots";
    docs/decisions/0028-risk-and-own-folders.md). `ids` holds each folder's (st_dev,
    st_ino) (None: it does not exist yet) and `above` the ids of each folder and every
    folder above it, so that an alias realpath cannot see through (a bind mount) is caught
    by identity too.
    """

    folders: tuple[tuple[str, Path, str], ...]
    ids: tuple[_Id | None, ...] = ()
    above: tuple[frozenset[_Id], ...] = ()
    _seen: dict[str, _Id | None] = field(default_factory=dict, compare=False, repr=False)
    _within: dict[str, tuple[str, Path, str] | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def of(cls, where: Settings | Path) -> PlacetDirs:
        """The data dir, the config dir (the folder of `config.toml`) and the database's
        folder of `where` (a `Settings`); a bare `Path` is a data dir alone (tests).
        Stats each folder and its ancestors (their identities, for `overlap`)."""
        found: list[tuple[str, Path, str]] = []
        if isinstance(where, Path):
            found.append((_DATA, _real(where), _DATA_FIX))
        else:
            for what, path, fix in (
                (_DATA, where.data_dir, _DATA_FIX),
                (
                    "config directory (config.toml: allow_yes, download policy)",
                    where.config_file.parent,
                    "set PLACET_HOME to keep placet's config elsewhere",
                ),
                ("database directory", where.db_path.parent, "move the database with PLACET_DB"),
            ):
                real = _real(path)
                if all(real != p for _, p, _ in found):
                    found.append((what, real, fix))
        seen: dict[str, _Id | None] = {}
        ids = tuple(_ident(str(p), seen) for _, p, _ in found)
        above = tuple(
            frozenset(i for a in _ancestors(str(p)) if (i := _ident(a, seen)) is not None)
            for _, p, _ in found
        )
        return cls(tuple(found), ids, above, seen)

    def overlap(self, path: Path | str) -> tuple[str, Path, str] | None:
        """The first placet folder that `path` (a realpath; it need not exist) equals,
        contains or lies in; None when there is none. See `relation`."""
        hit = self.relation(path)
        return None if hit is None else hit[:3]

    def relation(self, path: Path | str) -> tuple[str, Path, str, str] | None:
        """(what, folder, advice, relation) of the first placet folder that `path` (a
        realpath; it need not exist) is, contains or lies in; relation is ``is``,
        ``contains`` or ``lies inside``. Found by path, then by identity: a folder whose
        (st_dev, st_ino) is `path`'s or one of its existing ancestors' (`path` is or lies
        inside it under another name: a bind mount), or `path`'s identity among a folder's
        ancestors (`path` contains it under another name). Stats are cached per instance."""
        text = os.fspath(path)
        for what, folder, fix in self.folders:
            if is_below(text, os.fspath(folder)):
                return what, folder, fix, "is" if Path(text) == folder else "lies inside"
            if is_below(os.fspath(folder), text):
                return what, folder, fix, "contains"
        me = _ident(text, {})
        if me is not None:
            for (what, folder, fix), own, up in zip(
                self.folders, self.ids, self.above, strict=False
            ):
                if me == own:
                    return what, folder, fix, "is"
                if me in up:
                    return what, folder, fix, "contains"
        parent = os.path.dirname(text)
        hit = self._holding(parent) if parent != text else None
        return None if hit is None else (*hit, "lies inside")

    def _holding(self, folder: str) -> tuple[str, Path, str] | None:
        """The placet folder that `folder` or a folder above it is, by identity (memoised
        per instance: a sync's targets share their folders)."""
        if folder not in self._within:
            me = _ident(folder, self._seen)
            hit = next(
                (f for f, own in zip(self.folders, self.ids, strict=False) if me and own == me),
                None,
            )
            up = os.path.dirname(folder)
            if hit is None and up != folder:
                hit = self._holding(up)
            self._within[folder] = hit
        return self._within[folder]
        return None


def _ancestors(path: str) -> list[str]:
    """`path` and every folder above it, nearest first, ending with ``/``."""
    out = [path]
    while (up := os.path.dirname(out[-1])) != out[-1]:
        out.append(up)
    return out


def _ident(path: str, seen: dict[str, _Id | None]) -> _Id | None:
    """(st_dev, st_ino) of `path` (following symlinks), None if it cannot be stat'ed."""
    if path not in seen:
        try:
            st = os.stat(path)
        except OSError:
            seen[path] = None
        else:
            seen[path] = (st.st_dev, st.st_ino)
    return seen[path]


_DATA = "data directory (database, audit anchor, trash)"
_DATA_FIX = "move placet's data with PLACET_HOME"


def _real(path: Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def _root_refused(spec: str, what: str, instead: str) -> UsageError:
    return UsageError(
        f"refusing --root {quote(spec)}: {what}; {instead}",
        code="root_refused",
        details={"spec": spec},
    )


def is_below(child: str, parent: str) -> bool:
    """`is_within` for two normalised absolute paths (realpaths), by string: what
    `PlacetDirs.relation` and the own-folder check ask for every target of a sync
    (`os.path.commonpath` cost most of a 100,000-op sync's check before its first
    transfer)."""
    if not (child.startswith("/") and parent.startswith("/")):
        return is_within(child, parent)
    return child == parent or parent == "/" or child.startswith(parent + "/")


def is_within(child: Path | str, parent: Path | str) -> bool:
    """True if `child` is `parent` or lies below it, compared by whole components."""
    c, p = os.fspath(child), os.fspath(parent)
    return os.path.commonpath([c, p]) == p


def parse_root_spec(spec: str, placet: Settings | Path) -> Root:
    """Parse ``NAME=DIR`` or ``DIR`` into a `Root`.

    The name defaults to DIR's basename and must match ``[A-Za-z0-9_][A-Za-z0-9_.-]*``
    (at most 64 characters). ``NAME=`` is recognised only when the text before the first
    ``=`` is a valid name, so ``./a=b`` is the directory ``a=b``.

    Raises:
        UsageError (code ``root_refused``): DIR does not exist or is not a directory; it
            is ``/``, the home directory or an ancestor of it; it equals, contains or lies
            inside one of placet's own folders (`PlacetDirs.of(placet)`: the data dir, the
            config dir, the database's folder; pass the `Settings`, a bare `Path` protects
            only that data dir); the name is invalid. Home and placet folders are compared
            by realpath and by (st_dev, st_ino) of DIR, the folders above DIR and the
            folders above each placet folder, so an alias realpath cannot resolve (a bind
            mount) is refused as the folder it is (`PlacetDirs.relation`).
    """
    name: str | None = None
    raw_dir = spec
    head, sep, tail = spec.partition("=")
    if sep and _ROOT_NAME.fullmatch(head):
        name, raw_dir = head, tail
    if not raw_dir:
        raise _root_refused(spec, "no directory given", "write --root DIR or --root NAME=DIR")
    try:
        resolved = Path(os.path.realpath(Path(raw_dir).expanduser(), strict=True))
        st = os.stat(resolved)
    except OSError as e:
        raise _root_refused(
            spec, f"the directory cannot be opened ({e.strerror})", "name an existing folder"
        ) from e
    if not stat.S_ISDIR(st.st_mode):
        raise _root_refused(spec, "it is not a directory", "name a folder, not a file")
    if resolved == Path("/"):
        raise _root_refused(spec, "it is the filesystem root", "name a project folder")
    try:
        home: Path | None = Path(os.path.realpath(Path.home()))
    except RuntimeError:  # no HOME and no passwd entry: nothing to protect by name
        home = None
    seen: dict[str, _Id | None] = {}
    above_home = {_ident(a, seen) for a in _ancestors(str(home))} if home is not None else set()
    if home is not None and (is_within(home, resolved) or (st.st_dev, st.st_ino) in above_home):
        raise _root_refused(
            spec,
            f"it is the home directory or contains it ({quote(str(home))}; compared by path "
            "and by device and inode)",
            "name a project folder inside it",
        )
    hit = PlacetDirs.of(placet).relation(resolved)
    if hit is not None:
        what, folder, fix, relation = hit
        alias = (
            ""
            if is_within(resolved, folder) or is_within(folder, resolved)
            else (" under another name (the same folder by device and inode: a bind mount?)")
        )
        raise _root_refused(
            spec,
            f"it {relation} placet's own {what} {quote(str(folder))}{alias}; an accepted "
            "download there could rewrite placet's settings or records",
            f"name a project folder apart from it (or {fix})",
        )
    if name is None:
        name = resolved.name
        if not _ROOT_NAME.fullmatch(name):
            raise _root_refused(
                spec,
                f"its folder name {quote(name)} is not a usable root name "
                "(letters, digits, '_', '.', '-'; at most 64)",
                "give one explicitly: --root NAME=DIR",
            )
    return Root(name=name, path=resolved, device=st.st_dev, inode=st.st_ino)


def parse_roots(specs: Sequence[str], placet: Settings | Path) -> list[Root]:
    """Parse every ``--root`` spec, in order (the first is the default root).

    Raises:
        UsageError (code ``root_refused``): no spec at all, any spec refused by
            `parse_root_spec`, two roots with the same name, or the same directory twice.
    """
    if not specs:
        raise UsageError(
            "no --root given; placet serve needs at least one: --root DIR or --root NAME=DIR",
            code="root_refused",
        )
    roots: list[Root] = []
    for spec in specs:
        root = parse_root_spec(spec, placet)
        for other in roots:
            if other.name == root.name:
                raise _root_refused(
                    spec,
                    f"the name {quote(root.name)} is already used by {quote(str(other.path))}",
                    "give each root a distinct name: --root NAME=DIR",
                )
            if (other.device, other.inode) == (root.device, root.inode):
                raise _root_refused(
                    spec, f"it is the same folder as root {quote(other.name)}", "name it once"
                )
        roots.append(root)
    return roots


def find_root(roots: Sequence[Root], name: str) -> Root:
    """The root called `name`.

    Raises:
        PathRefused (code ``root_unknown``): no root has that name.
    """
    for root in roots:
        if root.name == name:
            return root
    known = ", ".join(quote(r.name) for r in roots) or "none"
    raise PathRefused(
        f"no local root is called {quote(name)}; the roots are {known} (see roots_list)",
        code="root_unknown",
        details={"root": name, "roots": [r.name for r in roots]},
    )
