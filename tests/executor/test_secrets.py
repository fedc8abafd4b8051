"""No secret in `ps`, logs, the database or any error detail, after runs that really
reached an SFTP server through an ENCRYPTED rclone config whose password came from the
keyring (a file-backed test keyring shared with the `placet accept` subprocess).

Secrets: the SFTP password, its rclone-obscured form (reversible, so as secret as the
password) and the rclone config password. The rclone children get the config password
from placet's hidden `--password-command` (docs/design.md section 9,
docs/decisions/0008-rclone-children.md), so it is in neither their argv nor their
environment: `ps` and `ps eww` (which adds each process's environment, and shows it to the
same user) are both read as root, the user the children run as, while the upload runs
(through `rclone rcd`, which streams uploads to sftp:
`placet.drive.routes.RCD_STREAM_BACKENDS`).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import keyring
import pytest

from placet.config import Settings
from placet.config.password import KEYRING_SERVICE, KEYRING_USERNAME
from placet.drive import drive_for
from tests.support.processes import descendants
from tests.support.rig import PLACET, make_rig, placet_cli, write_config

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


CONFIG_PASSWORD = "cfg-Pass-5e6f7a"


@pytest.fixture
def keyring_with_password(file_keyring: Path) -> Path:
    """`file_keyring` holding the rclone config password (reaches rclone's password
    command too)."""
    keyring.set_password(KEYRING_SERVICE, KEYRING_USERNAME, CONFIG_PASSWORD)
    return file_keyring


def _encrypted_config(tmp_path: Path, served: ServedRemote, rclone: Path, home: Path) -> Path:
    conf = tmp_path / "rclone.conf"
    env = {"RCLONE_CONFIG": str(conf), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    for args in (
        ["config", "create", "box", "sftp", "host=127.0.0.1", f"port={served.port}",
         "user=placet", f"pass={served.obscured}", "known_hosts_file=none",
         "--non-interactive", "--obscure=false", "--no-obscure"],
        ["config", "encryption", "set", "--password-command", f"echo {CONFIG_PASSWORD}"],
    ):  # fmt: skip
        subprocess.run([str(rclone), *args], env=env, check=True, capture_output=True)
    assert b"RCLONE_ENCRYPT_V0" in conf.read_bytes()
    return conf


def _ps_watch(stop: threading.Event, root_pid: list[int], out: dict[str, list[str]]) -> None:
    """Lines of placet's rclone children (and of the password command they run): `ps`
    (command lines) and `ps eww` (command line + environment), both as root, the same
    user as the children."""
    while not stop.is_set():
        pids = descendants(root_pid[0]) if root_pid else set()
        args = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True)
        eww = subprocess.run(["ps", "axeww"], capture_output=True, text=True)
        for key, text in (("args", args.stdout), ("eww", eww.stdout)):
            for ln in text.splitlines()[1:]:
                if int(ln.split()[0]) in pids and "rclone" in ln:
                    out[key].append(ln)
        time.sleep(0.01)


@pytest.mark.timeout(300)
def test_no_secret_anywhere_after_real_sftp_runs(
    settings: Settings,
    tmp_path: Path,
    start_server: Callable[[str], ServedRemote],
    rclone_bin: Path,
    rclone_home: Path,
    keyring_with_password: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = start_server("sftp")
    conf = _encrypted_config(tmp_path, served, rclone_bin, rclone_home)
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    monkeypatch.delenv("RCLONE_CONFIG_PASS", raising=False)
    bound = settings.model_copy(update={"drive": "box:up"})
    drive = drive_for(bound)
    secrets = [served.password, served.obscured, CONFIG_PASSWORD]
    try:
        rig = make_rig(settings, drive, tmp_path, served.root / "up")
        write_config(rig.settings, drive="box:up", allow_yes=True)
        rig.write("big.bin", os.urandom(120 * 1024 * 1024))
        up = rig.upload("big.bin")
        (served.root / "up").mkdir(exist_ok=True)
        (served.root / "up/remote.txt").write_bytes(b"v1")
        rig.local("in").mkdir()
        stale = rig.download("remote.txt", "in/remote.txt")
        (served.root / "up/remote.txt").write_bytes(b"v2, changed")
        late = rig.mkdir("", "after-outage")
    finally:
        drive.close()

    env = dict(os.environ)
    stop, pid_box = threading.Event(), []  # type: threading.Event, list[int]
    seen: dict[str, list[str]] = {"args": [], "eww": []}
    watcher = threading.Thread(target=_ps_watch, args=(stop, pid_box, seen))
    watcher.start()
    try:
        proc = subprocess.Popen(
            [str(PLACET), "accept", str(up.id), "--yes"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        pid_box.append(proc.pid)
        out, err = proc.communicate(timeout=240)
    finally:
        stop.set()
        watcher.join()
    r_up = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert r_up.returncode == 0, r_up.stderr
    assert (served.root / "up/big.bin").stat().st_size == 120 * 1024 * 1024
    rcd_args = [ln for ln in seen["args"] if " rcd " in ln]  # the upload streams through rcd
    rcd_eww = [ln for ln in seen["eww"] if " rcd " in ln]
    assert rcd_args, "the transfer was not observed"
    assert rcd_eww, "ps eww did not list the transfer"
    assert all("--password-command" in ln and "password-for-rclone" in ln for ln in rcd_args)
    assert any(f"RCLONE_CONFIG={conf}" in ln for ln in rcd_eww), "ps eww showed no environment"
    assert not any("RCLONE_CONFIG_PASS" in ln for ln in seen["eww"])
    r_stale = placet_cli("accept", str(stale.id), "--yes", env=env)
    assert r_stale.returncode == 1 and "stale" in r_stale.stderr
    served.stop()
    r_down = placet_cli("accept", str(late.id), "--yes", env=env)
    assert r_down.returncode == 5, r_down.stderr
    show = placet_cli("show", str(late.id), "--json", env=env)

    db_bytes = b"".join(
        p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file()
    )  # database, -wal, audit anchor, logs, trash
    texts = {
        "ps args (root)": "\n".join(seen["args"]),
        "ps eww (root, same user)": "\n".join(seen["eww"]),
        "stdout/stderr": "\n".join(r.stdout + r.stderr for r in (r_up, r_stale, r_down, show)),
        "data dir": db_bytes.decode("latin-1"),
    }
    for name, text in texts.items():
        for s in secrets:
            assert s not in text, f"{s!r} found in {name}"
    detail = json.loads(show.stdout)["op_results"][0]["detail"]
    assert detail["code"] == "drive_unavailable" and detail["details"]["rclone_message"]
