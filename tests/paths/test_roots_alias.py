"""Roots that reach placet's own folders (or the home) under another name realpath cannot
see through: a bind mount. Refused at `placet serve` (`parse_root_spec`, by device and
inode of the root, the folders above it and the folders above each placet folder) and at
accept (`placet.proposals.vetting.refuse_own_paths`). Needs `mount --bind` (root in a container that
allows it); skipped with the reason otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.errors import PolicyRefused, UsageError
from placet.executor.ops import plan_for
from placet.paths.roots import PlacetDirs, parse_root_spec
from placet.proposals.vetting import refuse_own_paths
from tests.support.rig import Rig, make_rig, write_config

Binder = Callable[[Path, Path], Path]


@pytest.fixture
def bind(tmp_path: Path) -> Iterator[Binder]:
    """`bind(src, dst)` bind-mounts `src` on the new folder `dst`; all unmounted after."""
    mounted: list[Path] = []

    def _bind(src: Path, dst: Path) -> Path:
        dst.mkdir(parents=True)
        r = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"mount --bind is not permitted here: {r.stderr.strip()}")
        mounted.append(dst)
        return dst

    yield _bind
    for dst in reversed(mounted):
        if subprocess.run(["umount", str(dst)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(dst)], capture_output=True)


def _refused(spec: str, settings: Settings) -> str:
    with pytest.raises(UsageError) as ei:
        parse_root_spec(spec, settings)
    assert ei.value.error_code == "root_refused"
    return ei.value.message


def test_bind_of_the_data_dir_is_refused(settings: Settings, bind: Binder, tmp_path: Path) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    alias = bind(settings.data_dir, tmp_path / "alias")
    assert os.path.realpath(alias) == str(alias)  # realpath alone cannot see it
    msg = _refused(f"a={alias}", settings)
    assert "it is placet's own data directory" in msg and "under another name" in msg
    assert f"'{settings.data_dir}'" in msg


def test_folder_inside_a_bind_of_the_data_dir_is_refused(
    settings: Settings, bind: Binder, tmp_path: Path
) -> None:
    (settings.data_dir / "trash").mkdir(parents=True, exist_ok=True)
    alias = bind(settings.data_dir, tmp_path / "alias")
    msg = _refused(f"t={alias / 'trash'}", settings)
    assert "it lies inside placet's own data directory" in msg


def test_bind_of_a_folder_above_the_data_dir_is_refused(
    settings: Settings, bind: Binder, tmp_path: Path
) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    above = bind(settings.data_dir.parent, tmp_path / "above")
    msg = _refused(f"u={above}", settings)
    assert "it contains placet's own data directory" in msg


def test_second_alias_through_a_bound_parent_is_refused(
    settings: Settings, bind: Binder, tmp_path: Path
) -> None:
    """Another symlink-free name for the data dir: its own name under a bind of its
    parent (no component of the path is a mount of the data dir itself)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    above = bind(settings.data_dir.parent, tmp_path / "above")
    alias = above / settings.data_dir.name
    assert os.path.realpath(alias) == str(alias)
    msg = _refused(f"d={alias}", settings)
    assert "it is placet's own data directory" in msg


def test_bind_of_the_home_is_refused(
    settings: Settings, bind: Binder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    alias = bind(home, tmp_path / "home-alias")
    assert "it is the home directory or contains it" in _refused(f"h={alias}", settings)


def test_unrelated_bind_is_accepted(settings: Settings, bind: Binder, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    alias = bind(proj, tmp_path / "proj-alias")
    root = parse_root_spec(f"p={alias}", settings)
    assert root.path == alias and PlacetDirs.of(settings).overlap(alias) is None


def test_serve_refuses_a_bind_of_placet_home(
    settings: Settings, bind: Binder, tmp_path: Path
) -> None:
    """End to end, as the adversarial pass did: `placet serve --root <bind of home>`."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    alias = bind(settings.data_dir, tmp_path / "alias")
    r = subprocess.run(
        [str(Path(sys.executable).parent / "placet"), "serve", "--root", str(alias)],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "root_refused" in r.stderr or "refusing --root" in r.stderr
    assert "placet's own data directory" in r.stderr


def test_accept_refuses_a_download_into_a_bound_placet_folder_inside_the_root(
    settings: Settings,
    bind: Binder,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
) -> None:
    """A root accepted before the bind appeared (or holding it in a subfolder): the
    download to ``sub/new.toml`` lands in placet's config folder under another name."""
    remote = tmp_path / "drive"
    remote.mkdir()
    rig: Rig = make_rig(settings, make_drive(str(remote)), tmp_path, remote)
    write_config(rig.settings, drive=rig.drive.spec)
    (remote / "cfg").write_bytes(b"allow_yes = true\n")
    bind(rig.settings.config_file.parent, rig.root.path / "sub")
    rec = rig.download("cfg", "sub/new.toml")
    ops = plan_for(rec.kind, rec.request, rec.evidence).ops
    with pytest.raises(PolicyRefused) as ei:
        refuse_own_paths(rig.settings, rec, ops)
    assert ei.value.error_code == "placet_own_path"
    assert f"'{rig.settings.config_file.parent}'" in ei.value.message
