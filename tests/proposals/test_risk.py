"""Risk flags: a table of targets and the flags placet must raise for them."""

from __future__ import annotations

import pytest

from placet.proposals.risk import (
    RUNS_CODE_PATTERNS,
    SECRET_PATTERNS,
    RiskFlag,
    drive_base,
    fold_component,
    needs_typed_confirmation,
    risk_flags,
)


def codes(kind: str, path: str, *, replaces: bool = False, renamed: bool = False) -> list[str]:
    flags = risk_flags(
        kind=kind, target_path=path, replaces_existing=replaces, name_changed=renamed
    )
    return [f.code for f in flags]


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        "proj/.git/config",
        ".git",  # a gitfile redirecting the repository
        ".mcp.json",
        ".claude/settings.json",
        "sub/.vscode/tasks.json",
        ".idea/workspace.xml",
        ".github/workflows/ci.yml",
        ".GitHub/Workflows/Release.YML",
        ".bashrc",
        ".zshrc",
        ".profile",
        ".bash_profile",
        ".envrc",
        "tests/conftest.py",
        "sitecustomize.py",
        "usercustomize.py",
        "lib/python3.11/site-packages/evil.pth",
        "Makefile",
        "MAKEFILE",
        ".pre-commit-config.yaml",
        "package.json",
        ".npmrc",
        "CLAUDE.md",
        "AGENTS.md",
        "run.sh",
        "setup.exe",
        "x.bat",
        "x.PS1",
        ".config/systemd/user/evil.service",
        "Makefile.",  # Windows drops the trailing dot
        ".g\u200cit/config",  # HFS+ ignores ZWNJ: this is .git there
        "Ma\u212aefile",  # KELVIN SIGN folds to k
        "conftest.py ",
    ],
)
def test_runs_code_targets(path: str) -> None:
    for kind in ("upload", "download"):
        assert "runs_code" in codes(kind, path), (kind, path)


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        "app/.env.local",
        ".ENV.production",
        "keys/server.pem",
        "tls.key",
        "id_rsa",
        "id_ed25519",
        "id_ecdsa.pub",
        ".netrc",
        "credentials.json",
        "Credentials",
        "cert.p12",
        ".aws/credentials",
        ".ssh/config",
        "home/.ssh/authorized_keys",
        ".pypirc",
    ],
)
def test_secret_targets(path: str) -> None:
    assert "secret_name" in codes("download", path), path
    assert "secret_name" in codes("upload", path), path


@pytest.mark.parametrize(
    "path",
    [
        "docs/report.pdf",
        "src/main.py",
        "README.md",
        "notes/git-tips.md",
        "mygit/readme.txt",
        "workflows/ci.yml",  # not under .github
        "env.txt",
        "environment.yml",
        "keyboard.txt",
        "identity.txt",  # not id_*
        "packages.json",
        "bash_notes.txt",
        ".sh",  # a bare suffix is not an executable's name
        "",
    ],
)
def test_ordinary_targets_have_no_flags(path: str) -> None:
    assert codes("upload", path) == []
    assert not needs_typed_confirmation(
        risk_flags(kind="upload", target_path=path, replaces_existing=False, name_changed=False)
    )


def test_replacement_and_rename() -> None:
    assert codes("upload", "a.txt", replaces=True) == ["replaces_existing"]
    assert codes("upload", "a.txt", renamed=True) == ["name_changed"]
    up = risk_flags(
        kind="upload_revision",
        target_path="a.txt",
        replaces_existing=True,
        name_changed=True,
        source_name="b.txt",
    )
    assert [f.code for f in up] == ["replaces_existing", "name_changed"]
    assert "on the drive" in up[0].message and "'b.txt'" in up[1].message
    down = risk_flags(
        kind="download", target_path="a.txt", replaces_existing=True, name_changed=False
    )
    assert "trash" in down[0].message and "local root" in down[0].message
    assert needs_typed_confirmation(up)


def test_flag_order_is_fixed() -> None:
    got = codes("download", ".ssh/id_rsa.sh", replaces=True, renamed=True)
    assert got == ["runs_code", "secret_name", "replaces_existing", "name_changed"]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("caf\u00e9.txt", "non_ascii_name"),
        ("日本語/レポートv2.txt", "non_ascii_name"),  # Han + kana + Latin is ordinary Japanese
        ("Ωμέγα.txt", "non_ascii_name"),  # Greek word, Latin extension: not mixed
        ("отчёт-2024_final.txt", "non_ascii_name"),
        ("p\u0430ypal.txt", "confusable_name"),  # Cyrillic а among Latin letters
        ("\u0440\u0430\u0443\u0440\u0430l", "confusable_name"),  # Cyrillic + one Latin l
        ("ｒｅｐｏｒｔ.txt", "confusable_name"),  # fullwidth
        ("re\u200bport.txt", "bidi_or_invisible"),  # zero-width space
        ("evil\u202etxt.exe", "bidi_or_invisible"),
        ("\U0001d41a.txt", "confusable_name"),  # MATHEMATICAL BOLD SMALL A
        ("Ma\u212aefile", "confusable_name"),  # KELVIN SIGN: NFC gives ASCII K
        ("ﬁle.txt", "confusable_name"),  # fi ligature
    ],
)
def test_non_ascii_and_confusable_names(path: str, code: str) -> None:
    flags = risk_flags(kind="upload", target_path=path, replaces_existing=False, name_changed=False)
    names = {"non_ascii_name", "confusable_name", "bidi_or_invisible"}
    assert [f.code for f in flags if f.code in names] == [code]
    msg = flags[-1].message
    # The escaped form is shown: beside the original, or as the name itself when every
    # non-ASCII character in it is one placet always shows escaped (bidi, invisible).
    assert "ASCII:" in msg or ("\\u" in msg and msg.isascii())
    assert "\u202e" not in msg and "\u200b" not in msg  # never raw


def test_confusable_message_names_the_imitated_ascii() -> None:
    flags = risk_flags(
        kind="upload", target_path="ｒｅａｄｍｅ.md", replaces_existing=False, name_changed=False
    )
    assert "imitates the ASCII name 'readme.md'" in flags[-1].message


@pytest.mark.parametrize(
    "path",
    ["docs/\u00e9.md", "backup/caf\u00e9.txt", "caf\u0065\u0301/notes.md", "r\u00e9sum\u00e9"],
)
def test_plain_accented_names_are_only_non_ascii(path: str) -> None:
    assert codes("upload", path) == ["non_ascii_name"]


def test_confusable_names_the_component_with_the_lookalikes() -> None:
    flags = risk_flags(
        kind="upload",
        target_path="docs/p\u0430ypal/x.txt",
        replaces_existing=False,
        name_changed=False,
    )
    (flag,) = flags
    assert flag.code == "confusable_name"
    assert "the folder 'p" in flag.message and "mixes Latin letters with lookalikes" in flag.message
    assert "'docs'" not in flag.message


def test_bidi_override_is_named_as_such() -> None:
    flags = risk_flags(
        kind="download",
        target_path="evil/invoice_\u202etxt.exe",
        replaces_existing=False,
        name_changed=False,
    )
    got = [f.code for f in flags]
    assert got == ["runs_code", "bidi_or_invisible"]
    assert "bidirectional override" in flags[-1].message
    assert "imitates" not in flags[-1].message and "'evil'" not in flags[-1].message
    assert "\u202e" not in flags[-1].message
    (inv,) = risk_flags(
        kind="upload", target_path="re\u200bport.txt", replaces_existing=False, name_changed=False
    )
    assert inv.code == "bidi_or_invisible" and "invisible characters" in inv.message


def test_invisible_plus_accents_gets_both_flags() -> None:
    assert codes("upload", "caf\u00e9\u200b.txt") == ["bidi_or_invisible", "non_ascii_name"]


def test_messages_are_inert_and_name_the_match() -> None:
    (flag,) = risk_flags(
        kind="download", target_path="x/.envrc", replaces_existing=False, name_changed=False
    )
    assert flag == RiskFlag("runs_code", flag.message)
    assert "'.envrc'" in flag.message and "local root" in flag.message
    assert flag.to_dict() == {"code": "runs_code", "message": flag.message}
    flags = risk_flags(
        kind="upload", target_path="a\x1b[2J.sh", replaces_existing=False, name_changed=False
    )
    assert all("\x1b" not in f.message for f in flags)


def test_mkdir_of_a_code_folder_is_flagged() -> None:
    assert codes("mkdir", ".git") == ["runs_code"]
    assert codes("mkdir", "proj/.github/workflows") == ["runs_code"]
    assert codes("mkdir", "proj/.github") == []


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        risk_flags(kind="delete", target_path="a", replaces_existing=False, name_changed=False)


def test_fold_component_and_lists_are_canonical() -> None:
    assert fold_component("Ma\u212aefile.") == "makefile"
    assert fold_component("Cafe\u0301") == fold_component("Caf\u00e9") == "caf\u00e9"
    for p in RUNS_CODE_PATTERNS + SECRET_PATTERNS:
        assert p == p.casefold() and p.isascii(), p  # patterns are stored folded
    assert len(set(RUNS_CODE_PATTERNS)) == len(RUNS_CODE_PATTERNS)
    assert len(set(SECRET_PATTERNS)) == len(SECRET_PATTERNS)


# --- the root's (or drive's) own path counts ----------------------------------------------


@pytest.mark.parametrize(
    ("base", "target", "code", "pattern"),
    [
        ("/x/.git", "info/exclude", "runs_code", ".git/"),
        ("/x/proj/.git", "config", "runs_code", ".git/"),
        ("/home/u/.ssh", "config", "secret_name", ".ssh/"),
        ("/home/u/.ssh", "notes.txt", "secret_name", ".ssh/"),
        ("/home/u/.config", "systemd/user/x.timer", "runs_code", ".config/systemd/"),
        ("/home/u/.claude", "settings.json", "runs_code", ".claude/"),
        ("/srv/.github/workflows", "ci.yml", "runs_code", ".github/workflows/"),
        ("/srv/.GitHub", "Workflows/ci.yml", "runs_code", ".github/workflows/"),
    ],
)
def test_sensitive_component_in_the_root_path_flags(
    base: str, target: str, code: str, pattern: str
) -> None:
    assert code not in codes("download", target)  # the relative path alone looks harmless
    flags = risk_flags(
        kind="download", target_path=target, replaces_existing=False, name_changed=False,
        base_path=base,
    )  # fmt: skip
    [flag] = [f for f in flags if f.code == code]
    assert f"matches '{pattern}' in the path of the local root '{base}'" in flag.message


def test_sensitive_component_in_the_drive_path_flags() -> None:
    flags = risk_flags(
        kind="upload", target_path="pre-commit", replaces_existing=False, name_changed=False,
        base_path=drive_base("gdrive:repo/.git/hooks"),
    )  # fmt: skip
    assert [f.code for f in flags] == ["runs_code"]
    assert "in the path of the drive 'repo/.git/hooks'" in flags[0].message
    plain = risk_flags(
        kind="upload", target_path="docs/a.txt", replaces_existing=False, name_changed=False,
        base_path="/x/proj",
    )  # fmt: skip
    assert plain == []


def test_drive_base() -> None:
    assert drive_base("protondrive:Agents/x") == "Agents/x"
    assert drive_base("protondrive:") == ""
    assert drive_base(":local,links:/srv/d") == "/srv/d"
    assert drive_base("/srv/drive") == "/srv/drive"


# --- confusable means confusable with an ASCII name; ASCII form said once ------------------


@pytest.mark.parametrize(
    "name",
    [
        "\u30ec\u30dd\u30fc\u30c8\uff12\uff10\uff12\uff14.txt",
        "\u00bd.txt",
        "\u041e\u0442\u0447\u0451\u0442 \u03a9.txt",
    ],
)
def test_non_ascii_compat_forms_that_imitate_no_ascii_name_are_only_non_ascii(name: str) -> None:
    for path in (name, f"docs/{name}", f"a/b/{name}"):
        assert codes("upload", path) == ["non_ascii_name"], path


@pytest.mark.parametrize("folder", ["docs", "caf\u00e9", "\uff12\uff10\uff12\uff14"])
def test_confusable_is_about_the_name_not_its_folder(folder: str) -> None:
    (flag,) = [
        f
        for f in risk_flags(
            kind="upload",
            target_path=f"{folder}/p\u0430ypal.txt",
            replaces_existing=False,
            name_changed=False,
        )
        if f.code == "confusable_name"
    ]
    assert flag.message.startswith("the name 'p\u0430ypal.txt (ASCII: p\\u0430ypal.txt)'")


def test_ascii_form_is_said_once() -> None:
    for path, kw in (
        ("d\u00e9j\u00e0/caf\u00e9.sh", {"replaces": True, "renamed": True}),
        ("caf\u00e9\u200b.txt", {}),
        ("evil/\u0440\u0430y\u202e.txt", {"replaces": True}),
    ):
        flags = risk_flags(
            kind="upload", target_path=path, replaces_existing=bool(kw.get("replaces")),
            name_changed=bool(kw.get("renamed")), source_name="x.sh",
        )  # fmt: skip
        assert len(flags) >= 2, path
        text = "\n".join(f.message for f in flags)
        assert text.count("(ASCII:") == 1, text


@pytest.mark.parametrize(
    ("path", "where", "shown"),
    [
        ("report.pdf ", "ends", "the name 'report.pdf '"),
        (" report.pdf", "begins", "the name ' report.pdf'"),
        ("docs /report.pdf", "ends", "the folder 'docs '"),
        ("\treport.pdf\t", "begins and ends", "the name '\\treport.pdf\\t'"),
    ],
)
def test_white_space_at_a_names_edge_may_pass_for_the_name_without_it(
    path: str, where: str, shown: str
) -> None:
    flags = risk_flags(kind="upload", target_path=path, replaces_existing=False, name_changed=False)
    (flag,) = flags
    assert flag.code == "confusable_name" and needs_typed_confirmation(flags)
    assert shown in flag.message
    assert f"it {where} with white space" in flag.message


@pytest.mark.parametrize("path", ["a b.txt", "my docs/a  b.txt", "x/y z/w"])
def test_white_space_inside_a_name_is_not_flagged(path: str) -> None:
    assert codes("upload", path) == []
