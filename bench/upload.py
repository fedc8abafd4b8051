"""Accept-to-done time of one large upload through the executor, beside `rclone copyto`.

docs/design.md section 8: executing an accepted 1 GiB upload to a local-folder remote must be
within 1.1x of `rclone copyto` alone; other remotes are reported. The timed span is what
the owner waits for after deciding: `Store.accept` + `placet.executor.execute` (claim,
binding checks, drive set-up, evidence re-check, descriptor walk, streaming into `rclone
rcat` while hashing, verification of the stored object, move into place, journal,
finish). Proposing (hashing the file for the evidence) happens before, untimed, as it does
before the owner sees the proposal. `rclone copyto` (default flags, same rclone, same
remote, same source file in the page cache) is the peer; the two alternate, and each
figure is the best of `--runs`. CPU seconds (this process, its children, and the rcd the
executor starts) are printed beside wall seconds, the steadier figure on a busy machine.

Remotes: a local folder, and `rclone serve webdav` on 127.0.0.1 (no digests, so the
executor also reads the upload back to verify it; copyto compares size only there).

    .venv/bin/python bench/upload.py [--size-mib 1024] [--runs 3] [--remotes local,webdav]
    .venv/bin/python bench/upload.py --phases [--size-mib 512]   # where WebDAV time goes

`--phases` times the drive's upload on WebDAV by phase (stream up through `rclone rcat`,
read back through `rclone cat`, rc calls), with read-back verification on and off,
beside `rclone copyto`.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from placet.config import load_settings
from placet.drive import drive_for
from placet.drive.proc import child_env
from placet.executor import execute
from placet.paths.roots import parse_root_spec
from placet.proposals.context import ProposeContext
from placet.proposals.making import propose_upload
from placet.store import open_store

RCLONE = Path(sys.executable).parent / "rclone"


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise TimeoutError(port)


def _make_source(path: Path, size: int) -> None:
    block = os.urandom(1 << 20)
    with path.open("wb") as f:
        for i in range(size >> 20):
            f.write(block[i % 4096 :] + block[: i % 4096])
    with path.open("rb") as f:  # warm the page cache: both contenders read from memory
        while f.read(1 << 24):
            pass


class Remote:
    """One remote: the drive spec placet uses, the rclone env and where files land."""

    def __init__(self, kind: str, base: Path) -> None:
        self.kind = kind
        self.folder = base / f"{kind}-data"
        self.folder.mkdir()
        self.env: dict[str, str] = {"HOME": str(base), "XDG_CACHE_HOME": str(base / "cache")}
        self.server: subprocess.Popen[bytes] | None = None
        if kind == "local":
            self.spec = str(self.folder)
            self.env["RCLONE_CONFIG"] = "/dev/null"
            return
        port = _free_port()
        rc_env = child_env(self.env | {"RCLONE_CONFIG": "/dev/null"}, base={})
        self.server = subprocess.Popen(
            [str(RCLONE), "serve", "webdav", str(self.folder), "--addr", f"127.0.0.1:{port}"],
            env=rc_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_port(port)
        conf = base / "rclone.conf"
        conf.write_text(f"[dav]\ntype = webdav\nurl = http://127.0.0.1:{port}\nvendor = rclone\n")
        self.env["RCLONE_CONFIG"] = str(conf)
        self.spec = "dav:"

    def copyto(self, src: Path, name: str) -> None:
        dest = f"{self.spec.rstrip('/')}/{name}" if self.kind == "local" else f"dav:{name}"
        subprocess.run(
            [str(RCLONE), "copyto", str(src), dest],
            env=child_env(self.env, base={}),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def clear(self) -> None:
        for p in self.folder.iterdir():
            p.unlink() if p.is_file() else shutil.rmtree(p)

    def close(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait()


def bench_remote(kind: str, base: Path, src_root: Path, size: int, runs: int) -> dict[str, float]:
    remote = Remote(kind, base)
    home = base / f"placet-{kind}"
    os.environ["PLACET_HOME"] = str(home)
    os.environ["RCLONE_CONFIG"] = remote.env["RCLONE_CONFIG"]
    settings = load_settings().model_copy(update={"drive": remote.spec})
    store = open_store(settings)
    root = parse_root_spec(f"src={src_root}", settings.data_dir)
    best = {"placet_wall": 1e9, "placet_cpu": 1e9, "copyto_wall": 1e9, "copyto_cpu": 1e9}
    try:
        for i in range(runs):
            name = f"big-{i}.bin"
            drive = drive_for(settings)
            ctx = ProposeContext(settings=settings, store=store, drive=drive, roots=(root,),
                                 run_id="bench", drive_spec=drive.spec)  # fmt: skip
            rec, _ = propose_upload(ctx, local_path="big.bin", remote_parent="", name=name,
                                    reason="benchmark")  # fmt: skip
            drive.close()

            w, c = time.perf_counter(), _cpu()
            store.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "bench"})
            final = execute(store, settings, rec.id)
            w, c = time.perf_counter() - w, _cpu() - c
            assert final.status == "succeeded", store.op_results(rec.id)
            detail = store.op_results(rec.id)[0].detail
            best["placet_wall"] = min(best["placet_wall"], w)
            best["placet_cpu"] = min(best["placet_cpu"], c)
            print(f"  {kind} run {i}: placet {w:6.2f} s wall {c:6.2f} s CPU "
                  f"({detail['verification']})", flush=True)  # fmt: skip
            remote.clear()

            w, c = time.perf_counter(), _cpu()
            remote.copyto(src_root / "big.bin", f"copy-{i}.bin")
            w, c = time.perf_counter() - w, _cpu() - c
            best["copyto_wall"] = min(best["copyto_wall"], w)
            best["copyto_cpu"] = min(best["copyto_cpu"], c)
            print(f"  {kind} run {i}: copyto {w:6.2f} s wall {c:6.2f} s CPU", flush=True)
            remote.clear()
    finally:
        store.close()
        remote.close()
    return best


def phases(size_mib: int) -> None:
    """Where a WebDAV upload's time goes: wraps the drive's phases with timers."""
    import hashlib

    from placet.drive import RcloneDrive
    from placet.drive import rclone as drive_rclone

    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t

        return wrapper

    cls = drive_rclone.RcloneDrive
    cls._stream_up = timed("stream up (rcat)", cls._stream_up)  # type: ignore[method-assign]
    cls._stream_down = timed("read back (cat)", cls._stream_down)  # type: ignore[method-assign]
    cls._rc = timed("rc calls", cls._rc)  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="placet-bench-phases-") as tmp:
        base = Path(tmp)
        src = base / "big.bin"
        _make_source(src, size_mib << 20)
        sha = hashlib.sha256(src.read_bytes()).hexdigest()
        remote = Remote("webdav", base)
        try:
            for readback in (True, False):
                drive = RcloneDrive(remote.spec, rclone_path=RCLONE, env=remote.env,
                                    run_dir=base / "run", verify_readback=readback)  # fmt: skip
                drive.capabilities()
                spent.clear()
                fd = os.open(src, os.O_RDONLY)
                t = time.perf_counter()
                r = drive.upload_from_fd(fd, size_mib << 20, f"p-{readback}.bin",
                                         expected_sha256=sha)  # fmt: skip
                total = time.perf_counter() - t
                os.close(fd)
                drive.close()
                remote.clear()
                parts = ", ".join(f"{k} {v:.2f} s" for k, v in spent.items())
                print(f"upload_from_fd, {r.verification}: {total:.2f} s ({parts})")
            t = time.perf_counter()
            remote.copyto(src, "c.bin")
            print(f"rclone copyto: {time.perf_counter() - t:.2f} s")
        finally:
            remote.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--remotes", default="local,webdav")
    ap.add_argument("--phases", action="store_true", help="WebDAV upload time by phase")
    args = ap.parse_args()
    if args.phases:
        phases(args.size_mib)
        return
    size = args.size_mib << 20
    with tempfile.TemporaryDirectory(prefix="placet-bench-upload-") as tmp:
        base = Path(tmp)
        src_root = base / "src"
        src_root.mkdir()
        _make_source(src_root / "big.bin", size)
        print(f"{args.size_mib} MiB, best of {args.runs}; load average {os.getloadavg()}")
        results = {}
        for kind in args.remotes.split(","):
            results[kind] = bench_remote(kind, base, src_root, size, args.runs)
        print("\n| remote | placet wall s | copyto wall s | ratio wall | placet CPU s | "
              "copyto CPU s | ratio CPU | MiB/s (placet) |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for kind, b in results.items():
            print(
                f"| {kind} | {b['placet_wall']:.2f} | {b['copyto_wall']:.2f} | "
                f"{b['placet_wall'] / b['copyto_wall']:.2f} | {b['placet_cpu']:.2f} | "
                f"{b['copyto_cpu']:.2f} | {b['placet_cpu'] / b['copyto_cpu']:.2f} | "
                f"{args.size_mib / b['placet_wall']:.0f} |"
            )
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
