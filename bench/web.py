"""`placet web` in Debian's Chromium: first contentful paint of the queue with 10,000
pending proposals, and the accept round trip (click to `succeeded`) of a small upload.

The targets: the queue's first contentful paint under 1 s with 10,000 pending.
The server is the real app under uvicorn on 127.0.0.1 (in this process, in a thread);
the browser signs in with a virtual passkey (DevTools WebAuthn domain), then loads the
queue `--runs` times; first contentful paint is the browser's own
`performance.getEntriesByName("first-contentful-paint")`, and the time to the queue's
HTML response (`responseEnd` of the navigation entry) is reported beside it. The
accept round trip: a 1 KiB upload to a local-folder drive, from the click on "Accept
with passkey" (the assertion, the verification, the approval, the execution through
rclone) until the page says `succeeded`.

    .venv/bin/python bench/web.py [--pending 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT_REF = {"name": "proj", "path": "/home/owner/proj", "device": 1, "inode": 2}


def seed(store: Any, n: int) -> None:
    now = datetime.now(UTC)
    for i in range(n):
        name = f"f{i:05d}.txt"
        request = {
            "kind": "upload", "root": ROOT_REF, "local_path": f"src/{name}",
            "remote_parent": "bench", "name": name, "replace_existing": False,
        }  # fmt: skip
        evidence = {
            "local": {"size": 1000 + i, "mtime_ns": 1, "sha256": f"{i:064x}"},
            "remote": {"exists": False},
        }
        store.create_proposal(
            kind="upload", request=request, evidence=evidence, reason=f"bench proposal {i}",
            drive_spec="bench:", run_id=f"run-{i % 8}", client_name="bench",
            ttl_seconds=1800, now=now,
        )  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    import uvicorn
    from playwright.sync_api import sync_playwright

    from placet.config import load_settings
    from placet.drive import drive_for
    from placet.paths.roots import parse_root_spec
    from placet.proposals.context import ProposeContext
    from placet.proposals.making import propose_upload
    from placet.store import open_store
    from placet.store.passkeys import open_pairing_link
    from placet.web import WebConfig, create_app
    from placet.web.runs import Runs

    tmp = Path(tempfile.mkdtemp(prefix="placet-bench-web-"))
    home, drive_dir, root = tmp / "home", tmp / "drive", tmp / "proj"
    home.mkdir(mode=0o700)
    drive_dir.mkdir()
    root.mkdir()
    (home / "config.toml").write_text(
        f"pending_total = {args.pending + 10}\npending_per_session = {args.pending + 10}\n"
        f'drive = "{drive_dir}"\n'
    )
    os.environ["PLACET_HOME"] = str(home)
    settings = load_settings()
    store = open_store(settings)
    t = time.perf_counter()
    seed(store, args.pending)
    print(f"seeded {args.pending} pending in {time.perf_counter() - t:.1f} s")

    config = WebConfig(port=free_port())
    runs = Runs(store, settings)
    app = create_app(store, settings, config, runs=runs)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=config.port,
                                           log_level="warning"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 390, "height": 844})
        cdp = page.context.new_cdp_session(page)
        cdp.send("WebAuthn.enable")
        cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
            "hasUserVerification": True, "isUserVerified": True}})  # fmt: skip
        page.goto(f"{config.origin}/pair/{open_pairing_link(store)}")
        page.click("#pair")
        page.wait_for_url(f"{config.origin}/")

        fcp, html = [], []
        for _ in range(args.runs):
            page.goto(f"{config.origin}/")
            page.wait_for_selector(f"text={args.pending} pending")
            timing = page.evaluate(
                """() => new Promise((done) => {
                  const nav = performance.getEntriesByType("navigation")[0];
                  const read = () => {
                    const p = performance.getEntriesByName("first-contentful-paint")[0];
                    if (p) done({fcp: p.startTime, html: nav.responseEnd});
                    else setTimeout(read, 20);
                  };
                  read();
                })"""
            )
            fcp.append(timing["fcp"])
            html.append(timing["html"])
        print(
            f"queue, {args.pending} pending, {args.runs} loads: first contentful paint median "
            f"{statistics.median(fcp):.0f} ms (min {min(fcp):.0f}, max {max(fcp):.0f}); "
            f"HTML received median {statistics.median(html):.0f} ms"
        )

        (root / "small.txt").write_bytes(b"x" * 1024)
        drive = drive_for(settings)
        roots = (parse_root_spec(f"proj={root}", settings.data_dir),)
        ctx = ProposeContext(
            settings=settings,
            store=store,
            drive=drive,
            roots=roots,
            run_id="bench",
            drive_spec=drive.spec,
            client_name="bench",
        )
        trips = []
        for i in range(args.runs):
            name = f"small-{i}.txt"
            (root / name).write_bytes(os.urandom(1024))
            rec, _ = propose_upload(ctx, local_path=name, remote_parent="", reason="bench")
            page.goto(f"{config.origin}/p/{rec.id}")
            t0 = time.perf_counter()
            page.click("#accept")
            page.wait_for_selector("#proposal-status:has-text('succeeded')", timeout=60_000)
            trips.append((time.perf_counter() - t0) * 1000)
        drive.close()
        print(
            f"accept round trip (click to succeeded, 1 KiB upload, local-folder drive), "
            f"{args.runs} runs: median {statistics.median(trips):.0f} ms "
            f"(min {min(trips):.0f}, max {max(trips):.0f})"
        )
        browser.close()
    server.should_exit = True
    thread.join(10)
    runs.stop()
    store.close()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
