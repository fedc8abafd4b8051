"""Path rules: a hostile table per rule, each asserting the specific refusal code."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from placet.config import Settings
from placet.errors import NotFound, PathRefused, PlacetError, UsageError
from placet.names import check_not_reserved, is_reserved_name
from placet.paths.local import check_local_shape, resolve_local
from placet.paths.remote import check_name, check_remote_path
from placet.paths.roots import Root, parse_root_spec, parse_roots


@pytest.fixture
def root_base(tmp_path: Path) -> Path:
    """tmp/x/root (the root) beside tmp/x/root-evil and tmp/x/outside.txt."""
    base = tmp_path / "x"
    root = base / "root"
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("a")
    (root / "top.txt").write_text("t")
    (base / "root-evil").mkdir()
    (base / "root-evil" / "secret.txt").write_text("s")
    (base / "outside.txt").write_text("o")
    return base


@pytest.fixture
def roots(root_base: Path, placet_home: Path) -> list[Root]:
    return parse_roots([f"main={root_base / 'root'}"], placet_home)


def code_of(exc: PlacetError) -> str:
    return exc.error_code


# --- roots -----------------------------------------------------------------------------


def test_parse_root_spec_records_identity_and_default_name(
    root_base: Path, placet_home: Path
) -> None:
    root = parse_root_spec(str(root_base / "root"), placet_home)
    st = os.stat(root_base / "root")
    assert root == Root("root", root_base / "root", st.st_dev, st.st_ino)
    assert root.path.is_absolute()
    ref = root.to_ref()
    assert (ref.name, ref.path, ref.device, ref.inode) == (
        "root",
        str(root_base / "root"),
        st.st_dev,
        st.st_ino,
    )


def test_parse_root_spec_resolves_a_symlinked_dir(root_base: Path, placet_home: Path) -> None:
    os.symlink(root_base / "root", root_base / "alias")
    root = parse_root_spec(f"w={root_base / 'alias'}", placet_home)
    assert root.path == root_base / "root" and root.name == "w"


def test_parse_root_spec_equals_in_directory_name(
    root_base: Path, placet_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root_base / "a=b").mkdir()
    monkeypatch.chdir(root_base)
    root = parse_root_spec("w=./a=b", placet_home)  # NAME= only when it is a valid name
    assert (root.name, root.path) == ("w", root_base / "a=b")
    with pytest.raises(UsageError, match="NAME=DIR"):
        parse_root_spec("./a=b", placet_home)  # a directory; its basename is no valid name


@pytest.mark.parametrize(
    "spec_fn",
    [
        lambda t, h: "/",
        lambda t, h: str(Path.home()),
        lambda t, h: f"h={Path.home()}",
        lambda t, h: str(Path.home().parent),  # an ancestor of the home exposes all of it
        lambda t, h: str(t / "outside.txt"),  # not a directory
        lambda t, h: str(t / "missing"),
        lambda t, h: "name=",
        lambda t, h: str(h),  # the data dir itself
        lambda t, h: str(h / "drive"),  # inside the data dir
        lambda t, h: str(h.parent),  # contains the data dir
    ],
)
def test_parse_root_spec_refuses(root_base: Path, placet_home: Path, spec_fn) -> None:  # type: ignore[no-untyped-def]
    placet_home.mkdir(exist_ok=True)
    (placet_home / "drive").mkdir(exist_ok=True)
    spec = spec_fn(root_base, placet_home)
    with pytest.raises(UsageError) as ei:
        parse_root_spec(spec, placet_home)
    assert code_of(ei.value) == "root_refused"
    assert "--root" in ei.value.message


def test_parse_root_spec_refuses_unusable_default_name(tmp_path: Path, placet_home: Path) -> None:
    (tmp_path / "my project").mkdir()
    with pytest.raises(UsageError, match="NAME=DIR"):
        parse_root_spec(str(tmp_path / "my project"), placet_home)
    assert parse_root_spec(f"proj={tmp_path / 'my project'}", placet_home).name == "proj"


def test_parse_roots_refuses_duplicates_and_empty(root_base: Path, placet_home: Path) -> None:
    (root_base / "other" / "root").mkdir(parents=True)
    with pytest.raises(UsageError, match="already used"):
        parse_roots([str(root_base / "root"), str(root_base / "other" / "root")], placet_home)
    with pytest.raises(UsageError, match="same folder"):
        parse_roots([f"a={root_base / 'root'}", f"b={root_base / 'root'}"], placet_home)
    with pytest.raises(UsageError, match="at least one"):
        parse_roots([], placet_home)
    got = parse_roots([str(root_base / "root"), f"o={root_base / 'other' / 'root'}"], placet_home)
    assert [r.name for r in got] == ["root", "o"]


# --- local shape -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "a/../../b",
        "a/..",
        "..",
        "C:\\x",
        "C:/x",
        "c:",
        "\\\\server\\share",
        "//server/share",
        "a\\b",
        "a\x00b",
        "a\x1bb",
        "a\x9bb",
        "a\x7fb",
        "a\nb",
        "lone\udcff",
        "CON",
        "con",
        "nul.txt",
        "docs/NUL.tar.gz",
        "aux ",
        "COM1",
        "lpt9.log",
        "com\u00b9",
        "x" * 256,
        "é" * 128,  # 256 bytes of UTF-8 in 128 characters
        "/".join(["d"] * 17),
        "/".join(["d"] * 20),
        "a/" * 2100,
        "/etc/passwd",  # absolute: not a relative shape
    ],
)
def test_check_local_shape_refuses(bad: str) -> None:
    with pytest.raises(PathRefused) as ei:
        check_local_shape(bad)
    assert code_of(ei.value) == "path_invalid"
    msg = ei.value.message
    assert "\x00" not in msg and "\x1b" not in msg and "\n" not in msg
    assert ";" in msg  # says what to do instead


@pytest.mark.parametrize(
    ("good", "parts"),
    [
        ("", ()),
        (".", ()),
        ("a.txt", ("a.txt",)),
        ("docs/a.txt", ("docs", "a.txt")),
        ("docs//./a.txt", ("docs", "a.txt")),
        ("docs/", ("docs",)),
        ("x" * 255, ("x" * 255,)),
        ("/".join(["d"] * 16), ("d",) * 16),
        ("console.txt", ("console.txt",)),  # CON only as the whole stem
        ("time 10:30.txt", ("time 10:30.txt",)),  # a colon is a legal POSIX name char
        ("café/日本.txt", ("café", "日本.txt")),
        ("..hidden", ("..hidden",)),
    ],
)
def test_check_local_shape_accepts(good: str, parts: tuple[str, ...]) -> None:
    assert check_local_shape(good).parts == parts


# --- resolve_local ---------------------------------------------------------------------


def test_resolve_local_relative_and_absolute(roots: list[Root], root_base: Path) -> None:
    root, rel = resolve_local(roots, "docs/a.txt")
    assert root.name == "main" and rel == PurePosixPath("docs/a.txt")
    root, rel = resolve_local(roots, str(root_base / "root" / "docs" / "a.txt"))
    assert rel == PurePosixPath("docs/a.txt")
    assert resolve_local(roots, "")[1].parts == ()
    assert resolve_local(roots, str(root_base / "root"))[1].parts == ()
    assert resolve_local(roots, ".", "main")[1].parts == ()


def test_resolve_local_named_root_and_nested_choice(root_base: Path, placet_home: Path) -> None:
    roots = parse_roots(
        [f"main={root_base / 'root'}", f"docs={root_base / 'root' / 'docs'}"], placet_home
    )
    assert resolve_local(roots, "a.txt", "docs")[0].name == "docs"
    root, rel = resolve_local(roots, str(root_base / "root" / "docs" / "a.txt"))
    assert root.name == "docs" and rel == PurePosixPath("a.txt")  # deepest root wins
    with pytest.raises(PathRefused) as ei:
        resolve_local(roots, str(root_base / "root" / "top.txt"), "docs")
    assert code_of(ei.value) == "path_outside_root"


def test_resolve_local_missing_tail(roots: list[Root]) -> None:
    with pytest.raises(NotFound):
        resolve_local(roots, "docs/new/file.txt")
    _root, rel = resolve_local(roots, "docs/new/file.txt", must_exist=False)
    assert rel == PurePosixPath("docs/new/file.txt")


def _setup_links(tree: Path) -> None:
    root = tree / "root"
    os.symlink(tree / "outside.txt", root / "out-link")
    os.symlink(root / "docs" / "a.txt", root / "in-link")
    os.symlink(tree / "root-evil", root / "evil-dir")
    os.symlink(root / "docs", root / "docs-link")


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../x", "path_invalid"),
        ("a/../../b", "path_invalid"),
        ("C:\\x", "path_invalid"),
        ("\\\\server\\share", "path_invalid"),
        ("a\\b", "path_invalid"),
        ("a\x00b", "path_invalid"),
        ("CON", "path_invalid"),
        ("nul.txt", "path_invalid"),
        ("x" * 300, "path_invalid"),
        ("/".join(["d"] * 20), "path_invalid"),
        ("esc\x1b[2J", "path_invalid"),
        ("/etc/passwd", "path_outside_root"),
        ("//server/share", "path_invalid"),
        ("{tree}/root-evil/secret.txt", "path_outside_root"),  # sibling extending the name
        ("{tree}/root/../outside.txt", "path_invalid"),
        ("{tree}/outside.txt", "path_outside_root"),
        ("out-link", "path_outside_root"),  # symlink to outside the root
        ("evil-dir/secret.txt", "path_outside_root"),
        ("in-link", "symlink_refused"),  # symlink inside pointing inside
        ("docs-link/a.txt", "symlink_refused"),  # a parent folder that is a symlink
        ("top.txt/x", "not_a_directory"),
    ],
)
def test_resolve_local_hostile_table(
    roots: list[Root], root_base: Path, path: str, code: str
) -> None:
    _setup_links(root_base)
    path = path.replace("{tree}", str(root_base))
    with pytest.raises(PathRefused) as ei:
        resolve_local(roots, path, must_exist=False)
    assert code_of(ei.value) == code, ei.value.message
    assert "\x1b" not in ei.value.message and "\x00" not in ei.value.message


def test_resolve_local_unknown_root(roots: list[Root]) -> None:
    with pytest.raises(PathRefused) as ei:
        resolve_local(roots, "a", "nope")
    assert code_of(ei.value) == "root_unknown"
    assert "main" in ei.value.message
    with pytest.raises(PathRefused) as ei:
        resolve_local([], "a")
    assert code_of(ei.value) == "root_unknown"


def test_resolve_local_refuses_replaced_root(roots: list[Root], root_base: Path) -> None:
    os.rename(root_base / "root", root_base / "moved")
    (root_base / "root").mkdir()
    (root_base / "root" / "top.txt").write_text("impostor")
    with pytest.raises(PathRefused) as ei:
        resolve_local(roots, "top.txt")
    assert code_of(ei.value) == "root_changed"
    (root_base / "root" / "top.txt").unlink()
    os.rmdir(root_base / "root")
    os.symlink(root_base / "moved", root_base / "root")  # same inode behind a link: still refused
    with pytest.raises(PathRefused) as ei:
        resolve_local(roots, "top.txt")
    assert code_of(ei.value) == "root_changed"


# --- remote ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "-flag",
        "docs/-rf",
        ":local:/etc",
        "other:x",
        "docs/a:b",
        "a/../b",
        "..",
        ".",
        "a/./b",
        "a//b",
        "a//",
        "/abs",
        "/",
        "a\\b",
        "esc\x1b",
        "c1\x85",
        "del\x7f",
        "nul\x00",
        "tab\there",
        "lone\udcff",
        "x" * 256,
        "/".join(["d"] * 65),
    ],
)
def test_check_remote_path_refuses(bad: str) -> None:
    with pytest.raises(PathRefused) as ei:
        check_remote_path(bad)
    assert code_of(ei.value) == "path_invalid"
    assert "\x1b" not in ei.value.message and "\x00" not in ei.value.message


@pytest.mark.parametrize(
    ("good", "norm"),
    [
        ("", ""),
        ("docs", "docs"),
        ("docs/", "docs"),
        ("docs/a b.txt", "docs/a b.txt"),
        ("a-b/c-", "a-b/c-"),
        ("Café/日本.txt", "Café/日本.txt"),
        ("x" * 255, "x" * 255),
        ("/".join(["d"] * 64), "/".join(["d"] * 64)),
        (".hidden/..x", ".hidden/..x"),
    ],
)
def test_check_remote_path_accepts(good: str, norm: str) -> None:
    assert check_remote_path(good) == norm


def test_check_remote_path_leading_slash_message_says_what_to_write() -> None:
    with pytest.raises(PathRefused, match="write 'docs/a'"):
        check_remote_path("/docs/a")


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "-x", "a:b", "a\\b", "x\x1b", "x" * 256])
def test_check_name_refuses(bad: str) -> None:
    with pytest.raises(PathRefused) as ei:
        check_name(bad)
    assert code_of(ei.value) == "path_invalid"


def test_check_name_accepts() -> None:
    assert check_name("report.pdf") == "report.pdf"
    assert check_name(".env") == ".env"


def test_absolute_path_in_another_root_names_that_root(root_base: Path, placet_home: Path) -> None:
    (root_base / "other").mkdir()
    (root_base / "other" / "o.txt").write_text("o")
    roots = parse_roots([f"proj={root_base / 'root'}", f"other={root_base / 'other'}"], placet_home)
    with pytest.raises(PathRefused) as ei:
        resolve_local(roots, str(root_base / "other" / "o.txt"), "proj")
    msg = ei.value.message
    assert code_of(ei.value) == "path_outside_root"
    assert "lies in the root 'other'" in msg and "not in 'proj'" in msg
    assert "root='other'" in msg and "omit root" in msg and "outside every" not in msg
    assert ei.value.details["path_root"] == "other"
    # Without root, or with the right one, it resolves.
    assert resolve_local(roots, str(root_base / "other" / "o.txt"))[0].name == "other"
    assert resolve_local(roots, str(root_base / "other" / "o.txt"), "other")[0].name == "other"
    # A path under no root still says so.
    with pytest.raises(PathRefused, match="outside every local root"):
        resolve_local(roots, str(root_base / "outside.txt"), "proj")


def test_reserved_temp_prefix_is_refused_as_a_name() -> None:
    from placet.names import TEMP_PREFIX

    with pytest.raises(PathRefused) as e:
        check_name(TEMP_PREFIX + "0000-report.txt")
    assert e.value.error_code == "path_reserved"
    assert "reserved for placet's temporary files" in e.value.message
    assert check_name("placet-tmp-report.txt") == "placet-tmp-report.txt"


# --- placet's own folders (config dir, data dir, database folder) ------------------------


@pytest.fixture
def split_settings(tmp_path: Path) -> Settings:
    """Settings whose config dir, data dir and database folder are three folders apart, as
    without PLACET_HOME (~/.config/placet, ~/.local/share/placet, PLACET_DB elsewhere)."""
    home = tmp_path / "home"
    for d in (".config/placet", ".local/share/placet", "dbs/placet-db", "projects/app"):
        (home / d).mkdir(parents=True)
    (home / ".config/placet/config.toml").write_text("allow_yes = false\n")
    return Settings(
        data_dir=home / ".local/share/placet",
        db_path=home / "dbs/placet-db/placet.db",
        config_file=home / ".config/placet/config.toml",
    )


@pytest.mark.parametrize(
    ("rel", "folder", "relation"),
    [
        (".config/placet", ".config/placet", "it is"),
        (".config", ".config/placet", "it contains"),
        (".local/share", ".local/share/placet", "it contains"),
        ("dbs/placet-db", "dbs/placet-db", "it is"),
        ("dbs", "dbs/placet-db", "it contains"),
    ],
)
def test_root_overlapping_a_placet_folder_is_refused(
    split_settings: Settings, rel: str, folder: str, relation: str
) -> None:
    home = split_settings.data_dir.parents[2]
    with pytest.raises(UsageError) as ei:
        parse_roots([f"r={home / rel}"], split_settings)
    msg = ei.value.message
    assert code_of(ei.value) == "root_refused"
    assert f"'r={home / rel}'" in msg  # the root as given
    assert f"{relation} placet's own" in msg and f"'{home / folder}'" in msg  # the folder
    assert "name a project folder apart from it" in msg  # what to do


def test_root_inside_the_config_dir_is_refused_and_says_how_to_move_it(
    split_settings: Settings,
) -> None:
    inner = split_settings.config_file.parent / "sub"
    inner.mkdir()
    with pytest.raises(UsageError, match="lies inside placet's own config directory") as ei:
        parse_root_spec(str(inner), split_settings)
    assert "PLACET_HOME" in ei.value.message
    with pytest.raises(UsageError, match=r"database directory.*PLACET_DB"):
        parse_root_spec(str(split_settings.db_path.parent), split_settings)


def test_root_reaching_the_config_dir_through_a_symlink_is_refused(
    split_settings: Settings, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(split_settings.config_file.parent.parent)  # .../.config
    with pytest.raises(UsageError, match="contains placet's own config directory"):
        parse_root_spec(f"a={alias}", split_settings)


def test_root_beside_placet_folders_is_accepted(split_settings: Settings) -> None:
    home = split_settings.data_dir.parents[2]
    [root] = parse_roots([f"app={home / 'projects/app'}"], split_settings)
    assert root.path == home / "projects/app"


def test_serve_refuses_a_root_holding_the_config_dir(tmp_path: Path) -> None:
    """End to end: `placet serve` (no PLACET_HOME) with the XDG config dir as a root."""
    import subprocess
    import sys

    xdg_config, xdg_data = tmp_path / "xdg-config", tmp_path / "xdg-data"
    (xdg_config / "placet").mkdir(parents=True)
    xdg_data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLACET_", "XDG_"))}
    env |= {"XDG_CONFIG_HOME": str(xdg_config), "XDG_DATA_HOME": str(xdg_data)}
    r = subprocess.run(
        [str(Path(sys.executable).parent / "placet"), "serve", "--root", str(xdg_config)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "contains placet's own config directory" in r.stderr
    assert str(xdg_config / "placet") in r.stderr


# --- the reserved temporary prefix -------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".placet-tmp-x",
        "docs/.placet-tmp-0a1b-report.txt",
        ".placet-tmp-dir/a.txt",
        "a/.placet-tmp-/b",
    ],
)
def test_reserved_prefix_refused_in_remote_paths(path: str) -> None:
    with pytest.raises(PathRefused) as ei:
        check_remote_path(path)
    assert ei.value.error_code == "path_reserved"
    assert "reserved for placet's temporary files" in ei.value.message
    assert ei.value.details["prefix"] == ".placet-tmp-"


def test_reserved_prefix_refused_in_local_paths(roots: list[Root], root_base: Path) -> None:
    for path in (
        ".placet-tmp-1234-a.txt",
        "docs/.placet-tmp-x",
        str(root_base / "root" / ".placet-tmp-y"),
    ):
        with pytest.raises(PathRefused) as ei:
            resolve_local(roots, path, must_exist=False)
        assert ei.value.error_code == "path_reserved", path
    assert resolve_local(roots, "docs/placet-tmp-ok.txt", must_exist=False)[1].name == (
        "placet-tmp-ok.txt"
    )


def test_check_not_reserved() -> None:
    assert check_not_reserved("a/b/.placet-tmpx") == "a/b/.placet-tmpx"
    assert is_reserved_name(".placet-tmp-") and not is_reserved_name("x.placet-tmp-")
    with pytest.raises(PathRefused, match="reserved"):
        check_not_reserved("a/.placet-tmp-1/b")
