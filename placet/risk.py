"""Risk flags placet computes itself for every target, shown above the agent's reason.

An agent's reason is its claim; these flags are placet's own facts about what accepting
would do (DESIGN.md section 9, "Risk flags"). Each one makes the review UI ask for a typed
confirmation instead of a single key, because each marks a way an agent could turn one
accepted transfer into more than the owner meant:

* ``runs_code``: the target is executable, or configuration that makes a tool run code
  or steers a coding agent (git hooks and config, shell rc files, CI workflows, editor
  tasks, Python start-up hooks, package scripts, agent instruction files). A download
  that writes ``.git/hooks/pre-commit`` or ``.envrc`` runs on the owner's next command.
* ``secret_name``: the name looks like a credential (``.env``, ``*.pem``, ``id_*``...).
  An upload would copy it to the drive; a download would plant one.
* ``replaces_existing``: existing content is replaced (kept as a revision or in trash).
* ``name_changed``: an upload stores the file under another name than its own.
* ``bidi_or_invisible``: a component holds bidirectional overrides (``\u202e`` shows
  ``invoice_\u202etxt.exe`` as ``invoice_exe.txt``) or invisible format characters.
* ``confusable_name`` / ``non_ascii_name``: a component could pass for an ASCII name --
  its compatibility form is ASCII (fullwidth, ligatures, styled letters) or one word mixes
  Latin letters with lookalikes from another script (``pаypal``) -- or, otherwise, holds
  visible non-ASCII characters (``café.txt``, ``½.txt``). The message names the component
  (the target's own name first, then its folders) and gives its escaped ASCII form, once
  per target.

Matching is on the path's components after NFC normalisation, case folding, removal of
format characters (HFS+ ignores some, so ``.g\\u200cit`` *is* ``.git`` there) and of
trailing dots and spaces (Windows drops them). A pattern ``a/b/`` matches those folders
anywhere in the path (including as the last component, e.g. a mkdir); ``*.ext``,
``prefix*`` and plain names match the last component. The path matched is the root's
absolute path (downloads) or the drive's own path (`drive_base`) joined with the target,
so a root ``/x/.git`` flags ``hooks/pre-commit``: a sensitive folder is one whether the
owner's root or the agent's relative path names it. One list per flag, here only.
Stdlib only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from placet.text import inert, inert_with_ascii

__all__ = [
    "RUNS_CODE_PATTERNS",
    "SECRET_PATTERNS",
    "RiskFlag",
    "drive_base",
    "fold_component",
    "needs_typed_confirmation",
    "risk_flags",
]

RUNS_CODE_PATTERNS: tuple[str, ...] = (
    # Version control: hooks, config with command settings, submodule URLs.
    ".git/", ".hg/", ".gitconfig", ".gitmodules", ".husky/", ".pre-commit-config.yaml",
    # Coding agents and editors: MCP servers, tool allowlists, tasks, instructions.
    ".mcp.json", ".claude/", ".cursor/", ".codex/", ".gemini/", ".vscode/", ".idea/",
    ".devcontainer/", "claude.md", "agents.md", "gemini.md", ".cursorrules",
    ".windsurfrules", ".vimrc", ".exrc", ".nvimrc",
    # CI.
    ".github/workflows/", ".circleci/", ".gitlab-ci.yml", ".travis.yml",
    # Shells and login sessions.
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
    ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc",
    ".login", ".logout", ".envrc", ".config/autostart/", ".config/systemd/",
    ".config/fish/", ".local/bin/",
    # Python start-up and test collection; build files that run on install or build.
    "conftest.py", "sitecustomize.py", "usercustomize.py", "*.pth", "setup.py",
    "noxfile.py", "makefile", "gnumakefile", "justfile",
    # Package managers: package.json "scripts" (postinstall runs on npm install), rc
    # files that choose the script shell or registries.
    "package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", "pip.conf",
    # Executables and launchers.
    "*.sh", "*.bash", "*.zsh", "*.fish", "*.ksh", "*.csh", "*.command", "*.exe", "*.com",
    "*.bat", "*.cmd", "*.ps1", "*.psm1", "*.vbs", "*.vbe", "*.wsf", "*.scr", "*.msi",
    "*.dll", "*.so", "*.dylib", "*.jar", "*.appimage", "*.desktop", "*.service", "*.lnk",
    "*.reg", "*.apk", "*.deb", "*.rpm", "*.pkg",
)  # fmt: skip
"""Targets that run code or steer tools: one list, matched as the module doc says."""

SECRET_PATTERNS: tuple[str, ...] = (
    ".ssh/", ".aws/", ".gnupg/", ".kube/", ".docker/", ".azure/", ".config/gcloud/",
    ".password-store/",
    ".env", ".env.*", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".htpasswd",
    ".pypirc", ".npmrc", ".my.cnf", ".boto", ".s3cfg", "rclone.conf", "authorized_keys",
    "id_*", "credentials*", "secrets.*",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx", "*.ppk", "*.ovpn",
)  # fmt: skip
"""Credential-like names: one list, matched as the module doc says."""

# Scripts whose letters pass for Latin ones (а/a, ο/o, Ꭺ/A): mixing two is a spoof sign.
_LOOKALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})
_INVISIBLE = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0"})
_BIDI_CONTROLS = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})
_KINDS_REMOTE = frozenset({"upload", "upload_revision", "mkdir"})
_KINDS_LOCAL = frozenset({"download"})


@dataclass(frozen=True)
class RiskFlag:
    """One risk placet found: a stable `code` and a one-line `message` for the owner."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class _Rules:
    dirs: tuple[tuple[str, ...], ...]
    names: frozenset[str]
    prefixes: tuple[str, ...]
    suffixes: tuple[str, ...]

    @classmethod
    def parse(cls, patterns: Sequence[str]) -> _Rules:
        dirs: list[tuple[str, ...]] = []
        names: set[str] = set()
        prefixes: list[str] = []
        suffixes: list[str] = []
        for p in patterns:
            if p.endswith("/"):
                dirs.append(tuple(p.rstrip("/").split("/")))
            elif p.startswith("*"):
                suffixes.append(p[1:])
            elif p.endswith("*"):
                prefixes.append(p[:-1])
            else:
                names.add(p)
        return cls(tuple(dirs), frozenset(names), tuple(prefixes), tuple(suffixes))

    def match(self, parts: Sequence[str]) -> tuple[str, int] | None:
        """The first pattern (as written in the list) that `parts` matches, with the index
        of the first component it matched; or None."""
        for seq in self.dirs:
            n = len(seq)
            for i in range(len(parts) - n + 1):
                if tuple(parts[i : i + n]) == seq:
                    return "/".join(seq) + "/", i
        if not parts:
            return None
        last, at = parts[-1], len(parts) - 1
        if last in self.names:
            return last, at
        for pre in self.prefixes:
            if last.startswith(pre):
                return pre + "*", at
        for suf in self.suffixes:
            if last.endswith(suf) and len(last) > len(suf):
                return "*" + suf, at
        return None


_RUNS_CODE = _Rules.parse(RUNS_CODE_PATTERNS)
_SECRET = _Rules.parse(SECRET_PATTERNS)


def fold_component(name: str) -> str:
    """The form a name is matched in: NFC, format characters dropped, case-folded, NFC
    again, trailing dots and spaces dropped."""
    s = unicodedata.normalize("NFC", name)
    s = "".join(c for c in s if unicodedata.category(c) != "Cf" and c not in _INVISIBLE)
    s = unicodedata.normalize("NFC", s.casefold())
    return s.rstrip(" .") or s


def _script(c: str) -> str | None:
    if not unicodedata.category(c).startswith("L"):
        return None
    try:
        return unicodedata.name(c).split(" ", 1)[0]
    except ValueError:
        return None


def _is_hidden(c: str) -> bool:
    return unicodedata.category(c) == "Cf" or c in _INVISIBLE


def _hidden_reason(component: str) -> str | None:
    hidden = [c for c in component if _is_hidden(c)]
    if not hidden:
        return None
    if any(unicodedata.bidirectional(c) in _BIDI_CONTROLS for c in hidden):
        return "it holds bidirectional override characters that reorder how it is displayed"
    return "it holds invisible characters"


def _confusable_reason(component: str) -> str | None:
    """Why `component` (invisible characters already removed) may pass for another,
    ASCII-looking name, or None. Only called for a non-ASCII component.

    Confusable means confusable *with an ASCII name*: its compatibility form is ASCII
    (fullwidth ``ｒｅｐｏｒｔ``, ligature ``ﬁle``, Kelvin sign), or one word mixes Latin
    letters with lookalike letters of another script (``pаypal``). A compatibility form
    that is not ASCII (``µm``, ``½``) or a word of one script (``отчёт``) is merely
    non-ASCII."""
    compat = unicodedata.normalize("NFKC", component)
    if compat.isascii():
        return f"it imitates the ASCII name '{inert(compat)}' with lookalike characters"
    # Per word (run of letters), so "отчёт.txt" is fine and "pаypal" is not.
    for word in re.findall(r"[^\W\d_]+", compat):
        scripts = {s for s in map(_script, word) if s in _LOOKALIKE_SCRIPTS}
        if len(scripts) > 1 and "LATIN" in scripts:
            mixed = ", ".join(sorted(scripts)).lower()
            return f"it mixes Latin letters with lookalikes of another script ({mixed})"
    return None


def _name_flags(target_path: str) -> list[RiskFlag]:
    """bidi_or_invisible, then confusable_name or non_ascii_name, judged on the target's
    own name (its last component) first, then its folders from the nearest out, so that
    each message names the one component that holds the characters. The escaped ASCII
    form is given once, in the first of these flags."""
    flags: list[RiskFlag] = []
    if target_path.isascii():
        return flags
    components = [p for p in target_path.split("/") if p]
    order = range(len(components) - 1, -1, -1)  # the name itself first, then its folders
    ascii_said = False

    def named(i: int) -> str:
        nonlocal ascii_said
        comp = components[i]
        text = inert(comp) if ascii_said else inert_with_ascii(comp)
        ascii_said = ascii_said or not comp.isascii()
        shown = f"the {'name' if i == len(components) - 1 else 'folder'} '{text}'"
        return shown if len(components) == 1 else f"{shown} (in '{inert(target_path)}')"

    for i in order:
        why = _hidden_reason(components[i])
        if why is not None:
            flags.append(RiskFlag("bidi_or_invisible", f"{named(i)} may not read as it is: {why}"))
            break
    for i in order:
        visible = "".join(c for c in components[i] if not _is_hidden(c))
        if visible.isascii():
            continue  # plain ASCII, or only invisible characters (flagged above)
        why = _confusable_reason(visible)
        if why is not None:
            flags.append(RiskFlag("confusable_name", f"{named(i)} may pass for another: {why}"))
            return flags
    for i in order:
        if any(not c.isascii() and not _is_hidden(c) for c in components[i]):
            flags.append(RiskFlag("non_ascii_name", f"{named(i)} holds non-ASCII characters"))
            break
    return flags


def _where(kind: str) -> str:
    if kind in _KINDS_LOCAL:
        return "in the local root"
    return "on the drive"


def risk_flags(
    *,
    kind: str,
    target_path: str,
    replaces_existing: bool,
    name_changed: bool,
    source_name: str | None = None,
    base_path: str | None = None,
) -> list[RiskFlag]:
    """Compute the risk flags of writing `target_path`.

    Args:
        kind: ``upload``, ``upload_revision`` or ``mkdir`` (the target is a drive-relative
            remote path) or ``download`` (a root-relative local path). A sync proposal is
            flagged op by op with each op's kind.
        target_path: POSIX path of what will be created or replaced.
        replaces_existing: the target exists and will be replaced.
        name_changed: an upload stores the file under a name other than its own.
        source_name: the local file's own name, for the `name_changed` message.
        base_path: where `target_path` is relative to: the root's absolute path for a
            download, the drive's own path (`drive_base`) for the others. The
            runs_code and secret_name patterns are matched on it joined with
            `target_path`, so a root ``/x/.git`` flags ``hooks/pre-commit``; the name
            flags judge `target_path` alone (the owner chose the root). None: the
            target alone (callers should pass it).

    Returns:
        Flags in a fixed order: runs_code, secret_name, replaces_existing, name_changed,
        bidi_or_invisible, confusable_name or non_ascii_name. Empty when nothing is risky.

    Raises:
        ValueError: an unknown `kind`.
    """
    if kind not in _KINDS_REMOTE | _KINDS_LOCAL:
        raise ValueError(f"risk_flags: unknown kind {kind!r}")
    where = _where(kind)
    shown = f"'{inert(target_path)}'"
    base_parts = [fold_component(p) for p in (base_path or "").split("/") if p]
    parts = base_parts + [fold_component(p) for p in target_path.split("/") if p]

    def matched(hit: tuple[str, int]) -> str:
        pattern, at = hit
        if at >= len(base_parts):
            return f"matches '{pattern}'"
        owner = "the local root" if kind in _KINDS_LOCAL else "the drive"
        return f"matches '{pattern}' in the path of {owner} '{inert(base_path or '')}'"

    flags: list[RiskFlag] = []
    hit = _RUNS_CODE.match(parts)
    if hit is not None:
        flags.append(
            RiskFlag(
                "runs_code",
                f"{shown} {where} is executable, or configuration that runs code or "
                f"steers coding agents ({matched(hit)})",
            )
        )
    hit = _SECRET.match(parts)
    if hit is not None:
        flags.append(
            RiskFlag("secret_name", f"{shown} {where} looks like a secret ({matched(hit)})")
        )
    if replaces_existing:
        kept = (
            "the old file is moved to placet's trash"
            if kind in _KINDS_LOCAL
            else "the drive may keep the old one as a revision"
        )
        flags.append(
            RiskFlag("replaces_existing", f"replaces the existing {shown} {where} ({kept})")
        )
    if name_changed:
        was = f" (the local file is '{inert_with_ascii(source_name)}')" if source_name else ""
        flags.append(RiskFlag("name_changed", f"stores the file under a new name {shown}{was}"))
    flags.extend(_name_flags(target_path))
    return flags


def drive_base(drive_spec: str) -> str:
    """The path part of an rclone drive spec, for `risk_flags(base_path=...)`:
    ``remote:Agents/x`` gives ``Agents/x``, ``:backend,opt=v:dir`` gives ``dir``, a local
    folder (``/srv/drive``) is itself."""
    if drive_spec.startswith("/"):
        return drive_spec
    rest = drive_spec[1:] if drive_spec.startswith(":") else drive_spec
    head, sep, tail = rest.partition(":")
    return tail if sep else head


def needs_typed_confirmation(flags: Sequence[RiskFlag]) -> bool:
    """True when the owner must type a confirmation: any flag at all (DESIGN.md 9)."""
    return bool(flags)
