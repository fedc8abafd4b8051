"""rclone children: they die with placet, get only an allowlisted environment, keep
secrets out of argv (and the keyring's password out of their environment: rclone asks
placet's hidden password command), and rcd's socket is private."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.config.password import RCLONE_PASSWORD_ARGS
from placet.drive import RcloneDrive
from placet.drive.credentials import (
    password_command,
    placet_command,
    rclone_access,
    rclone_command_string,
)
from placet.drive.proc import spawn
from placet.errors import DriveError, PlacetError
from tests.support.keyring_backend import file_keyring_env

MakeDrive = Callable[..., RcloneDrive]


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie nobody reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _children(pid: int) -> dict[int, list[str]]:
    """pid -> argv of the direct children of `pid`."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out[int(d.name)] = (d / "cmdline").read_bytes().decode().split("\0")
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return out


CHILD = textwrap.dedent(
    """
    import os, sys, threading, time
    from pathlib import Path
    from placet.drive import RcloneDrive
    root, run, src = map(Path, sys.argv[1:4])
    drive = RcloneDrive(str(root), rclone_path=Path(sys.argv[4]),
                        env={"RCLONE_CONFIG": "/dev/null"}, run_dir=run)
    drive.transfers.rcd_stream_backends = frozenset()  # through an rclone rcat child
    def start_in_thread():  # rcd started from a thread that then exits
        drive.capabilities()
    t = threading.Thread(target=start_in_thread); t.start(); t.join()
    print("rcd", drive.rcd_pid, flush=True)
    def hang(done, total):
        print("transfer", done, flush=True)
        time.sleep(3600)
    fd = os.open(src, os.O_RDONLY)
    drive.upload_from_fd(fd, os.fstat(fd).st_size, "big.bin", expected_sha256="0" * 64,
                         progress=hang)
    """
)


@pytest.mark.timeout(60)
def test_children_die_with_a_killed_parent(tmp_path: Path, rclone_home: Path) -> None:
    root, run, src = tmp_path / "drive", tmp_path / "run", tmp_path / "big.bin"
    root.mkdir()
    src.write_bytes(os.urandom(3 << 20))
    rclone = Path(sys.executable).parent / "rclone"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(run), str(src), str(rclone)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        rcd_line = proc.stdout.readline().split()
        assert rcd_line[0] == "rcd"
        rcd_pid = int(rcd_line[1])
        assert proc.stdout.readline().startswith("transfer")
        time.sleep(0.3)  # the thread that started rcd has exited: rcd must still run
        assert _alive(rcd_pid)
        kids = _children(proc.pid)
        assert "rcd" in kids[rcd_pid]
        rcat = [p for p, argv in kids.items() if "rcat" in argv]
        assert len(rcat) == 1, kids
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _wait_dead(rcd_pid), "rclone rcd outlived its parent"
        for pid in rcat:
            assert _wait_dead(pid), "rclone rcat outlived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_rcd_socket_is_private_and_restarts_after_a_crash(
    tmp_path: Path, rclone_home: Path
) -> None:
    run = tmp_path / ("r" * 120) / "run"  # past sun_path's ~108 bytes: reached via its fd
    rclone = Path(sys.executable).parent / "rclone"
    with RcloneDrive(
        str(tmp_path), rclone_path=rclone, env={"RCLONE_CONFIG": "/dev/null"}, run_dir=run
    ) as drive:
        drive.capabilities()
        [sockdir] = list(run.iterdir())
        assert stat.S_IMODE(sockdir.stat().st_mode) == 0o700
        assert (sockdir / "rc.sock").is_socket()
        first = drive.rcd_pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert _wait_dead(first)
        assert drive.stat("") is not None  # a fresh daemon answers
        assert drive.rcd_pid not in (None, first)
    assert list(run.iterdir()) == []  # closing removed the socket directory


def test_inherited_rclone_variables_are_dropped(
    make_drive: MakeDrive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RCLONE_CONFIG_EVIL_TYPE", "local")
    monkeypatch.setenv("RCLONE_LOW_LEVEL_RETRIES", "99")
    drive = make_drive(f"evil:{tmp_path}")
    with pytest.raises(DriveError) as ei:
        drive.capabilities()
    assert ei.value.error_code == "drive_misconfigured"
    pid = drive.rcd_pid
    assert pid is not None
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert not any(v.startswith((b"RCLONE_CONFIG_EVIL", b"RCLONE_LOW_LEVEL")) for v in environ)


def _encrypted_vault(tmp_path: Path, rclone_bin: Path, secret: str) -> Path:
    """An rclone config encrypted with `secret`, remote `vault:` -> data/hello.txt."""
    conf = tmp_path / "rclone.conf"
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "hello.txt").write_bytes(b"hi")
    env = {"RCLONE_CONFIG": str(conf), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [
            str(rclone_bin),
            "config",
            "create",
            "vault",
            "alias",
            f"remote={folder}",
            "--non-interactive",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [str(rclone_bin), "config", "encryption", "set", "--password-command", f"echo {secret}"],
        env=env,
        check=True,
        capture_output=True,
    )
    assert b"RCLONE_ENCRYPT_V0" in conf.read_bytes()
    return conf


def test_config_pass_set_by_the_owner_goes_through_the_environment(
    make_drive: MakeDrive, tmp_path: Path, rclone_bin: Path
) -> None:
    """The owner's own RCLONE_CONFIG_PASS is passed on (their choice: `ps eww` shows it
    to the same user, as it shows placet's); never in argv, and no password command."""
    secret = "Corr3ct-Horse-Battery"
    conf = _encrypted_vault(tmp_path, rclone_bin, secret)
    locked = make_drive("vault:", {"RCLONE_CONFIG": str(conf)})
    with pytest.raises(DriveError) as ei:
        locked.list_folder("")
    assert ei.value.error_code == "drive_locked" and "placet drive login" in ei.value.message
    access = rclone_access({"RCLONE_CONFIG": str(conf), "RCLONE_CONFIG_PASS": secret})
    assert access.flags == ()
    drive = make_drive("vault:", access.env, flags=access.flags)
    assert [e.name for e in drive.list_folder("")[0]] == ["hello.txt"]
    pid = drive.rcd_pid
    assert pid is not None
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert secret.encode() not in cmdline and b"--password-command" not in cmdline
    assert f"RCLONE_CONFIG_PASS={secret}".encode() in Path(f"/proc/{pid}/environ").read_bytes()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("form", ["entry point", "python -P -m placet"])
def test_password_command_runs_placet_with_the_keyring_of_the_owner(
    make_drive: MakeDrive,
    tmp_path: Path,
    rclone_bin: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
) -> None:
    """Both forms of `placet_command`, run by rclone from an allowlisted environment,
    reach the keyring placet uses (here a file named through KEYRING_PROPERTY_FILE) and
    unlock the config for rcd and for CLI children; the secret is in neither argv nor
    any child's environment. A cwd holding a fake `placet` package is not imported."""
    secret = "Tr0ub4dor & 3"
    conf = _encrypted_vault(tmp_path, rclone_bin, secret)
    for k, v in file_keyring_env(tmp_path / "keyring.json").items():
        monkeypatch.setenv(k, v)
    (tmp_path / "keyring.json").write_text(json.dumps({"placet/rclone-config": secret}))
    trap = tmp_path / "cwd" / "placet"
    trap.mkdir(parents=True)
    (trap / "__init__.py").write_text("raise SystemExit('imported placet from the cwd')\n")
    (trap / "__main__.py").write_text("raise SystemExit('imported placet from the cwd')\n")
    monkeypatch.chdir(trap.parent)
    if form == "entry point":
        command = password_command()
        assert command.startswith(str(Path(sys.executable).parent / "placet") + " ")
    else:  # the form used when no entry point sits beside the interpreter
        lone = tmp_path / "lone" / "python3"
        assert placet_command(str(lone)) == [str(lone), "-P", "-m", "placet"]
        command = rclone_command_string(
            [sys.executable, "-P", "-m", "placet", *RCLONE_PASSWORD_ARGS]
        )
    access = rclone_access({"RCLONE_CONFIG": str(conf)})
    assert access.env == {"RCLONE_CONFIG": str(conf)}
    drive = make_drive("vault:", access.env, flags=("--password-command", command))
    assert [e.name for e in drive.list_folder("")[0]] == ["hello.txt"]
    assert drive.read_head("hello.txt", 10) == b"hi"  # an `rclone cat` child
    pid = drive.rcd_pid
    assert pid is not None
    for name in ("cmdline", "environ"):
        data = Path(f"/proc/{pid}/{name}").read_bytes()
        assert secret.encode() not in data and b"RCLONE_CONFIG_PASS" not in data
    (tmp_path / "keyring.json").write_text("{}")
    with pytest.raises(DriveError) as ei:
        make_drive("vault:", access.env, flags=("--password-command", command)).stat("")
    assert ei.value.error_code == "drive_locked" and "placet drive login" in ei.value.message


def test_password_command_string_survives_rclones_parsing(
    make_drive: MakeDrive, tmp_path: Path, rclone_bin: Path
) -> None:
    """rclone splits --password-command as space-separated CSV: a program path and
    arguments with spaces and double quotes arrive intact."""
    secret = "pw-for-quoting"
    conf = _encrypted_vault(tmp_path, rclone_bin, secret)
    odd = tmp_path / 'dir with "quotes" and spaces'
    odd.mkdir()
    script = odd / "pass word"
    script.write_text(
        f'#!/bin/sh\n[ "$1" = \'a b\' ] && [ "$2" = \'say "hi"\' ] && [ $# = 2 ] '
        f"&& printf %s '{secret}'\n"
    )
    script.chmod(0o700)
    command = rclone_command_string([str(script), "a b", 'say "hi"'])
    drive = make_drive(
        "vault:", {"RCLONE_CONFIG": str(conf)}, flags=("--password-command", command)
    )
    assert [e.name for e in drive.list_folder("")[0]] == ["hello.txt"]
    bad = rclone_command_string([str(script), "a", "b", 'say "hi"'])
    with pytest.raises(DriveError) as ei:
        make_drive("vault:", {"RCLONE_CONFIG": str(conf)}, flags=("--password-command", bad)).stat(
            ""
        )
    assert ei.value.error_code == "drive_locked"


def test_concurrent_calls_share_one_daemon(local_drive: RcloneDrive) -> None:
    Path(local_drive.spec, "f.txt").write_bytes(b"x")
    errors: list[BaseException] = []
    pids: set[int | None] = set()

    def work() -> None:
        try:
            for _ in range(20):
                assert local_drive.stat("f.txt") is not None
            pids.add(local_drive.rcd_pid)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(pids) == 1


def test_children_get_a_process_group_of_their_own_in_placets_session() -> None:
    """A Ctrl-C at the terminal goes to the foreground process group (placet's), never
    to an rclone child; the child stays in placet's session, which Linux schedules as
    one group with placet (a session of its own made the upload pipe 1.7x slower)."""
    probe = "import os; print(os.getpid(), os.getpgid(0), os.getsid(0))"
    proc = spawn([sys.executable, "-c", probe], {}, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=30)
    pid, pgid, sid = map(int, out.split())
    assert pid == proc.pid
    assert pgid == pid != os.getpgid(0)
    assert sid == os.getsid(0)


@pytest.mark.timeout(120)
def test_threads_calling_while_rcd_dies_get_drive_errors_only(local_drive: RcloneDrive) -> None:
    """rcd killed again and again while four threads keep calling: a thread whose daemon
    died under it sees a `PlacetError` (or its call succeeds on the fresh daemon), never
    a raw `OSError` or `AttributeError` from a connection another thread closed (once
    a raw EBADF here left an upload's temporary object behind, reported as a local
    file error). Thread switches are forced every microsecond to widen the races."""
    Path(local_drive.spec, "f.txt").write_bytes(b"x")
    local_drive.stat("f.txt")
    stop = threading.Event()
    strays: list[BaseException] = []
    calls = [0]

    def work() -> None:
        while not stop.is_set():
            try:
                local_drive.stat("f.txt")
                calls[0] += 1
            except PlacetError:
                pass
            except BaseException as e:
                strays.append(e)
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=work) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        kills = 0
        deadline = time.monotonic() + 60
        while kills < 24 and time.monotonic() < deadline and not strays:
            pid = local_drive.rcd_pid
            if pid is None:
                time.sleep(0.001)
                continue
            start = calls[0]
            while calls[0] - start < 20 and time.monotonic() < deadline and not strays:
                time.sleep(0.001)  # let the threads settle on the fresh daemon
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            kills += 1
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        sys.setswitchinterval(old)
    assert strays == [], [f"{type(e).__name__}: {e}" for e in strays]
    assert kills == 24
    assert local_drive.stat("f.txt") is not None
