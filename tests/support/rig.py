"""A test rig for the executor: a store, a drive, roots, and one-call propose + accept.

The fixtures over it (`rig` and its variants) are in tests/conftest.py. Everything is
real: the SQLite store in the test's PLACET_HOME, the rclone binary, the proposing core
the MCP tools use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from placet.config import Settings, load_settings
from placet.drive import RcloneDrive
from placet.executor import ProgressEvent, execute
from placet.paths.roots import Root, parse_root_spec
from placet.proposals.context import ProposeContext
from placet.proposals.evidence import local_file_evidence, remote_digest_type
from placet.proposals.making import propose_download, propose_mkdir, propose_upload
from placet.schema import Op, RemoteEvidence, SyncRequest
from placet.store import ProposalRecord, Store, open_store

PLACET = Path(sys.executable).parent / "placet"


@dataclass
class Rig:
    """One test's placet: settings bound to `drive`, a store, one root `proj`."""

    settings: Settings
    store: Store
    drive: RcloneDrive
    root: Root
    remote_dir: Path | None  # where the drive's files are on disk (local/served remotes)
    events: list[ProgressEvent] = field(default_factory=list)

    @property
    def ctx(self) -> ProposeContext:
        return ProposeContext(
            settings=self.settings,
            store=self.store,
            drive=self.drive,
            roots=(self.root,),
            run_id="run-test",
            drive_spec=self.drive.spec,
            client_name="pytest",
        )

    def local(self, rel: str) -> Path:
        return self.root.path / rel

    def write(self, rel: str, data: bytes) -> Path:
        p = self.local(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        return p

    def upload(self, rel: str, parent: str = "", **kw: Any) -> ProposalRecord:
        rec, created = propose_upload(
            self.ctx, local_path=rel, remote_parent=parent, reason="test upload", **kw
        )
        assert created
        return rec

    def mkdir(self, parent: str, name: str) -> ProposalRecord:
        return propose_mkdir(self.ctx, remote_parent=parent, name=name, reason="test mkdir")[0]

    def download(self, remote: str, rel: str, **kw: Any) -> ProposalRecord:
        rec, _ = propose_download(
            self.ctx, remote_path=remote, local_path=rel, reason="test download", **kw
        )
        return rec

    def accept(self, rec: ProposalRecord) -> ProposalRecord:
        return self.store.accept(
            rec.id, detail={"request_hash": rec.request_hash, "via": "test", "tty": False}
        )

    def run(self, rec: ProposalRecord, **kw: Any) -> ProposalRecord:
        """Accept (if pending/failed/interrupted) and execute; returns the final record."""
        if self.store.get(rec.id).status != "approved":
            self.accept(rec)
        return execute(
            self.store, self.settings, rec.id, drive=self.drive, progress=self.events.append, **kw
        )

    def upload_op(self, index: int, rel: str, data: bytes) -> Op:
        """A sync op uploading local `rel` (written with `data`) to the absent drive path
        `rel`, with the evidence the proposing core records."""
        self.write(rel, data)
        local = local_file_evidence(
            self.root, PurePosixPath(rel), remote_digest_type(self.ctx), size_cap=None
        )
        return Op(index=index, kind="upload", local_path=rel, remote_path=rel, size=len(data),
                  expected_local=local, expected_remote=RemoteEvidence(exists=False))  # fmt: skip

    def sync_request(self, ops: Sequence[Op]) -> dict[str, Any]:
        """A sync request of `ops` from the whole root to the drive's root (plan 1), as
        stored."""
        req = SyncRequest(
            plan_id=1, root=self.root.to_ref(), local_path="", remote_path="", ops=list(ops)
        )
        return req.model_dump(mode="json")

    def propose_ops(
        self, ops: Sequence[Op], reason: str = "sync ops"
    ) -> tuple[ProposalRecord, bool]:
        """A sync proposal of `ops` straight through the store (no stored plan; TTL 600 s):
        (the record, whether it was created)."""
        return self.store.create_proposal(
            kind="sync", request=self.sync_request(ops), evidence={}, reason=reason,
            drive_spec=self.drive.spec, run_id="run-test", ttl_seconds=600,
        )  # fmt: skip

    def result(self, rec: ProposalRecord, index: int = 0) -> Any:
        return self.store.op_results(rec.id)[index]


def mkdir_ops(paths: Iterable[str]) -> list[Op]:
    """Sync ops making each folder of `paths` (drive paths, absent on the drive), in order."""
    absent = RemoteEvidence(exists=False)
    return [Op(index=i, kind="mkdir", remote_path=p, expected_remote=absent)
            for i, p in enumerate(paths)]  # fmt: skip


def make_rig(
    settings: Settings, drive: RcloneDrive, tmp_path: Path, remote_dir: Path | None
) -> Rig:
    root_dir = tmp_path / "work" / "proj"
    root_dir.mkdir(parents=True)
    root = parse_root_spec(f"proj={root_dir}", settings.data_dir)
    bound = settings.model_copy(update={"drive": drive.spec})
    return Rig(bound, open_store(bound), drive, root, remote_dir)


def rewrite_same_size(path: Path, data: bytes) -> None:
    """Replace `path`'s content with `data` (same length) and put its mtime back: what
    size and mtime cannot tell from the content the owner saw."""
    st = path.stat()
    assert len(data) == st.st_size
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def temp_names(folder: Path) -> list[str]:
    """Every `.placet-tmp-` name under `folder`, recursively (relative paths)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            if n.startswith(".placet-tmp-"):
                out.append(os.path.relpath(os.path.join(dirpath, n), folder))
    return sorted(out)


def write_config(settings: Settings, **values: Any) -> None:
    """Write `config.toml` in the data dir (simple TOML: strings, bools, one root table)."""
    lines = []
    roots = values.pop("roots", {})
    for k, v in values.items():
        if isinstance(v, bool):
            lines.append(f"{k} = {'true' if v else 'false'}")
        elif isinstance(v, (int, float)):
            lines.append(f"{k} = {v}")
        else:
            lines.append(f"{k} = {str(v)!r}".replace("'", '"'))
    for path, policy in roots.items():
        lines.append(f'[roots."{path}"]')
        lines.append(f'downloads = "{policy}"')
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings.config_file.write_text("\n".join(lines) + "\n")


def placet_cli(
    *args: str, env: dict[str, str], timeout: float = 120, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """Run the installed `placet` with `env`, no controlling terminal, stdin closed
    (or fed `input=`)."""
    if "input" not in kw:
        kw["stdin"] = subprocess.DEVNULL
    return subprocess.run(
        [str(PLACET), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
        check=False,
        **kw,
    )


def alter_request(db_path: Path, pid: int, request_json: str) -> None:
    """Rewrite a proposal's stored request behind the store's back (tamper tests)."""
    con = sqlite3.connect(db_path)
    try:
        con.execute("UPDATE proposal SET request = ? WHERE id = ?", (request_json, pid))
        con.commit()
    finally:
        con.close()


def propose_config_download(rig: Rig) -> tuple[ProposalRecord, Rig]:
    """A download over placet's own config.toml: the drive holds `cfg` (``allow_yes =
    true``) and config.toml makes the folder holding placet's data dir a root `top`
    (allow-overwrite). Returns (the pending proposal, the rig over `top`)."""
    assert rig.remote_dir is not None
    home = rig.settings.data_dir
    (rig.remote_dir / "cfg").write_bytes(b"allow_yes = true\n")
    write_config(rig.settings, drive=rig.drive.spec, roots={str(home.parent): "allow-overwrite"})
    st = os.stat(home.parent)
    top = dataclasses.replace(
        rig,
        settings=load_settings().model_copy(update={"drive": rig.drive.spec}),
        root=Root("top", home.parent, st.st_dev, st.st_ino),
    )
    return top.download("cfg", f"{home.name}/config.toml", overwrite=True), top


def host_b_settings(settings: Settings, tmp_path: Path) -> Settings:
    """Another host on the same database as `settings`: its own data directory
    (`tmp_path/host-b`, so its own host id)."""
    db = settings.database or str(settings.db_path)
    return load_settings({"PLACET_HOME": str(tmp_path / "host-b"), "PLACET_DB": db})


def approve_on_host_b(rig: Rig, tmp_path: Path, rec: ProposalRecord, runner: str) -> None:
    """Accept `rec` on another host (`host_b_settings`), then wait up to 60 s until this
    host's `runner` (named in the failure) has run it: no longer approved nor executing."""
    with open_store(host_b_settings(rig.settings, tmp_path)) as store_b:
        store_b.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "test"})
    deadline = time.monotonic() + 60
    while rig.store.get(rec.id).status in ("approved", "executing"):
        assert time.monotonic() < deadline, f"{runner} did not run it"
        time.sleep(0.05)


def start_accept_yes(
    rec_id: int, *, own_session: bool = True, lowest_priority: bool = False
) -> subprocess.Popen[bytes]:
    """`placet accept ID --yes` started in the background: no controlling terminal, stdin
    closed, stdout dropped, stderr piped. In its own session, or with `own_session=False`
    in its own process group of the test's session (what a terminal's foreground job is).
    `lowest_priority` runs it and its rclone children under `nice -n 19`, so a test that
    must catch a transfer mid-way does so on a busy machine too."""
    nice = ["nice", "-n", "19"] if lowest_priority else []
    return subprocess.Popen(
        [*nice, str(PLACET), "accept", str(rec_id), "--yes"],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=own_session,
        process_group=None if own_session else 0,
    )


def start_executor(stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """This host's `placet executor` started in its own session, stdin closed, stdout piped,
    `stderr` as given; returned running (its first line, "running; Ctrl-C stops", read)."""
    proc = subprocess.Popen(
        [str(PLACET), "executor"],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert "running; Ctrl-C stops" in proc.stdout.readline()
    return proc


def temp_files(folder: Path) -> list[Path]:
    """The transfer temporaries (`.placet-tmp-*` names) directly in `folder`."""
    return [folder / n for n in os.listdir(folder) if n.startswith(".placet-tmp-")]


def propose_hook_download(rig: Rig, gitdir: Path) -> ProposalRecord:
    """A root `git` that is itself a `.git` folder (`gitdir`, made with `hooks/`), and a
    proposed download of the drive file `hook` (a shell script) to `hooks/pre-commit`."""
    assert rig.remote_dir is not None
    (gitdir / "hooks").mkdir(parents=True)
    st = os.stat(gitdir)
    git_rig = dataclasses.replace(rig, root=Root("git", gitdir, st.st_dev, st.st_ino))
    (rig.remote_dir / "hook").write_bytes(b"#!/bin/sh\necho pwned\n")
    return git_rig.download("hook", "hooks/pre-commit")
