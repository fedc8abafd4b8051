"""runs_code: a table of targets that run code on a routine command (build, test, opening
an editor, cd, shell start, a git operation) and of ordinary ones that must not flag, each
matched on the root's absolute path joined with the target as `placet accept` does."""

from __future__ import annotations

import pytest

from placet.proposals.risk import RUNS_CODE_PATTERNS, RUNS_CODE_RULES, risk_flags


def _runs_code(base: str, target: str) -> str | None:
    flags = risk_flags(
        kind="download", target_path=target, replaces_existing=False, name_changed=False,
        base_path=base,
    )  # fmt: skip
    hits = [f.message for f in flags if f.code == "runs_code"]
    return hits[0] if hits else None


PROJ = "/home/me/proj"
HOME_DOT = "/home/me/dotfiles"

FLAGGED = [
    (PROJ, ".cargo/config.toml", ".cargo/"),
    (PROJ, ".cargo/config", ".cargo/"),
    (PROJ, ".CARGO/Config.TOML", ".cargo/"),
    (PROJ, "build.rs", "build.rs"),
    (PROJ, "pyproject.toml", "pyproject.toml"),
    (PROJ, "setup.py", "setup.py"),
    (PROJ, "setup.cfg", "setup.cfg"),
    (PROJ, "tox.ini", "tox.ini"),
    (PROJ, "pytest.ini", "pytest.ini"),
    (PROJ, "noxfile.py", "noxfile.py"),
    (PROJ, "tests/unit/conftest.py", "conftest.py"),
    (PROJ, "GNUmakefile", "gnumakefile"),
    (PROJ, "makefile", "makefile"),
    (PROJ, ".nvim.lua", ".nvim.lua"),
    (PROJ, ".exrc", ".exrc"),
    (PROJ, ".pnpmfile.cjs", ".pnpmfile.cjs"),
    (PROJ, "web/package.json", "package.json"),
    (PROJ, ".yarnrc.yml", ".yarnrc*"),
    (PROJ, "mise.toml", "mise.toml"),
    (PROJ, ".mise.toml", ".mise.toml"),
    (PROJ, "mise.local.toml", "mise.*.toml"),
    (PROJ, ".tool-versions", ".tool-versions"),
    (PROJ, ".envrc", ".envrc"),
    (PROJ, "Rakefile", "rakefile"),
    (PROJ, "Gemfile", "gemfile"),
    (PROJ, "x.gemspec", "*.gemspec"),
    (PROJ, ".githooks/pre-commit", ".githooks/"),
    (PROJ, ".husky/pre-push", ".husky/"),
    (PROJ, ".pre-commit-config.yaml", ".pre-commit-config.yaml"),
    (PROJ, ".github/workflows/ci.yml", ".github/workflows/"),
    (PROJ, ".gitlab-ci.yml", ".gitlab-ci.yml"),
    (PROJ, ".vscode/tasks.json", ".vscode/"),
    (PROJ, ".vscode/settings.json", ".vscode/"),
    (PROJ, ".idea/workspace.xml", ".idea/"),
    (PROJ, "gradle/wrapper/gradle-wrapper.properties",
     "gradle/wrapper/gradle-wrapper.properties"),
    (PROJ, "Cargo.toml", "cargo.toml"),
    # JavaScript and TypeScript tool configs: modules the tool imports and runs
    (PROJ, "eslint.config.js", "eslint.config.js"),
    (PROJ, "web/eslint.config.mjs", "eslint.config.mjs"),
    (PROJ, "eslint.config.ts", "eslint.config.ts"),
    (PROJ, ".eslintrc.js", ".eslintrc.js"),
    (PROJ, ".eslintrc.cjs", ".eslintrc.cjs"),
    (PROJ, "jest.config.js", "*.config.js"),
    (PROJ, "vite.config.ts", "*.config.ts"),
    (PROJ, "vitest.config.mts", "*.config.mts"),
    (PROJ, "webpack.config.cjs", "*.config.cjs"),
    (PROJ, "rollup.config.mjs", "*.config.mjs"),
    (PROJ, "babel.config.js", "*.config.js"),
    (PROJ, "postcss.config.cjs", "*.config.cjs"),
    (PROJ, "tailwind.config.ts", "*.config.ts"),
    (PROJ, "next.config.mjs", "*.config.mjs"),
    (PROJ, "nuxt.config.ts", "*.config.ts"),
    (PROJ, "svelte.config.js", "*.config.js"),
    (PROJ, "astro.config.mjs", "*.config.mjs"),
    (PROJ, "prettier.config.js", "*.config.js"),
    (PROJ, "app/Vite.Config.CTS", "*.config.cts"),
    (PROJ, ".prettierrc.js", ".*rc.js"),
    (PROJ, ".prettierrc.mjs", ".*rc.mjs"),
    (PROJ, ".babelrc.cjs", ".*rc.cjs"),
    (PROJ, ".mocharc.ts", ".*rc.ts"),
    # rustup: a toolchain file's `path` runs a custom toolchain
    (PROJ, "rust-toolchain.toml", "rust-toolchain.toml"),
    (PROJ, "crates/x/rust-toolchain", "rust-toolchain"),
    # bare repositories and hooks by name
    (PROJ, "mirror.git/hooks/post-receive", "*.git/hooks/"),
    ("/home/me/srv/repo.git", "hooks/pre-receive", "*.git/hooks/"),
    ("/home/me/srv/repo.git", "config", "*.git/config"),
    ("/home/me/srv/bare", "hooks/post-update", "hooks/post-update"),
    # home-directory configuration
    ("/home/me/.config/git", "config", ".config/git/"),
    (HOME_DOT, ".config/git/config", ".config/git/"),
    (HOME_DOT, ".config/gh/config.yml", ".config/gh/config.yml"),
    ("/home/me/.config/gh", "config.yml", ".config/gh/config.yml"),
    (HOME_DOT, ".gitconfig", ".gitconfig"),
    ("/home/me/.config/nvim", "init.lua", ".config/nvim/"),
    (HOME_DOT, ".config/fish/config.fish", ".config/fish/"),
    (HOME_DOT, ".config/autostart/x.desktop", ".config/autostart/"),
    (HOME_DOT, ".config/systemd/user/x.service", ".config/systemd/"),
    ("/home/me/.vim", "plugin/x.vim", ".vim/"),
    (HOME_DOT, ".vimrc", ".vimrc"),
    (HOME_DOT, ".emacs", ".emacs"),
    ("/home/me/.emacs.d", "init.el", ".emacs.d/"),
    ("/home/me/.ipython", "profile_default/startup/00.py", ".ipython/"),
    (HOME_DOT, ".bash_aliases", ".bash_aliases"),
    (HOME_DOT, ".bash_logout", ".bash_logout"),
    (HOME_DOT, ".xprofile", ".xprofile"),
    (HOME_DOT, ".xsessionrc", ".xsessionrc"),
    (HOME_DOT, ".xinitrc", ".xinitrc"),
    (HOME_DOT, ".gdbinit", ".gdbinit"),
    (HOME_DOT, ".tmux.conf", ".tmux.conf"),
    (HOME_DOT, ".hgrc", ".hgrc"),
    (HOME_DOT, ".pdbrc", ".pdbrc"),
    (HOME_DOT, ".pythonrc.py", ".pythonrc.py"),
    (HOME_DOT, ".inputrc", ".inputrc"),
    (PROJ, "lib/site-packages/sitecustomize.py", "sitecustomize.py"),
    (PROJ, "venv/lib/python3.11/site-packages/x.pth", "*.pth"),
    (HOME_DOT, ".local/bin/git", ".local/bin/"),
    ("/home/me/bin", "ls", "/home/*/bin/"),
    ("/root/bin", "ls", "/root/bin/"),
    ("/var/spool/cron/crontabs", "me", "/etc/ or /var/spool/cron/"),
    ("/home/me/.ssh", "rc", ".ssh/rc"),
    ("/home/me/.ssh", "authorized_keys", ".ssh/authorized_keys"),
    ("/home/me/.ssh", "config", ".ssh/config"),
    ("/home/me/Library/LaunchAgents", "x.plist", "library/launchagents/"),
]  # fmt: skip

NOT_FLAGGED = [
    (PROJ, "README.md"),
    (PROJ, "readme.txt"),
    (PROJ, "docs/index.md"),
    (PROJ, "src/main.rs"),
    (PROJ, "src/hooks/useAuth.ts"),  # a React hooks folder, not a git hook name
    (PROJ, "src/config.toml"),
    (PROJ, "config"),  # not in a *.git folder
    (PROJ, "bin/tool.py"),  # a project's bin folder is not a home's
    (PROJ, "data/build.json"),
    (PROJ, "requirements.txt"),
    (PROJ, "Cargo.lock"),
    (PROJ, ".gitignore"),
    (PROJ, ".gitattributes"),
    (PROJ, "notes/mise.md"),
    (PROJ, "cargo/notes.txt"),  # not .cargo
    (PROJ, "github/workflows.md"),
    (PROJ, "test_setup.py"),
    (PROJ, "pyproject.toml.bak"),
    (PROJ, "x.git.txt"),
    ("/srv/etc-backup", "notes.txt"),  # /etc only at the start of an absolute path
    ("/home/me/proj/etc", "hosts"),
    (HOME_DOT, "vimrc.md"),
    (PROJ, "src/config.js"),  # no <tool>. before .config
    (PROJ, "jest.config.json"),  # JSON is read, not run
    (PROJ, ".eslintrc.json"),
    (PROJ, ".prettierrc"),
    (PROJ, "src/rc.js"),  # not a dotfile
    (PROJ, "docs/rust-toolchain.md"),
    (HOME_DOT, ".config/gh/README.md"),
    (PROJ, "gh/config.yml"),  # not under .config
]


@pytest.mark.parametrize(("base", "target", "pattern"), FLAGGED)
def test_code_running_targets_are_flagged(base: str, target: str, pattern: str) -> None:
    message = _runs_code(base, target)
    assert message is not None, f"{base}/{target} should be runs_code"
    said = pattern.split(" or ")
    assert any(f"matches '{p}'" in message for p in said), message


@pytest.mark.parametrize(("base", "target"), NOT_FLAGGED)
def test_ordinary_targets_are_not_flagged(base: str, target: str) -> None:
    assert _runs_code(base, target) is None, f"{base}/{target}"


def test_anchored_rules_need_an_absolute_path() -> None:
    """A drive path like ``etc/x`` (relative to a remote) is not the system's /etc."""
    flags = risk_flags(
        kind="upload", target_path="hosts", replaces_existing=False, name_changed=False,
        base_path="Agents/etc",
    )  # fmt: skip
    assert flags == []
    assert _runs_code("/etc", "hosts") is not None


def test_message_says_which_tool_runs_it() -> None:
    message = _runs_code(PROJ, ".cargo/config.toml")
    assert message is not None
    assert "rustc-wrapper" in message and "'.cargo/config.toml' in the local root" in message


def test_table_is_well_formed() -> None:
    kinds = {"folder", "path", "name", "anchored"}
    for rule in RUNS_CODE_RULES:
        assert rule.kind in kinds and rule.why and rule.patterns, rule
        for p in rule.patterns:
            assert p == p.casefold() and p.isascii() and p.strip() == p, p
    assert len(set(RUNS_CODE_PATTERNS)) == len(RUNS_CODE_PATTERNS)
    assert len(RUNS_CODE_PATTERNS) > 150


def test_docs_security_lists_every_pattern() -> None:
    """docs/security.md carries the table: every pattern, with its kind and why."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    for rule in RUNS_CODE_RULES:
        row = f"| {rule.kind} | " + ", ".join(f"`{p}`" for p in rule.patterns)
        assert f"{row} | {rule.why} |" in doc, rule.patterns[0]
