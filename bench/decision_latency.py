"""Decision latency: the owner accepts on host B -> host A's executor starts.

Two data directories (two host ids) on one database. Host A runs the real
`placet executor` as a child process, idle; this process, as host A's agent, proposes a
mkdir on A's drive (a local folder), then, as the owner on host B, accepts it, and waits
until A's executor has run it. The latency of one decision is the time between the
approval's audit event (B's commit) and the claim's (A's executor starting it); both
stamps come from this machine's clock, so they compare exactly. Decisions are made one
at a time, each after the executor went idle again, so each measures a wake-up.

On PostgreSQL the executor sleeps in LISTEN and the accept's NOTIFY wakes it; on SQLite
it polls the file's data version every 0.2 s. Target: p99 <= 1 s on PostgreSQL.

Usage: .venv/bin/python bench/decision_latency.py [--decisions 100]
           [--database URL | --temp-server] [--gap 0.05]
`--temp-server` starts a throwaway PostgreSQL server (tests/support/postgres.py; run
from the repository's root); without either, both hosts share one SQLite file.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PLACET = str(Path(sys.executable).parent / "placet")


@contextmanager
def _database(args: argparse.Namespace, tmp: Path) -> Iterator[str]:
    if args.database:
        yield args.database
    elif args.temp_server:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.support.postgres import migrated_database, start_pg_server

        servers = start_pg_server()
        server = next(servers)
        os.environ["PGPASSWORD"] = server.password
        try:
            yield migrated_database(server)
        finally:
            servers.close()
    else:
        yield str(tmp / "shared.db")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--decisions", type=int, default=100)
    ap.add_argument("--database", help="a PostgreSQL URL (password from PGPASSWORD)")
    ap.add_argument("--temp-server", action="store_true", help="start a throwaway server")
    ap.add_argument("--gap", type=float, default=0.05, help="idle seconds between decisions")
    args = ap.parse_args()

    from placet.config import load_settings
    from placet.drive import configured_spec
    from placet.store import open_store

    with tempfile.TemporaryDirectory(prefix="placet-latency-") as t:
        tmp = Path(t)
        with _database(args, tmp) as db:
            homes = {h: tmp / f"host-{h}" for h in ("a", "b")}
            drive = tmp / "drive-a"
            drive.mkdir()
            for h, home in homes.items():
                home.mkdir(mode=0o700)
                extra = f'drive = "{drive}"\n' if h == "a" else ""
                (home / "config.toml").write_text(extra + "pending_per_session = 100000\n")
            env = {h: {"PLACET_HOME": str(home), "PLACET_DB": db} for h, home in homes.items()}
            settings_a = load_settings(env["a"])
            store_a, store_b = open_store(settings_a), open_store(load_settings(env["b"]))
            executor = subprocess.Popen(
                [PLACET, "executor"],
                env={**os.environ, **env["a"]},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert executor.stdout is not None
            executor.stdout.readline()  # "executor of host ... running"
            latencies: list[float] = []
            try:
                for i in range(args.decisions):
                    rec, _ = store_a.create_proposal(
                        kind="mkdir",
                        request={"kind": "mkdir", "remote_parent": "", "name": f"d{i:05d}"},
                        evidence={"remote": {"exists": False}},
                        reason="latency",
                        drive_spec=configured_spec(settings_a),
                        run_id="bench",
                        ttl_seconds=600,
                    )
                    time.sleep(args.gap)  # the executor is idle again
                    store_b.accept(
                        rec.id,
                        detail={"request_hash": rec.request_hash, "via": "bench", "tty": False},
                    )
                    deadline = time.monotonic() + 30
                    while store_a.get(rec.id).status not in ("succeeded", "failed"):
                        if time.monotonic() > deadline:
                            raise SystemExit(f"proposal {rec.id} was not run in 30 s")
                        time.sleep(0.01)
                    events = store_a.audit_events(proposal_id=rec.id)
                    approved = next(e.at for e in events if e.to_status == "approved")
                    claimed = next(e.at for e in events if e.to_status == "executing")
                    latencies.append((claimed - approved).total_seconds())
            finally:
                executor.terminate()
                executor.wait(timeout=30)
                store_a.close()
                store_b.close()
    backend = "SQLite (data version polled)" if db.endswith(".db") else "PostgreSQL (NOTIFY)"
    ms = [x * 1000 for x in latencies]
    print(f"decision latency, accept on host B -> claim on host A: {backend}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(
        f"decisions {len(ms)}: p50 {_percentile(ms, 0.5):.1f} ms, p90 "
        f"{_percentile(ms, 0.9):.1f} ms, p99 {_percentile(ms, 0.99):.1f} ms, max "
        f"{max(ms):.1f} ms, mean {statistics.fmean(ms):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
