"""Fixtures the tests of several folders share: a fresh PLACET_HOME per test (autouse), its
settings and store, real rclone drives and servers (helpers in `tests.support.drives`),
executor rigs (`tests.support.rig`) and a file keyring (`tests.support.keyring_backend`).
A folder's own conftest.py holds what only its tests use; no fixture name is defined twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import pytest

from placet.config import Settings, load_settings
from placet.drive import RcloneDrive
from placet.store import Store, open_store
from tests.support.drives import RCLONE, ServedRemote, serve, unique_sub
from tests.support.keyring_backend import FileKeyring, file_keyring_env
from tests.support.postgres import (
    PgServer,
    create_database,
    drop_database,
    migrated_database,
    start_pg_server,
)
from tests.support.review import quiet
from tests.support.rig import Rig, make_rig, write_config


@pytest.fixture(autouse=True)
def placet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point PLACET_HOME at a temp dir; drop PLACET_DB/PLACET_DRIVE from the outer env, and
    COLUMNS/LINES (pytest-xdist's workers get 80x24), which would size a child's terminal
    output and a pty's Textual screen instead of the test."""
    home = tmp_path / "placet-home"
    monkeypatch.setenv("PLACET_HOME", str(home))
    for name in ("PLACET_DB", "PLACET_DRIVE", "COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture
def settings(placet_home: Path) -> Settings:
    return load_settings()


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    """The store over `settings` (a fresh SQLite file), closed at teardown."""
    with open_store(settings) as s:
        yield s


@pytest.fixture
def quiet_store(settings: Settings) -> Iterator[Store]:
    """A store over `quiet(settings)`: the sweep far away, roomy caps, the drive `DRIVE`."""
    with open_store(quiet(settings)) as s:
        yield s


@pytest.fixture
def anyio_backend() -> str:
    """The anyio tests run on asyncio (the MCP client and Textual's loop)."""
    return "asyncio"


# ---- rclone: servers and drives (docs in tests.support.drives) ----------------------


@pytest.fixture(scope="session")
def rclone_bin() -> Path:
    return RCLONE


@pytest.fixture
def rclone_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and XDG dirs (which rclone children inherit) at the test's temp dir."""
    home = tmp_path / "rclone-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(home / sub))
    return home


# Module scope, not session: an `rclone serve` that a test's killed client left busy
# (seen: sftp and webdav servers at 65-100% CPU with no connection open, for the rest of
# a 25-minute run) dies with its module instead of slowing every test after it.
@pytest.fixture(scope="module")
def webdav_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRemote]:
    base = tmp_path_factory.mktemp("webdav")
    served = serve("webdav", base / "root", base / "home")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def sftp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRemote]:
    base = tmp_path_factory.mktemp("sftp")
    served = serve("sftp", base / "root", base / "home")
    yield served
    served.stop()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[[str], ServedRemote]]:
    """Start a server private to the test (stopped at teardown if still running)."""
    started: list[ServedRemote] = []

    def start(kind: str) -> ServedRemote:
        served = serve(kind, tmp_path / f"{kind}-root", tmp_path / f"{kind}-home")
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def make_drive(tmp_path: Path, rclone_home: Path) -> Iterator[Callable[..., RcloneDrive]]:
    """`make_drive(spec, env=None, **kw)`: an RcloneDrive closed at teardown."""
    drives: list[RcloneDrive] = []

    def make(spec: str, env: dict[str, str] | None = None, **kw: object) -> RcloneDrive:
        drive = RcloneDrive(
            spec,
            rclone_path=RCLONE,
            env={"RCLONE_CONFIG": "/dev/null"} if env is None else env,
            run_dir=tmp_path / "run",
            **kw,  # type: ignore[arg-type]
        )
        drives.append(drive)
        return drive

    yield make
    for drive in drives:
        drive.close()


@pytest.fixture
def local_drive(tmp_path: Path, make_drive: Callable[..., RcloneDrive]) -> RcloneDrive:
    """A drive over a fresh local folder (`drive.spec` is its absolute path)."""
    root = tmp_path / "drive"
    root.mkdir()
    return make_drive(str(root))


@pytest.fixture
def sub() -> str:
    """A fresh folder name on a shared server (`unique_sub()`)."""
    return unique_sub()


# ---- executor rigs (tests.support.rig) -------------------------------------------------


@pytest.fixture
def local_rig(
    settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> Callable[..., Rig]:
    """`local_rig(**changes)`: a rig over a fresh local-folder drive (`tmp_path/drive`),
    its settings `settings` with `changes`; call it once per test."""

    def make(**changes: object) -> Rig:
        remote = tmp_path / "drive"
        remote.mkdir()
        bound = settings.model_copy(update=changes)
        return make_rig(bound, make_drive(str(remote)), tmp_path, remote)

    return make


@pytest.fixture
def rig(local_rig: Callable[..., Rig]) -> Rig:
    """A rig over a local-folder drive, with no config.toml."""
    return local_rig()


@pytest.fixture
def configured_rig(rig: Rig) -> Rig:
    """`rig` whose config.toml names its drive, so a `placet` subprocess uses it too."""
    write_config(rig.settings, drive=rig.drive.spec)
    return rig


@pytest.fixture
def yes_rig(rig: Rig) -> Rig:
    """`rig` whose config.toml names its drive and allows `placet accept --yes`."""
    write_config(rig.settings, drive=rig.drive.spec, allow_yes=True)
    return rig


@pytest.fixture
def signed_rig(settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]) -> Rig:
    """A rig in signed mode (`approvals = "signed"`, in its settings and config.toml)."""
    remote = tmp_path / "drive"
    remote.mkdir()
    r = make_rig(
        settings.model_copy(update={"approvals": "signed"}), make_drive(str(remote)),
        tmp_path, remote,
    )  # fmt: skip
    write_config(r.settings, drive=r.drive.spec, approvals="signed")
    return r


# ---- keyring ------------------------------------------------------------------------


@pytest.fixture
def file_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A keyring file shared by this process, placet subprocesses and the password
    command rclone runs (through the variables placet passes on to rclone)."""
    path = tmp_path / "keyring.json"
    for k, v in file_keyring_env(path).items():
        monkeypatch.setenv(k, v)
    prev = keyring.get_keyring()
    keyring.set_keyring(FileKeyring())
    yield path
    keyring.set_keyring(prev)


# ---- store backends: SQLite and a real PostgreSQL (tests.support.postgres) -------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A real PostgreSQL server for the session (`tests.support.postgres`)."""
    yield from start_pg_server()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(
    request: pytest.FixtureRequest, placet_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Run the test once per store backend: SQLite (the default file) and PostgreSQL (a
    fresh, migrated database on the session's server, or an empty one for a test marked
    `blank_database`, chosen by `PLACET_DB`, its password from `PGPASSWORD`, dropped when
    the test ends). Name it in
    `pytestmark = pytest.mark.usefixtures("store_backend")` so it runs before `settings`
    reads the environment."""
    if request.param != "postgresql":
        yield str(request.param)
        return
    server: PgServer = request.getfixturevalue("pg_server")
    blank = request.node.get_closest_marker("blank_database") is not None
    url = create_database(server) if blank else migrated_database(server)
    monkeypatch.setenv("PLACET_DB", url)
    monkeypatch.setenv("PGPASSWORD", server.password)
    yield str(request.param)
    drop_database(server, url)
