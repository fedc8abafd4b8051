"""Applying an accepted sync: placet's executor beside `rclone copy` of the same tree.

Trees (`--trees`): `small`, for each count in `--files`, that many small files (64 to
2,063 bytes, 100 per folder); `site`, a copy of this environment's `site-packages`
(every file, hidden ones and `__pycache__` too); `deep`, `--deep-files` files seeded and
deterministic, 1-10 per folder, 6 levels deep, 64 B-256 KiB (log-uniform) with a few of
8-64 MiB; `large`, `--large` files of `--large-mib` MiB; `huge`, one `--huge-mib` MiB file.
Drives (`--drives`): `local` (a folder), `sftp` (`rclone serve sftp` on 127.0.0.1 through
an rclone remote), `openssh` (sshd on 127.0.0.1, `md5sum`/`sha1sum` read the object).
Per tree, drive and `--transfers` value, `--repeat` rounds, each into fresh folders: the
sync is planned, proposed and accepted (not timed), then `placet.executor.execute` runs it
(timed: accept to done), then `rclone copy --transfers N` copies the tree (timed). Dirty
pages are flushed (`os.sync()`) before each timed step. Printed: medians of wall and CPU
(rcd, the sftp server and every rclone child included) and their ratios, and the ratio
of user CPU alone (servers excluded: the kernel's share swings with other processes'
file deletions on a shared disk). `--floor` sends small files one by one through `rclone
rcat` and rcd's `operations/uploadfile`; `--rcat` sends every upload through `rclone
rcat`, one at a time.

    .venv/bin/python bench/sync_apply.py [--trees small,site,deep] [--files 1200]
        [--deep-files 100000] [--drives local,sftp] [--transfers 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RCLONE = Path(sys.executable).parent / "rclone"


def _cpu(rcd_pid: int | None = None, *, user: bool = False) -> float:
    """CPU seconds of this process, its reaped children and `rcd_pid`; `user`: user time
    only (the kernel's share swings with the file system's state, see `main`)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + kids.ru_utime + (0 if user else me.ru_stime + kids.ru_stime)
    if rcd_pid is not None:
        try:
            f = Path(f"/proc/{rcd_pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(f[11]) + (0 if user else int(f[12]))) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


def _cpu_of(pid: int | None) -> float:
    """CPU seconds of process `pid` (0 when None or gone)."""
    if pid is None:
        return 0.0
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def small_tree(folder: Path, files: int) -> None:
    """`files` small files (64 to 2,063 bytes), 100 per folder."""
    for d in range((files + 99) // 100):
        sub = folder / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(min(100, files - d * 100)):
            (sub / f"f{f:03d}.txt").write_bytes(os.urandom(64 + (f * 37 + d) % 2000))


def _write(path: Path, size: int, rng: random.Random) -> None:
    with open(path, "wb") as fh:
        while size > 0:
            n = min(size, 1 << 20)
            fh.write(rng.randbytes(n))
            size -= n


def deep_tree(folder: Path, files: int, seed: int = 26) -> None:
    """`files` files, 1-10 per folder, folders 6 levels deep (5 subfolders each, depth
    first), 64 B-256 KiB log-uniform, plus one of 8-64 MiB per 20,000 files (at least 2):
    the same bytes for the same `files` and `seed`."""
    rng = random.Random(seed)
    big = set(rng.sample(range(files), max(2, files // 20000)))
    made = 0

    def fill(d: Path, depth: int) -> None:
        nonlocal made
        d.mkdir(parents=True, exist_ok=True)
        for _ in range(min(rng.randint(1, 10), files - made)):
            if made in big:
                size = rng.randint(8 << 20, 64 << 20)
            else:
                size = int(math.exp(rng.uniform(math.log(64), math.log(256 << 10))))
            _write(d / f"f{made:06d}.bin", size, rng)
            made += 1
        for k in range(5 if depth < 6 else 0):
            if made >= files:
                return
            fill(d / f"d{k}", depth + 1)

    while made < files:  # more top-level folders when 5**6 folders are not enough
        fill(folder / f"t{made:06d}", 1)


def site_tree(folder: Path) -> None:
    """A copy of this environment's `site-packages` (links copied as links)."""
    import sysconfig

    shutil.copytree(sysconfig.get_paths()["purelib"], folder, symlinks=True)


def make_trees(args: argparse.Namespace) -> dict[str, Path]:
    base: Path = args.dir / "trees"
    shutil.rmtree(base, ignore_errors=True)
    trees: dict[str, Path] = {}
    for name in args.trees.split(","):
        if name == "small":
            for files in (int(x) for x in args.files.split(",") if x):
                small_tree(base / f"small-{files}", files)
                trees[f"{files} small"] = base / f"small-{files}"
        elif name == "site":
            site_tree(base / "site")
            trees["site-packages"] = base / "site"
        elif name == "deep":
            deep_tree(base / "deep", args.deep_files)
            trees[f"{args.deep_files} deep"] = base / "deep"
        elif name in ("large", "huge"):
            n, mib = (args.large, args.large_mib) if name == "large" else (1, args.huge_mib)
            label = f"{n} x {mib} MiB"
            (base / name).mkdir(parents=True)
            for i in range(n):
                _write(base / name / f"big{i}.bin", mib << 20, random.Random(i))
            trees[label] = base / name
        else:
            raise SystemExit(f"unknown tree {name!r}: small, site, deep, large, huge")
    for label, tree in trees.items():
        paths = [p for p in tree.rglob("*") if not p.is_symlink()]
        files = [p for p in paths if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        print(f"tree {label}: {len(files):,} files in {sum(p.is_dir() for p in paths):,} "
              f"folders, {size / 2**20:,.0f} MiB")  # fmt: skip
    return trees


class Sftp:
    """`rclone serve sftp` of a local folder on 127.0.0.1, and an rclone config file
    naming it as remote `benchsftp` (password obscured, as `rclone config` stores it)."""

    remote = "benchsftp"

    def __init__(self, base: Path) -> None:
        self.root = base / "sftp-root"
        self.root.mkdir(parents=True)
        port = _free_port()
        env = {"PATH": "/usr/bin:/bin", "RCLONE_CONFIG": "/dev/null", "HOME": str(base)}
        obscured = subprocess.run([str(RCLONE), "obscure", "bench"], env=env, check=True,
                                  capture_output=True, text=True).stdout.strip()  # fmt: skip
        self.config = base / "rclone.conf"
        self.config.write_text(
            f"[{self.remote}]\ntype = sftp\nhost = 127.0.0.1\nport = {port}\nuser = bench\n"
            f"pass = {obscured}\nshell_type = unix\nmd5sum_command = md5sum\n"
            "sha1sum_command = sha1sum\nknown_hosts_file = none\n"
        )
        self.proc = subprocess.Popen(
            [str(RCLONE), "serve", "sftp", str(self.root), "--addr", f"127.0.0.1:{port}",
             "--user", "bench", "--pass", "bench"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(port, self.proc, "rclone serve sftp")

    def spec(self, folder: Path) -> str:
        """The rclone path of `folder` (a folder under `root`)."""
        return f"{self.remote}:{folder.relative_to(self.root)}"

    def cpu(self) -> float:
        """CPU seconds of the server so far."""
        return _cpu_of(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


class OpenSsh:
    """OpenSSH's `sshd -D` on 127.0.0.1 with a temporary host key, config and client
    key (this user logs in by key; `internal-sftp`), and an rclone config naming it as
    remote `benchssh` with `md5sum`/`sha1sum` commands: the server an owner runs, where
    every digest reads the whole object (not in CI: bench only)."""

    remote = "benchssh"

    def __init__(self, base: Path) -> None:
        import getpass

        base.mkdir(parents=True)
        self.root = base / "ssh-root"
        self.root.mkdir()
        home = base / "home"
        home.mkdir()
        port = _free_port()
        keys = base / "keys"
        keys.mkdir(mode=0o700)
        for name in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(keys / name)], check=True)  # fmt: skip
        (keys / "authorized_keys").write_text((keys / "client.pub").read_text())
        host_pub = (keys / "host.pub").read_text().split()
        (keys / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
        conf = base / "sshd_config"
        conf.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
            f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPermitRootLogin yes\n"
            "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"StrictModes no\nPidFile {base / 'sshd.pid'}\nSubsystem sftp internal-sftp\n"
            "LogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n"
            # An empty home: bash sources ~/.bashrc for every command over ssh, and this
            # box's root runs `pyenv init` there (~0.2 s of CPU per hash command).
            f"SetEnv HOME={home}\n"
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        self.proc = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-e", "-f", str(conf)],
            stdout=subprocess.DEVNULL, stderr=open(base / "sshd.log", "wb"),  # noqa: SIM115
        )  # fmt: skip
        _wait_port(port, self.proc, "sshd")
        self.config = base / "rclone.conf"
        self.config.write_text(
            f"[{self.remote}]\ntype = sftp\nhost = 127.0.0.1\nport = {port}\n"
            f"user = {getpass.getuser()}\nkey_file = {keys / 'client'}\n"
            f"known_hosts_file = {keys / 'known_hosts'}\nshell_type = unix\n"
            "md5sum_command = md5sum\nsha1sum_command = sha1sum\n"
        )

    def spec(self, folder: Path) -> str:
        """The rclone path of `folder` (absolute: the login's home is not `root`)."""
        return f"{self.remote}:{folder}"

    def cpu(self) -> float:
        """CPU seconds of sshd and every process under it, live or reaped (each session's
        sshd, `internal-sftp`, the `md5sum`/`sha1sum` commands rclone runs)."""
        kids: dict[int, list[int]] = {}
        stats: dict[int, float] = {}
        tick = os.sysconf("SC_CLK_TCK")
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kids.setdefault(int(f[1]), []).append(int(d.name))
            stats[int(d.name)] = sum(int(x) for x in f[11:15]) / tick  # with reaped children
        total, todo = 0.0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            total += stats.get(pid, 0.0)
            todo += kids.get(pid, [])
        return total

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


Server = Sftp | OpenSsh


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    import socket

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


def apply_once(
    tree: Path, transfers: int, scratch: Path, rcat: bool = False, sftp: Server | None = None
) -> dict[str, Any]:
    """Plan + propose (untimed), accept, execute (timed) into a fresh drive folder (on
    `sftp` when given); with `rcat`, every upload goes through `rclone rcat`."""
    from placet.config import load_settings
    from placet.drive import drive_for
    from placet.executor import execute
    from placet.paths.roots import parse_root_spec
    from placet.proposals.context import ProposeContext
    from placet.store import open_store
    from placet.sync.propose import propose_sync
    from placet.sync.service import SyncService

    home = Path(tempfile.mkdtemp(prefix="home-", dir=scratch))
    if sftp is None:
        spec = str(Path(tempfile.mkdtemp(prefix="drive-", dir=scratch)))
    else:
        spec = sftp.spec(Path(tempfile.mkdtemp(prefix="drive-", dir=sftp.root)))
        os.environ["RCLONE_CONFIG"] = str(sftp.config)
    home.chmod(0o700)
    (home / "config.toml").write_text(f"transfers = {transfers}\n")
    settings = load_settings({"PLACET_HOME": str(home), "PLACET_DRIVE": spec})
    store = open_store(settings)
    drive = drive_for(settings)
    if rcat:
        drive.transfers.rcd_upload_max = -1
        drive.transfers.rcd_stream_backends = frozenset()
    try:
        root = parse_root_spec(f"bench={tree}", settings.data_dir)
        ctx = ProposeContext(settings=settings, store=store, drive=drive, roots=(root,),
                             run_id="bench", drive_spec=drive.spec)  # fmt: skip
        svc = SyncService(store, settings)
        plan = svc.make_plan(ctx, svc.folder(ctx, "", None), "", include_hidden=True,
                             allow_empty_side=False)  # fmt: skip
        rec, _ = propose_sync(svc, ctx, plan_id=plan.id, decisions={}, reason="bench")
        store.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "bench",
                                     "tty": False})  # fmt: skip
        drive.capabilities()  # rcd up before timing, as in a running review UI
        server = sftp.cpu if sftp else lambda: 0.0
        os.sync()  # no dirty pages of the set-up left for the timed step to write back
        u = _cpu(drive.rcd_pid, user=True)
        t, c = time.perf_counter(), _cpu(drive.rcd_pid) + server()
        final = execute(store, settings, rec.id, drive=drive)
        wall = time.perf_counter() - t
        cpu = _cpu(drive.rcd_pid) + server() - c
        user = _cpu(drive.rcd_pid, user=True) - u
        assert final.status == "succeeded", store.op_results(rec.id)[:3]
        summary = final.summary or {}
        return {"wall": wall, "cpu": cpu, "user": user, "ops": summary.get("ops"),
                "max_in_flight": (summary.get("transfers") or {}).get("max_in_flight")}  # fmt: skip
    finally:
        drive.close()
        store.close()


def rclone_copy(
    tree: Path, transfers: int, scratch: Path, sftp: Server | None = None
) -> tuple[float, float, float]:
    """`rclone copy` of `tree` (`rclone copyto` of a one-file tree) into a fresh folder."""
    env = {"PATH": "/usr/bin:/bin", "RCLONE_CONFIG": "/dev/null", "HOME": str(scratch)}
    if sftp is None:
        dest = str(Path(tempfile.mkdtemp(prefix="copy-", dir=scratch)))
    else:
        dest = sftp.spec(Path(tempfile.mkdtemp(prefix="copy-", dir=sftp.root)))
        env["RCLONE_CONFIG"] = str(sftp.config)
    files = [p for p in tree.rglob("*") if p.is_file()]
    if len(files) == 1:
        rel = files[0].relative_to(tree)
        argv = [str(RCLONE), "copyto", str(files[0]), f"{dest}/{rel}"]
    else:
        argv = [str(RCLONE), "copy", "--transfers", str(transfers), str(tree), dest]
    server = sftp.cpu if sftp else lambda: 0.0
    os.sync()
    t, c, u = time.perf_counter(), _cpu() + server(), _cpu(user=True)
    subprocess.run(argv, env=env, check=True)
    return time.perf_counter() - t, _cpu() + server() - c, _cpu(user=True) - u


def per_file_floor(n: int, scratch: Path) -> None:
    """What one small file costs through `rclone rcat` (a process per file, as placet's
    uploads run today) and through rcd's `operations/uploadfile` (one HTTP request to the
    running daemon): the floor a per-file transfer could reach (see docs/performance.md)."""
    import urllib.parse

    from placet.drive.proc import child_env, default_rclone_path
    from placet.drive.rcd import Rcd
    from placet.drive.rcd import UnixHTTPConnection as Conn

    src, d1, d2 = scratch / "src", scratch / "rcat", scratch / "upl"
    for d in (src, d1, d2):
        d.mkdir(parents=True)
    for i in range(n):
        (src / f"f{i}.txt").write_bytes(os.urandom(64 + (i * 37) % 2000))
    env = child_env({"RCLONE_CONFIG": "/dev/null"})
    rcd = Rcd(default_rclone_path(), env, scratch / "run")
    rcd.call("rc/noop", {})
    rclone = [str(default_rclone_path()), "--ask-password=false", "rcat", "--size"]
    t, c = time.perf_counter(), _cpu(rcd.pid)
    for i in range(n):
        p = src / f"f{i}.txt"
        with open(p, "rb") as fh:
            argv = [*rclone, str(p.stat().st_size), "--", str(d1 / p.name)]
            subprocess.run(argv, stdin=fh, env=env, check=True)
    w1, c1 = (time.perf_counter() - t) / n, (_cpu(rcd.pid) - c) / n
    _, path, auth = rcd._ensure()
    t, c = time.perf_counter(), _cpu(rcd.pid)
    for i in range(n):
        p = src / f"f{i}.txt"
        b = "b" + os.urandom(8).hex()
        head = (f'--{b}\r\nContent-Disposition: form-data; name="file0"; filename="{p.name}"'
                "\r\nContent-Type: application/octet-stream\r\n\r\n")  # fmt: skip
        body = head.encode() + p.read_bytes() + f"\r\n--{b}--\r\n".encode()
        conn = Conn(path, 30)
        q = urllib.parse.urlencode({"fs": str(d2), "remote": ""})
        kind = f"multipart/form-data; boundary={b}"
        headers = {"Content-Type": kind, "Authorization": auth}
        conn.request("POST", "/operations/uploadfile?" + q, body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        conn.close()
        assert r.status == 200, r.status
    w2, c2 = (time.perf_counter() - t) / n, (_cpu(rcd.pid) - c) / n
    rcd.close()
    for i in range(n):
        assert (d2 / f"f{i}.txt").read_bytes() == (src / f"f{i}.txt").read_bytes()
    print(f"per small file, {n} files: rclone rcat {w1 * 1e3:.1f} ms wall {c1 * 1e3:.1f} ms CPU;"
          f" rcd operations/uploadfile {w2 * 1e3:.1f} ms wall {c2 * 1e3:.1f} ms CPU")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trees", default="small,site,deep", help="small,site,deep,large,huge")
    ap.add_argument("--files", default="1200", help="small-file tree sizes, e.g. 1200,10000")
    ap.add_argument("--deep-files", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=4)
    ap.add_argument("--large-mib", type=int, default=32)
    ap.add_argument("--huge-mib", type=int, default=1024, help="one file of this many MiB")
    ap.add_argument("--drives", default="local,sftp", help="local,sftp,openssh")
    ap.add_argument("--transfers", default="4")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per row (medians printed)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-sync-apply"))
    ap.add_argument("--floor", type=int, default=0, help="files for the per-file floor")
    ap.add_argument("--rcat", action="store_true", help="every upload through rclone rcat")
    args = ap.parse_args()
    trees = make_trees(args)
    drives = args.drives.split(",")
    servers: dict[str, Server] = {}
    if "sftp" in drives:
        servers["sftp"] = Sftp(args.dir / "sftp")
    if "openssh" in drives:
        servers["openssh"] = OpenSsh(args.dir / "openssh")
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average before: {' '.join(load)}; {os.cpu_count()} CPUs; medians of {args.repeat}")
    print(f"{'tree':<18}{'drive':>6}{'N':>3} {'placet wall':>12}{'CPU':>10} {'rclone':>12}"
          f"{'CPU':>10} {'wall ratio':>11} {'CPU ratio':>10} {'user':>11} {'ops':>8}")  # fmt: skip
    try:
        for label, tree in trees.items():
            for drive in drives:
                server = servers.get(drive)
                for n in (int(x) for x in args.transfers.split(",")):
                    rounds: list[tuple[float, float, float, float, float, float]] = []
                    ops = None
                    scratches: list[Path] = []
                    try:
                        for _ in range(args.repeat):
                            scratch = Path(tempfile.mkdtemp(prefix="run-", dir=args.dir))
                            scratches.append(scratch)
                            got = apply_once(tree, n, scratch, rcat=args.rcat, sftp=server)
                            cw, cc, cu = rclone_copy(tree, n, scratch, server)
                            rounds.append((got["wall"], got["cpu"], cw, cc, got["user"], cu))
                            ops = got["ops"]
                    finally:
                        # Deleted once the row ends: on ext4 without a journal, creating
                        # files right after many were deleted costs the kernel a scan of the
                        # freed inodes (`recently_deleted`); deleting each round's copies
                        # billed it to the next round's placet step alone.
                        for scratch in scratches:
                            shutil.rmtree(scratch, ignore_errors=True)
                        if server is not None:
                            for d in server.root.iterdir():
                                shutil.rmtree(d, ignore_errors=True)
                    pw, pc, cw, cc = (statistics.median(r[k] for r in rounds) for k in range(4))
                    wr = statistics.median(r[0] / r[2] for r in rounds)
                    cr = statistics.median(r[1] / max(r[3], 0.01) for r in rounds)
                    ur = statistics.median(r[4] / max(r[5], 0.01) for r in rounds)
                    print(f"{label:<18}{drive:>6}{n:>3} {pw:>10.2f} s{pc:>8.2f} s"
                          f" {cw:>10.2f} s{cc:>8.2f} s {wr:>10.2f}x {cr:>9.2f}x {ur:>10.2f}x"
                          f" {ops!s:>8}", flush=True)  # fmt: skip
                    each = "; ".join(f"{a:.2f}/{b:.2f}/{e:.2f} vs {c:.2f}/{d:.2f}/{f:.2f}"
                                     for a, b, c, d, e, f in rounds)  # fmt: skip
                    print(f"    rounds (placet wall/CPU/user vs rclone): {each}", flush=True)
    finally:
        for server in servers.values():
            server.close()
    if args.floor:
        per_file_floor(args.floor, Path(tempfile.mkdtemp(prefix="floor-", dir=args.dir)))
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average after: {' '.join(load)}")
    shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
