"""Big files on sftp: placet's upload beside `rclone copyto`, and the floor its checks set.

On one `rclone serve sftp` of a local folder on 127.0.0.1 (`Sftp` of bench/sync_apply.py),
or with `--server openssh` OpenSSH's sshd there (`OpenSsh`: `md5sum`/`sha1sum` read the
object, as on an owner's server), each round runs, one after the other on fresh names:

* **copyto**: `rclone copyto FILE benchsftp:...` (default flags: md5 of both sides; the
  server's local backend hashes md5 while it writes, so its check reads nothing back;
  OpenSSH's `md5sum` reads the object).
* **checks**: what placet's two checks add, on the object copyto stored, through a
  running rcd (`RcloneDrive` on the same remote): the server's sha1 of it, a move,
  the sha1 again (`_verify` of the temporary object, `_move`, `_verify` of the target;
  the server reads the whole object for each digest).
* **placet**: `RcloneDrive.upload_from_fd` of the same file (stream to a temporary
  object, check, move, check), through rcd (`RCD_STREAM_BACKENDS`) or, with `--rcat`,
  `rclone rcat`.

Printed per round: wall and CPU seconds (this process, its children, rcd and the server,
read from /proc); then medians and the ratios placet / copyto and (copyto + checks) /
copyto, the floor placet cannot go below while it keeps both checks.

    .venv/bin/python bench/big_upload_floor.py [--size-mib 1024] [--rounds 3] [--rcat]
        [--server sftp|openssh] [--dir /tmp/placet-bench-big-floor]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_apply import RCLONE, OpenSsh, Sftp, _cpu, _cpu_of

from placet.drive import RcloneDrive


def _timed(fn: Callable[[], object], others: Callable[[], float]) -> tuple[float, float]:
    """(wall, CPU) of `fn()`: this process, its reaped children and `others()` seconds."""

    def cpu() -> float:
        return _cpu() + others()

    t, c = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - t, cpu() - c


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rcat", action="store_true", help="placet's upload through rclone rcat")
    ap.add_argument("--server", choices=("sftp", "openssh"), default="sftp")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/placet-bench-big-floor"))
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="run-", dir=args.dir))
    src = base / "big.bin"
    size = args.size_mib << 20
    with open(src, "wb") as f:
        for _ in range(args.size_mib):
            f.write(os.urandom(1 << 20))
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    sftp = Sftp(base / "sftp") if args.server == "sftp" else OpenSsh(base / "openssh")
    env = {"PATH": "/usr/bin:/bin", "RCLONE_CONFIG": str(sftp.config), "HOME": str(base)}
    os.environ["RCLONE_CONFIG"] = str(sftp.config)
    (sftp.root / "d").mkdir()
    spec = sftp.spec(sftp.root / "d")
    drive = RcloneDrive(spec, rclone_path=RCLONE, env=env, run_dir=base / "run")
    if args.rcat:
        drive.transfers.rcd_stream_backends = frozenset()
    drive.capabilities()  # rcd up before timing, as in a running review UI
    others = lambda: _cpu_of(drive.rcd_pid) + sftp.cpu()  # noqa: E731
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average before: {' '.join(load)}; {os.cpu_count()} CPUs; {args.size_mib} MiB; "
          f"{args.server}")  # fmt: skip
    rows: list[tuple[float, float, float, float, float, float]] = []
    fd = os.open(src, os.O_RDONLY)
    try:
        for i in range(args.rounds):
            copy, moved, up = f"copy{i}", f"moved{i}", f"placet{i}"
            argv = [str(RCLONE), "copyto", str(src), f"{spec}/{copy}"]
            cw, cc = _timed(lambda: subprocess.run(argv, env=env, check=True), others)  # noqa: B023

            def checks(copy: str = copy, moved: str = moved) -> None:
                assert drive.listing.fresh_stat(copy, ("sha1",)) is not None
                drive.calls.move(copy, moved)
                assert drive.listing.fresh_stat(moved, ("sha1",)) is not None

            kw, kc = _timed(checks, others)
            pw, pc = _timed(
                lambda: drive.upload_from_fd(fd, size, up, expected_sha256=sha),  # noqa: B023
                others,
            )
            rows.append((cw, cc, kw, kc, pw, pc))
            print(
                f"round {i + 1}: copyto {cw:6.2f} s {cc:6.2f} CPU | checks {kw:5.2f} s "
                f"{kc:5.2f} CPU | placet {pw:6.2f} s {pc:6.2f} CPU | placet/copyto "
                f"{pw / cw:4.2f}x wall {pc / cc:4.2f}x CPU | floor {(cw + kw) / cw:4.2f}x wall "
                f"{(cc + kc) / cc:4.2f}x CPU",
                flush=True,
            )
            for p in sftp.root.joinpath("d").iterdir():
                p.unlink()
    finally:
        os.close(fd)
        drive.close()
        sftp.close()
        shutil.rmtree(base, ignore_errors=True)
    med = [statistics.median(r[k] for r in rows) for k in range(6)]
    ratios = [(r[4] / r[0], r[5] / r[1], (r[0] + r[2]) / r[0], (r[1] + r[3]) / r[1]) for r in rows]
    m = [statistics.median(x[k] for x in ratios) for k in range(4)]
    print(
        f"medians: copyto {med[0]:.2f} s {med[1]:.2f} CPU, checks {med[2]:.2f} s {med[3]:.2f} "
        f"CPU, placet {med[4]:.2f} s {med[5]:.2f} CPU; median ratios: placet/copyto "
        f"{m[0]:.2f}x wall {m[1]:.2f}x CPU, floor (copyto + checks)/copyto {m[2]:.2f}x wall "
        f"{m[3]:.2f}x CPU"
    )
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average after: {' '.join(load)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
