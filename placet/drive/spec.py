"""The drive spec (an rclone path), remote paths within it, and redaction of rclone's text.

A drive spec is whatever rclone accepts as a path (``name:path``, ``name,opt=v:path``,
``:backend,opt=v:path``, an absolute local folder). It is stored with every proposal
(docs/design.md section 9, "Drive binding"), so inline secrets are refused at
configuration. Agent strings only fill the path-within-the-drive slot; `check_drive_path`
repeats the rules that keep a path from reading as an option or a remote prefix, as the
last place before argv. `redact` removes connection strings and secrets rclone echoes
before text reaches an agent, a log or the database."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from placet.errors import ConfigError, PathRefused
from placet.paths.shape import control_char

REDACTED = "<redacted>"

# Option-name tokens that mark a secret value (rclone option names, `_`-separated).
_SECRET_TOKENS = frozenset(
    {"pass", "password", "passwd", "passphrase", "token", "key", "secret", "credentials", "pem"}
)
# ...unless the option names where the secret lives rather than the secret itself.
_NOT_SECRET_LAST = frozenset({"file", "path", "command"})

_NAME_CHARS = re.compile(r"[\w.+@ -]+")
_OPT_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class DriveSpec:
    """A parsed drive spec.

    Attributes:
        raw: the spec as given.
        kind: ``local`` (absolute folder), ``remote`` (configured remote) or ``onthefly``.
        name: the remote's name (``remote``) or backend type (``onthefly``); None for local.
        options: ``(key, value)`` pairs from a connection string, values unquoted.
        root: the path part after the remote prefix (the local folder for ``local``).
        prefix_end: index in `raw` of the ``:`` that ends the remote part (-1 for local).
    """

    raw: str
    kind: Literal["local", "remote", "onthefly"]
    name: str | None
    options: tuple[tuple[str, str], ...]
    root: str
    prefix_end: int

    @property
    def backend_hint(self) -> str | None:
        """The backend type when the spec alone tells it (local, on-the-fly)."""
        if self.kind == "local":
            return "local"
        return self.name if self.kind == "onthefly" else None

    def secret_values(self) -> list[str]:
        """Values of the connection string's secret options (`pass`, `token`, `*_key`…)
        and of any URL carrying a password, to be cut out of rclone's messages."""
        return [v for k, v in self.options if v and (_is_secret_option(k) or _USERINFO.search(v))]

    def join(self, path: str) -> str:
        """The rclone argument for `path` (relative to the drive root; ``""`` is the root)."""
        if not path:
            return self.raw
        base = self.raw
        if self.kind != "local" and base.endswith(":"):
            return base + path
        return base.rstrip("/") + "/" + path if base != "/" else "/" + path

    def with_options(self, extra: Iterable[tuple[str, str]]) -> str:
        """The spec with `extra` options added to its connection string (not for local)."""
        if self.kind == "local":
            return self.raw
        added = "".join(f",{k}={v}" for k, v in extra)
        return self.raw[: self.prefix_end] + added + self.raw[self.prefix_end :]


def _bad_spec(spec: str, what: str, instead: str) -> ConfigError:
    return ConfigError(
        f"refusing drive spec {redact(spec)!r}: {what}; {instead}",
        details={"spec": redact(spec)},
    )


def _read_value(spec: str, i: int) -> tuple[str, int]:
    """Read an option value starting at `i`; quoted parts may hold ``:`` and ``,``."""
    out: list[str] = []
    while i < len(spec) and spec[i] not in ",:":
        q = spec[i]
        if q in "'\"":
            j = i + 1
            while True:
                k = spec.find(q, j)
                if k < 0:
                    raise _bad_spec(spec, "an option value has an unclosed quote", "close it")
                out.append(spec[j:k])
                if spec[k + 1 : k + 2] == q:  # a doubled quote is a literal quote
                    out.append(q)
                    j = k + 2
                    continue
                i = k + 1
                break
        else:
            out.append(q)
            i += 1
    return "".join(out), i


def parse_spec(spec: str) -> DriveSpec:
    """Parse an rclone path into a `DriveSpec` (no secret check: see `validate_spec`).

    Raises:
        ConfigError: empty, control characters, a leading ``-``, a relative local path,
            a malformed remote name or connection string.
    """
    if not spec or not spec.strip():
        raise _bad_spec(spec, "it is empty", "give an rclone path such as 'remote:folder'")
    if any(unicodedata.category(c) == "Cc" for c in spec):
        raise _bad_spec(spec, "it contains control characters", "remove them")
    if spec.startswith("-"):
        raise _bad_spec(spec, "it starts with '-'", "give an rclone path such as 'remote:folder'")
    if spec.startswith("/"):
        return DriveSpec(spec, "local", None, (), spec, -1)
    onthefly = spec.startswith(":")
    i = 1 if onthefly else 0
    m = _NAME_CHARS.match(spec, i)
    if not m or m.end() >= len(spec) or spec[m.end()] not in ",:":
        raise _bad_spec(
            spec,
            "it is neither an absolute local folder nor 'remote:path'",
            "give an absolute folder, 'remote:path' or ':backend,option=value:path'",
        )
    name = m.group(0)
    if name != name.strip() or name.startswith("-"):
        raise _bad_spec(spec, "the remote name is malformed", "check the name in `rclone config`")
    i = m.end()
    options: list[tuple[str, str]] = []
    while spec[i] == ",":
        km = _OPT_KEY.match(spec, i + 1)
        if not km:
            raise _bad_spec(spec, "an option name is malformed", "write ',option=value'")
        key, i = km.group(0), km.end()
        value = "true"
        if i < len(spec) and spec[i] == "=":
            value, i = _read_value(spec, i + 1)
        options.append((key, value))
        if i >= len(spec):
            raise _bad_spec(spec, "the connection string has no closing ':'", "end it with ':'")
    return DriveSpec(
        spec, "onthefly" if onthefly else "remote", name, tuple(options), spec[i + 1 :], i
    )


def _is_secret_option(key: str) -> bool:
    tokens = key.lower().replace("-", "_").split("_")
    return bool(_SECRET_TOKENS & set(tokens)) and tokens[-1] not in _NOT_SECRET_LAST


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@'\"]+:[^/\s@'\"]+@")


def validate_spec(spec: str) -> DriveSpec:
    """Parse `spec` and refuse inline secrets (docs/design.md section 9, "drive binding").

    Refused: an option whose name marks a secret (``pass``, ``password``, ``token``,
    ``key``, ``secret``, ``client_secret``, ``secret_access_key``, …; ``key_file`` and
    other ``*_file`` paths are allowed) and a URL with a password in it.

    Raises:
        ConfigError: see `parse_spec`, or an inline secret.
    """
    parsed = parse_spec(spec)
    secret_keys = [k for k, _ in parsed.options if _is_secret_option(k)]
    if secret_keys or any(_USERINFO.search(v) for _, v in parsed.options):
        what = (
            f"it holds the secret option(s) {', '.join(sorted(set(secret_keys)))}"
            if secret_keys
            else "it holds a URL with a password"
        )
        raise _bad_spec(
            spec,
            f"{what}, and placet stores the spec with every proposal",
            "define the remote with `rclone config` (its secrets stay in rclone's config, "
            "which `placet drive login` can unlock) and give 'name:path' here",
        )
    return parsed


def check_drive_path(path: str) -> str:
    """Refuse a drive-relative path that could be read as anything but a path.

    Returns the path without one trailing ``/``. Defensive repeat of
    `placet.paths.remote.check_remote_path` at the last step before argv.

    Raises:
        PathRefused (code ``path_invalid``): leading ``/`` or ``-``, ``:`` anywhere,
            control characters, U+FFFD (the name rclone lists for one that is not
            valid UTF-8, which reaches no object), ``.``/``..``/empty segments.
    """
    norm = path[:-1] if path.endswith("/") else path
    problem = None
    if control_char(path) is not None:
        problem = "it contains a control character"
    elif "\ufffd" in path:  # how rclone lists a name that is not valid UTF-8
        problem = "it contains U+FFFD (a name that is not valid UTF-8 lists that way)"
    elif ":" in path:
        problem = "it contains ':'"
    elif path.startswith(("/", "-")):
        problem = f"it starts with {path[0]!r}"
    elif norm and any(seg in {"", ".", ".."} or seg.startswith("-") for seg in norm.split("/")):
        problem = "it has an empty, '.', '..' or '-'-leading segment"
    if problem:
        raise PathRefused(
            f"refusing remote path {path!r}: {problem}; name a path relative to the drive root",
            code="path_invalid",
            details={"path": path.encode("unicode_escape").decode("ascii")},
        )
    return norm


def split_path(path: str) -> tuple[str, str]:
    """(folder, name) of a drive path; the folder of a name at the root is ``""``."""
    p = PurePosixPath(path)
    parent = str(p.parent)
    return ("" if parent == "." else parent), p.name


# A connection string's options: ",key=value,..." up to the ':' that ends the remote part.
_CONN_OPTS = re.compile(
    r"""(?P<head>(?:^|(?<=[\s"'(=\[]))[:]?[\w.+@-]+),"""
    r"""(?:[A-Za-z0-9_-]+(?:=(?:'[^']*'|"[^"]*"|[^,:'"\s])*)?,?)+(?=:)"""
)
_SECRET_KV = re.compile(
    r"""(?i)\b([\w-]*(?:pass|password|passwd|passphrase|user|username|token|key|secret|"""
    r"""credentials)[\w-]*)=('[^']*'|"[^"]*"|[^\s,:'"]+)"""
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove secrets from rclone's text before it reaches an agent, a log or the database.

    Removes: each string in `secrets` (4 characters or more; e.g. the config password,
    a spec's option values); the options of any connection string
    (``:webdav,url=…,pass=…:`` becomes ``:webdav,<redacted>:``); ``pass=…``, ``user=…``,
    ``token=…``, ``key=…`` and similar assignments; passwords in URLs.
    """
    for s in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    text = _CONN_OPTS.sub(lambda m: f"{m.group('head')},{REDACTED}", text)
    text = _SECRET_KV.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    return _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
