"""One process of the rate test: make `count` mkdir proposals under `reports/` and let
the rules judge each, its clock `start` plus a quarter second per proposal; prints how
many the rules approved. Run as `python -m tests.rules.rate_worker WORKER COUNT START`."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

from placet.config import load_settings
from placet.rules.loading import owner_drive
from placet.store import open_store
from tests.support.rules import judge_now


def main(worker: str, count: int, start: datetime) -> int:
    settings = load_settings()
    approved = 0
    with open_store(settings) as store:
        for i in range(count):
            now = start + timedelta(seconds=i / 4)
            rec, _ = store.create_proposal(
                kind="mkdir",
                request={"kind": "mkdir", "remote_parent": "reports", "name": f"w{worker}-{i}"},
                evidence={"remote": {"exists": False}},
                reason="rate test", drive_spec=owner_drive(settings, {}),
                run_id=f"run-{worker}", ttl_seconds=600, now=now,
            )  # fmt: skip
            out = judge_now(store, settings, rec, now=now)
            approved += out.approved_by is not None
    print(approved)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), datetime.fromisoformat(sys.argv[3])))
