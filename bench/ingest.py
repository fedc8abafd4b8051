"""Ingest benchmark (docs/design.md section 8): 4 processes creating proposals through the store.

Each process opens its own `Store` on one fresh database and, after a common start
barrier, calls `create_proposal` with distinct upload-shaped requests for `--seconds`.
Afterwards the parent counts the proposals and audit events actually in the database and
verifies the audit chain. Target: >= 1,000 proposals/s in total, none lost, no
"database is locked" reaching a caller.

The pending caps (100 per bridge, 1,000 in total by default) would stop the run within a
second, so this benchmark raises them (`pending_per_session` and `pending_total` to
10,000,000) in the run's own `config.toml`, and says so in its output.

`--database postgresql://user@host/db` runs it on a PostgreSQL server instead of the
SQLite file (the password from PGPASSWORD or ~/.pgpass; the database should be empty).

Usage: .venv/bin/python bench/ingest.py [--procs 4] [--seconds 10] [--home DIR]
       [--database URL]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

RAISED_CAP = 10_000_000


def _request(proc: int, i: int) -> tuple[dict[str, object], dict[str, object]]:
    request = {
        "kind": "upload",
        "root": {"name": "proj", "path": "/home/user/proj", "device": 2049, "inode": 131073},
        "local_path": f"build/p{proc}/artifact-{i:08d}.tar.gz",
        "remote_parent": f"Agents/builds/p{proc}",
        "name": f"artifact-{i:08d}.tar.gz",
        "replace_existing": False,
    }
    evidence = {
        "local": {
            "size": 1_048_576 + i,
            "mtime_ns": 1_764_000_000_000_000_000 + i,
            "sha256": f"{proc:02x}{i:062x}",
            "digest_type": "sha1",
            "digest": f"{i:040x}",
        },
        "remote": {"exists": False},
    }
    return request, evidence


def _env(home: str, database: str | None) -> dict[str, str]:
    return {"PLACET_HOME": home, **({"PLACET_DB": database} if database else {})}


def _backend_cpu(store: object) -> float | None:
    """CPU seconds (user + system) used so far by the PostgreSQL backend serving `store`'s
    pooled connection, read from /proc when the server runs on this machine, else None."""
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _worker(
    home: str, database: str | None, proc: int, seconds: float, barrier: object, out: str
) -> None:
    from placet.config import load_settings
    from placet.errors import PlacetError
    from placet.store import open_store

    store = open_store(load_settings(_env(home, database)))
    created, errors = 0, []
    server_start = _backend_cpu(store) if database else None
    barrier.wait(timeout=120)  # type: ignore[attr-defined]
    start = time.perf_counter()
    cpu_start = time.process_time()
    deadline = start + seconds
    i = 0
    while time.perf_counter() < deadline:
        request, evidence = _request(proc, i)
        i += 1
        try:
            _, new = store.create_proposal(
                kind="upload",
                request=request,
                evidence=evidence,
                reason=f"upload build artifact {i}",
                drive_spec="protondrive:Agents",
                run_id=f"bench-{proc}",
                client_name="bench",
                client_version="1",
                ttl_seconds=1800,
            )
            created += int(new)
        except PlacetError as e:
            errors.append(f"{e.error_code}: {e.message}")
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    server_end = _backend_cpu(store) if database else None
    server = None if server_start is None or server_end is None else server_end - server_start
    store.close()
    Path(out).write_text(
        json.dumps(
            {"created": created, "elapsed": elapsed, "cpu": cpu, "server_cpu": server,
             "errors": errors}
        )
    )  # fmt: skip


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--home", help="data directory to use (default: a fresh temp dir)")
    ap.add_argument("--database", help="a PostgreSQL URL (default: SQLite in the home)")
    args = ap.parse_args()

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="placet-ingest-"))
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"pending_per_session = {RAISED_CAP}\npending_total = {RAISED_CAP}\n"
    )
    from placet.config import load_settings
    from placet.store import open_store

    env = _env(str(home), args.database)
    open_store(load_settings(env)).close()  # migrate once, up front

    load_before = os.getloadavg()[0]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(args.procs)
    outs = [home / f"worker{p}.json" for p in range(args.procs)]
    procs = [
        ctx.Process(
            target=_worker,
            args=(str(home), args.database, p, args.seconds, barrier, str(outs[p])),
        )
        for p in range(args.procs)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    results = [json.loads(o.read_text()) for o in outs]
    created = sum(r["created"] for r in results)
    elapsed = max(r["elapsed"] for r in results)
    errors = [e for r in results for e in r["errors"]]

    with open_store(load_settings(env)) as store:
        found = store.counts()["pending"]
        verification = store.verify_audit()

    rate = created / elapsed
    print(f"store: {'PostgreSQL' if args.database else 'SQLite'}")
    print(f"machine: {os.cpu_count()} CPUs, {_cpu_model()}, Python {platform.python_version()}")
    print(f"load average (1 min) before/after: {load_before:.2f} / {os.getloadavg()[0]:.2f}")
    print(f"caps raised for this run: pending_per_session = pending_total = {RAISED_CAP}")
    print(f"{args.procs} processes x {args.seconds:g} s: created {created} proposals")
    print(f"rate: {rate:,.0f} proposals/s total")
    for n, r in enumerate(results):
        print(f"  process {n}: {r['created']} ({r['created'] / r['elapsed']:,.0f}/s)")
    cpu_ms = 1000 * sum(r["cpu"] for r in results) / max(created, 1)
    print(
        f"CPU per proposal (all workers): {cpu_ms:.2f} ms, so {os.cpu_count()} idle CPUs "
        f"could sustain ~{1000 * (os.cpu_count() or 1) / cpu_ms:,.0f}/s if the lock allowed"
    )
    server = [r["server_cpu"] for r in results]
    if args.database and None not in server:
        print(
            "server CPU per proposal (the workers' backends, read from /proc): "
            f"{1000 * sum(server) / max(created, 1):.2f} ms"
        )
    print(f"found afterwards: {found} pending proposals; lost: {created - found}")
    print(
        f"errors surfaced to callers: {len(errors)}" + (f" (first: {errors[0]})" if errors else "")
    )
    print(f"audit verify: {'ok' if verification.ok else 'FAILED'}: {verification.message}")
    ok = found == created and not errors and verification.ok
    if not args.home:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
