"""`placet web` runs its store work in the thread pool, never on the event loop: while
`/audit?verify=1` is stuck reading the audit anchor (a FIFO no one writes yet, so the
read blocks until the test lets it go), the queue page still answers."""

from __future__ import annotations

import os
import threading
import time

from placet.store import Store
from tests.support.review import add_upload
from tests.support.web import Served
from tests.web.test_malformed_requests import get, session


def test_a_slow_audit_verify_does_not_stall_the_queue_page(
    quiet_store: Store, served: Served
) -> None:
    rec = add_upload(quiet_store)
    token = session(quiet_store)
    anchor = quiet_store.anchor_path
    saved = anchor.read_bytes()
    anchor.unlink()
    os.mkfifo(anchor, 0o600)
    verified: dict[str, tuple[int, str]] = {}
    slow = threading.Thread(
        target=lambda: verified.update(got=get(served, "/audit?verify=1", token)), daemon=True
    )
    writer = -1
    try:
        slow.start()
        deadline = time.monotonic() + 30
        while writer < 0:  # until the verify has the anchor open for reading
            try:
                writer = os.open(anchor, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                assert time.monotonic() < deadline, "the verify never opened the anchor"
                time.sleep(0.01)
        # the verify now waits for the anchor's bytes; the queue must not wait with it
        status, page = get(served, "/", token)
        assert status == 200 and f"/p/{rec.id}" in page
        assert slow.is_alive() and not verified  # the verify is still waiting
        os.write(writer, saved)
        os.close(writer)
        writer = -1
        slow.join(30)
        status, page = verified["got"]
        assert status == 200 and "events verified" in page, page[:500]
    finally:
        if writer >= 0:
            os.close(writer)
        elif slow.is_alive():  # let a verify stuck opening the anchor go (it reads EOF)
            os.close(os.open(anchor, os.O_RDWR | os.O_NONBLOCK))
        anchor.unlink()
        anchor.write_bytes(saved)
