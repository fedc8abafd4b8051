"""Risk flags placet computes itself for every target, shown above the agent's reason.

An agent's reason is its claim; these flags are placet's own facts about what accepting
would do (docs/design.md section 9, "Risk flags"), each a way one accepted transfer could
become more than the owner meant, so each asks for a typed confirmation: ``runs_code``
(`RUNS_CODE_RULES`, copied in docs/security.md), ``secret_name``, ``replaces_existing``,
``name_changed``, ``bidi_or_invisible``, ``confusable_name`` and ``non_ascii_name``.
Components are matched after NFC, case folding and removal of format characters and of
trailing dots and spaces (what HFS+ and Windows ignore). Pattern kinds (`CodeRule`):
``a/b/`` those folders anywhere, ``a/b`` the last components, a plain name the last one,
``/a/b/`` an absolute start; ``*`` inside a component. The path matched is the root's or
the drive's own path joined with the target, so a root ``/x/.git`` flags
``info/exclude`` (docs/decisions/0028-risk-and-own-folders.md). Stdlib only."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from placet.proposals.confusables import name_flags
from placet.text import INVISIBLE_LETTERS, inert, inert_with_ascii

__all__ = [
    "RUNS_CODE_PATTERNS",
    "RUNS_CODE_RULES",
    "SECRET_PATTERNS",
    "CodeRule",
    "RiskFlag",
    "drive_base",
    "fold_component",
    "needs_typed_confirmation",
    "risk_flags",
]


@dataclass(frozen=True)
class CodeRule:
    """One row of `RUNS_CODE_RULES`: a pattern `kind`, its `patterns` (folded, ASCII) and
    `why` -- which tool runs the target, and when. Kinds (the syntax says it too):

    * ``folder`` ``a/b/``: the target is, or lies in, such a folder anywhere in the path;
    * ``path`` ``a/b``: the path ends with these components;
    * ``name`` ``x``: the target's own name;
    * ``anchored`` ``/a/b/``: an absolute path starts with these folders.

    A component may hold ``*`` (any characters; a leading ``*`` at least one, so ``.sh``
    is not ``*.sh``)."""

    kind: str
    patterns: tuple[str, ...]
    why: str


_GIT_HOOKS = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
    "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite",
    "sendemail-validate", "fsmonitor-watchman", "post-index-change",
)  # fmt: skip

RUNS_CODE_RULES: tuple[CodeRule, ...] = tuple(CodeRule(k, tuple(p), w) for k, p, w in (
    # --- version control
    ("folder", [".git/"], "git runs its hooks and the commands its config names "
     "(core.fsmonitor, core.pager, aliases, filters); a '.git' file redirects the repository"),
    ("folder", ["*.git/hooks/"], "a bare repository's hooks run on push and receive"),
    ("path", ["*.git/config"], "a bare repository's config names commands git runs"),
    ("path", [f"hooks/{h}" for h in _GIT_HOOKS], "a git hook by its name: runs on commit, "
     "push or receive where core.hooksPath or a bare repository points here"),
    ("folder", [".githooks/", ".husky/", ".lefthook/"],
     "hook folders a repository's hook manager or core.hooksPath runs on commit"),
    ("name", [".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook-local.yml",
              ".lefthook-local.yml"], "hook managers run the commands listed here on commit"),
    ("name", [".gitconfig", ".gitmodules"], "git's user config names commands (aliases, "
     "core.pager, credential helpers); submodule URLs are fetched on update"),
    ("folder", [".config/git/"], "git's XDG user config: the same commands as ~/.gitconfig"),
    ("path", [".config/gh/config.yml"],
     "GitHub CLI aliases that start with '!' run shell commands on `gh <alias>`"),
    ("folder", [".hg/"], "Mercurial runs the hooks in a repository's .hg/hgrc"),
    ("name", [".hgrc"], "Mercurial runs the hooks and extensions named here"),
    # --- coding agents and editors
    ("name", [".mcp.json", "claude.md", "agents.md", "gemini.md", ".cursorrules",
              ".windsurfrules", ".clinerules", ".aider.conf.yml"],
     "coding agents start the MCP servers, run the commands or follow the instructions here"),
    ("path", [".github/copilot-instructions.md"], "GitHub Copilot follows these instructions"),
    ("folder", [".claude/", ".cursor/", ".codex/", ".gemini/", ".windsurf/", ".continue/"],
     "coding agents' settings: hooks, allowlists, MCP servers, instructions"),
    ("folder", [".vscode/", ".idea/", ".devcontainer/", ".zed/", ".helix/"],
     "editors run tasks on folder open, interpreters, linters and language servers named here"),
    ("name", ["*.code-workspace"], "VS Code workspace: its tasks and settings, as .vscode/"),
    ("name", [".vimrc", "_vimrc", ".gvimrc", ".exrc", ".nvimrc", ".nvim.lua"],
     "vim and neovim run these scripts on start (exrc: in the folder they open)"),
    ("folder", [".vim/", ".config/nvim/", ".config/vim/"], "vim and neovim load the plugins "
     "and scripts here on start"),
    ("name", [".emacs", ".emacs.el", ".dir-locals.el"],
     "Emacs evaluates these on start, or when it opens a file below"),
    ("folder", [".emacs.d/", ".config/emacs/"], "Emacs loads its init files from here"),
    ("folder", [".ipython/", ".jupyter/"],
     "IPython and Jupyter run their *_config.py files and startup scripts"),
    # --- CI: runs with the repository's secrets on the next push
    ("folder", [".github/workflows/", ".github/actions/", ".circleci/", ".buildkite/",
                ".woodpecker/", ".gitea/workflows/", ".forgejo/workflows/"],
     "CI runs these on the next push, with the repository's secrets"),
    ("name", [".gitlab-ci.yml", ".travis.yml", ".drone.yml", ".woodpecker.yml",
              "azure-pipelines.yml", "bitbucket-pipelines.yml", "jenkinsfile"],
     "CI runs these on the next push, with the repository's secrets"),
    # --- shells, terminals and login sessions
    ("name", [".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases",
              ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc",
              ".tcshrc", ".kshrc", ".login", ".logout", ".inputrc", ".tmux.conf", ".screenrc",
              ".wezterm.lua"],
     "shells, readline (a key bound to a macro types and runs a command), tmux, screen and "
     "terminals read these on start"),
    ("folder", [".bashrc.d/", ".oh-my-zsh/", ".config/fish/", ".config/tmux/",
                ".config/kitty/", ".config/alacritty/", ".config/wezterm/"],
     "shells and terminals source or start what these folders hold"),
    ("name", [".envrc"], "direnv runs it on cd into the folder"),
    ("folder", [".config/direnv/"], "direnv sources direnvrc before every .envrc"),
    ("name", [".xprofile", ".xsessionrc", ".xsession", ".xinitrc", ".xserverrc"],
     "the X session runs these at login"),
    ("folder", [".config/autostart/", ".config/autostart-scripts/",
                ".config/plasma-workspace/", ".config/systemd/", ".config/environment.d/",
                ".config/i3/", ".config/sway/", ".config/hypr/", "library/launchagents/",
                "start menu/programs/startup/"],
     "the desktop, systemd --user, launchd or Windows start these at login"),
    # --- PATH, system folders, remote login and cloud CLIs
    ("folder", [".cargo/"], "cargo runs the rustc-wrapper, linker, runners and aliases "
     "that .cargo/config.toml sets; ~/.cargo/bin is on PATH and ~/.cargo/env is sourced"),
    ("folder", [".local/bin/"], "~/.local/bin is on PATH: a program here shadows others"),
    ("anchored", ["/home/*/bin/", "/root/bin/", "/users/*/bin/"],
     "a home's bin folder is on PATH in common shell profiles"),
    ("anchored", ["/etc/", "/var/spool/cron/"],
     "system configuration and crontabs: cron, systemd and profile.d run what is here"),
    ("path", [".ssh/rc", ".ssh/environment", ".ssh/config", ".ssh/authorized_keys",
              ".ssh/authorized_keys2"], "sshd runs ~/.ssh/rc at login and lets the keys listed "
     "log in (command= runs code); ssh runs ProxyCommand and LocalCommand"),
    ("path", [".kube/config", ".aws/config"],
     "kubectl and the AWS CLI run the credential commands these name"),
    # --- REPLs and debuggers
    ("name", [".gdbinit", ".lldbinit", ".pdbrc", ".pythonrc.py", ".psqlrc", ".sqliterc",
              ".irbrc", ".pryrc", ".ghci", ".rprofile"],
     "debuggers and REPLs run these commands or this code on start"),
    ("path", [".julia/config/startup.jl"], "Julia runs it on start"),
    # --- Python
    ("name", ["conftest.py", "sitecustomize.py", "usercustomize.py", "*.pth"],
     "Python runs these on start (site) or pytest on collection"),
    ("name", ["setup.py", "setup.cfg", "pyproject.toml", "tox.ini", "pytest.ini",
              ".pytest.ini", "noxfile.py"], "pip, tox, nox and pytest run the build backend, "
     "commands and plugins named here on install or test"),
    ("name", ["pip.conf", "pip.ini", "uv.toml"],
     "pip and uv install from the indexes named here"),
    # --- build tools and package managers
    ("name", ["makefile", "gnumakefile", "justfile", ".justfile", "taskfile.yml",
              "taskfile.yaml", "build.rs", "cargo.toml", "cmakelists.txt", "meson.build",
              "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts",
              "gradlew", "pom.xml", "mvnw", "shell.nix", "flake.nix", "default.nix"],
     "make, just, task, cargo, cmake, meson, gradle, maven and nix run the code and "
     "commands here on build (nix-shell and direnv's use nix on entering the folder)"),
    ("path", ["gradle/wrapper/gradle-wrapper.properties"],
     "gradlew downloads and runs the Gradle it names"),
    ("folder", [".mvn/"], "Maven loads the extensions and JVM options here"),
    ("name", ["gemfile", "rakefile", "rakefile.rb", "*.gemspec", "vagrantfile"],
     "bundler, rake and vagrant evaluate these Ruby files"),
    ("name", ["package.json", "composer.json", ".npmrc", ".yarnrc*", ".pnpmfile.cjs",
              ".pnpmfile.mjs", "bunfig.toml", ".bunfig.toml"],
     "npm, yarn, pnpm, bun and composer run install scripts and hooks, and the script "
     "shell, yarnPath or preload these name"),
    ("folder", [".yarn/releases/", ".yarn/plugins/"], "yarn runs the release and plugins here"),
    ("name", ["eslint.config.js", "eslint.config.mjs", "eslint.config.cjs", "eslint.config.ts",
              "eslint.config.mts", "eslint.config.cts", ".eslintrc.js", ".eslintrc.cjs"],
     "ESLint runs this JavaScript config, and the plugins it imports, on every lint and in "
     "editors as files open"),
    ("name", ["*.config.js", "*.config.mjs", "*.config.cjs", "*.config.ts", "*.config.mts",
              "*.config.cts"],
     "JavaScript tools (jest, vite, vitest, webpack, rollup, babel, postcss, tailwind, "
     "prettier, next, nuxt, svelte, astro, playwright) run their own config module on "
     "build, test, format or dev-server start"),
    ("name", [".*rc.js", ".*rc.cjs", ".*rc.mjs", ".*rc.ts", ".*rc.mts", ".*rc.cts"],
     "JavaScript tools (prettier, babel, mocha, stylelint, lint-staged, postcss, commitlint) "
     "run their own rc module on format, build, test or commit"),
    ("name", ["rust-toolchain.toml", "rust-toolchain"],
     "rustup reads it on every cargo or rustc call in the folder: its 'path' runs a custom "
     "toolchain, its channel and components are installed"),
    ("name", ["mise.toml", ".mise.toml", "mise.*.toml", ".mise.*.toml", ".tool-versions"],
     "mise runs hooks and env scripts on cd; a 'path:' version puts a folder on PATH"),
    ("folder", [".mise/", ".config/mise/"], "mise's configuration, as mise.toml"),
    ("path", ["mise/config.toml"], "mise's configuration, as mise.toml"),
    # --- executables and launchers
    ("name", ["*.sh", "*.bash", "*.zsh", "*.fish", "*.ksh", "*.csh", "*.command", "*.exe",
              "*.com", "*.bat", "*.cmd", "*.ps1", "*.psm1", "*.vbs", "*.vbe", "*.wsf",
              "*.jse", "*.hta", "*.cpl", "*.pif", "*.scr", "*.msi", "*.msix", "*.appx",
              "*.dll", "*.so", "*.dylib", "*.jar", "*.appimage", "*.run", "*.desktop",
              "*.service", "*.lnk", "*.reg", "*.apk", "*.deb", "*.rpm", "*.pkg"],
     "an executable, script, library or installer"),
    ("folder", ["*.app/contents/macos/"], "a macOS application's executable"),
))  # fmt: skip
"""Targets that run code or steer tools, as (kind, patterns, why) rows: one table,
matched as the module doc says, listed in docs/security.md."""

RUNS_CODE_PATTERNS: tuple[str, ...] = tuple(p for r in RUNS_CODE_RULES for p in r.patterns)
"""Every runs_code pattern of `RUNS_CODE_RULES`, in table order."""

SECRET_PATTERNS: tuple[str, ...] = (
    ".ssh/", ".aws/", ".gnupg/", ".kube/", ".docker/", ".azure/", ".config/gcloud/",
    ".password-store/",
    ".env", ".env.*", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".htpasswd",
    ".pypirc", ".npmrc", ".my.cnf", ".boto", ".s3cfg", "rclone.conf", "authorized_keys",
    "id_*", "credentials*", "secrets.*",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx", "*.ppk", "*.ovpn",
)  # fmt: skip
"""Credential-like names, in the pattern syntax of `CodeRule` (kind from the syntax)."""

_KINDS_REMOTE = frozenset({"upload", "upload_revision", "mkdir"})
_KINDS_LOCAL = frozenset({"download"})


@dataclass(frozen=True)
class RiskFlag:
    """One risk placet found: a stable `code` and a one-line `message` for the owner."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def _kind_of(pattern: str) -> str:
    if pattern.startswith("/"):
        return "anchored"
    if pattern.endswith("/"):
        return "folder"
    return "path" if "/" in pattern else "name"


def _component(glob: str) -> str | re.Pattern[str]:
    """A literal component, or a compiled glob (``*``: any characters, a leading one at
    least one)."""
    if "*" not in glob:
        return glob
    body = "".join(
        (".+" if i == 0 else ".*") if c == "*" else re.escape(c) for i, c in enumerate(glob)
    )
    return re.compile(body, re.DOTALL)


def _fits(comp: str | re.Pattern[str], part: str) -> bool:
    return comp == part if isinstance(comp, str) else comp.fullmatch(part) is not None


@dataclass(frozen=True)
class _Rule:
    order: int  # position in the table: the first matching rule is the one reported
    kind: str
    pattern: str
    why: str
    comps: tuple[str | re.Pattern[str], ...]


class _Rules:
    """Patterns indexed for speed: a rule is only tried where one of its literal
    components (or, for glob names, the combined name regex) already matched."""

    def __init__(self, rows: Sequence[tuple[str, str, str]]) -> None:
        self.by_literal: dict[str, list[tuple[_Rule, int]]] = {}  # folder and path rules
        self.anchored: list[_Rule] = []
        self.names: dict[str, _Rule] = {}
        self.glob_names: list[_Rule] = []
        for order, (kind, pattern, why) in enumerate(rows):
            if _kind_of(pattern) != kind:
                raise ValueError(f"risk rule {pattern!r} is written as a {_kind_of(pattern)}")
            comps = tuple(_component(c) for c in pattern.strip("/").split("/"))
            rule = _Rule(order, kind, pattern, why, comps)
            if kind == "anchored":
                self.anchored.append(rule)
            elif kind == "name":
                if isinstance(comps[0], str):
                    self.names.setdefault(comps[0], rule)
                else:
                    self.glob_names.append(rule)
            else:
                at = next((i for i, c in enumerate(comps) if isinstance(c, str)), None)
                if at is None:
                    raise ValueError(f"risk rule {pattern!r} needs one literal component")
                lit = comps[at]
                assert isinstance(lit, str)
                self.by_literal.setdefault(lit, []).append((rule, at))
        # The glob names as one alternation, one group per rule in table order: a
        # fullmatch takes the first alternative that matches the whole name, i.e. the
        # first rule the loop over them would find (one regex run instead of ~30 per path).
        globs = [r.comps[0] for r in self.glob_names]
        self.glob_name_re = (
            re.compile("|".join(f"({g.pattern})" for g in globs if not isinstance(g, str)),
                       re.DOTALL)
            if globs
            else None
        )  # fmt: skip

    def match(self, parts: Sequence[str], *, absolute: bool) -> tuple[_Rule, int] | None:
        """The first rule (in table order) that `parts` (folded components) matches, with
        the index of the first component it matched; or None. Anchored rules only when
        the path is `absolute`."""
        best: tuple[_Rule, int] | None = None

        def consider(rule: _Rule, at: int) -> None:
            nonlocal best
            if best is None or rule.order < best[0].order:
                best = (rule, at)

        n = len(parts)
        if absolute:
            for rule in self.anchored:
                k = len(rule.comps)
                if k <= n and all(_fits(c, p) for c, p in zip(rule.comps, parts, strict=False)):
                    consider(rule, 0)
        for i, part in enumerate(parts):
            for rule, off in self.by_literal.get(part, ()):
                start, k = i - off, len(rule.comps)
                if start < 0 or start + k > n:
                    continue
                if rule.kind == "path" and start + k != n:
                    continue
                if all(_fits(c, parts[start + j]) for j, c in enumerate(rule.comps)):
                    consider(rule, start)
        if n:
            last = parts[-1]
            hit = self.names.get(last)
            if hit is not None:
                consider(hit, n - 1)
            m = self.glob_name_re.fullmatch(last) if self.glob_name_re is not None else None
            if m is not None and m.lastindex is not None:
                consider(self.glob_names[m.lastindex - 1], n - 1)
        return best


_RUNS_CODE = _Rules([(r.kind, p, r.why) for r in RUNS_CODE_RULES for p in r.patterns])
_SECRET = _Rules([(_kind_of(p), p, "") for p in SECRET_PATTERNS])


@functools.lru_cache(maxsize=65536)
def fold_component(name: str) -> str:
    """The form a name is matched in: NFC, format characters dropped, case-folded, NFC
    again, trailing dots and spaces dropped."""
    s = unicodedata.normalize("NFC", name)
    s = "".join(c for c in s if unicodedata.category(c) != "Cf" and c not in INVISIBLE_LETTERS)
    s = unicodedata.normalize("NFC", s.casefold())
    return s.rstrip(" .") or s


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

    absolute = (base_path or "").startswith("/")

    def matched(hit: tuple[_Rule, int]) -> str:
        rule, at = hit
        why = f": {rule.why}" if rule.why else ""
        if at >= len(base_parts):
            return f"matches '{rule.pattern}'{why}"
        owner = "the local root" if kind in _KINDS_LOCAL else "the drive"
        return f"matches '{rule.pattern}' in the path of {owner} '{inert(base_path or '')}'{why}"

    flags: list[RiskFlag] = []
    hit = _RUNS_CODE.match(parts, absolute=absolute)
    if hit is not None:
        flags.append(
            RiskFlag(
                "runs_code",
                f"{shown} {where} is executable, or configuration that runs code or "
                f"steers coding agents ({matched(hit)})",
            )
        )
    hit = _SECRET.match(parts, absolute=absolute)
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
    flags.extend(RiskFlag(code, message) for code, message in name_flags(target_path))
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
    """True when the owner must type a confirmation: any flag at all (docs/design.md 9)."""
    return bool(flags)
