"""Recording the sync baseline as an accepted sync proposal runs (docs/design.md section 7).

The baseline says what both sides held after the last sync that touched a path; the
planner reads it to tell "edited here" from "deleted there". It is written only from
verified facts: after each op that ends `done` or `already_done` (the content's SHA-256,
the remote's digest or size and mtime; an upload's verified digest also primes the
remote digest cache), and once the ops ran, for the plan's skips verified by digest and
its folders on both sides. Entries go in batches (`flush`, with the executor's result
batches). A failed, stale or skipped op records nothing, nor does one whose content's
SHA-256 is unknown; recording never fails an op (docs/decisions/0027-sync-execution.md)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placet.schema import Op, parse_sync_request
from placet.store.lifecycle import SUCCESS_OUTCOMES
from placet.sync.entries import BaselineEntry, nfc
from placet.sync.stored import SyncData
from placet.sync.tables import Pair

if TYPE_CHECKING:
    from placet.drive.base import Drive
    from placet.store import ProposalRecord, Store

log = logging.getLogger(__name__)


class BaselineRecorder:
    """Writes the baseline of one sync proposal's pair as its ops succeed."""

    def __init__(self, data: SyncData, pair: Pair, plan_id: int, drive: Drive) -> None:
        self.data, self.pair, self.plan_id, self.drive = data, pair, plan_id, drive
        self.recorded = 0
        self._pending: list[BaselineEntry] = []
        self._digest_rows: dict[str, list[tuple[str, int, str, str]]] = {}

    @classmethod
    def for_proposal(
        cls, store: Store, record: ProposalRecord, drive: Drive
    ) -> BaselineRecorder | None:
        """A recorder for a sync proposal; None for any other kind (or a request that
        does not parse, which the executor refuses on its own)."""
        if record.kind != "sync":
            return None
        try:
            req = parse_sync_request(record.request)
        except ValueError:
            return None
        pair = Pair(req.root.path, req.local_path, record.drive_spec, req.remote_path)
        return cls(SyncData(store), pair, req.plan_id, drive)

    def _rel(self, remote_path: str | None) -> str | None:
        folder = self.pair.remote_path
        path = remote_path or ""
        if not folder:
            return nfc(path) if path else None
        if path.startswith(folder + "/"):
            return nfc(path[len(folder) + 1 :])
        return None  # the synced folder itself (created when it was missing)

    def op_ended(
        self,
        op: Op,
        outcome: str,
        detail: Mapping[str, Any],
        *,
        remote_mtime: str | None = None,
    ) -> None:
        """Queue for `flush` the baseline entry a successful journaled `op` establishes,
        if any (never raises). `remote_mtime`: the uploaded object's mtime as the upload
        read it after its move (then it is not read again); a digest to remember is
        queued too."""
        try:
            rel = self._rel(op.remote_path)
            if outcome not in SUCCESS_OUTCOMES or rel is None:
                return
            if op.kind == "mkdir":
                b: BaselineEntry | None = BaselineEntry(rel, None)
            elif op.kind in ("upload", "upload_revision"):
                b = self._uploaded(rel, op, detail, remote_mtime)
            else:
                b = self._downloaded(rel, op, detail)
        except Exception:
            log.exception("recording the sync baseline for op %s failed; continuing", op.index)
            return
        if b is not None:
            self._pending.append(b)

    def _uploaded(
        self, rel: str, op: Op, detail: Mapping[str, Any], remote_mtime: str | None
    ) -> BaselineEntry | None:
        """The entry of an upload that ended done or already_done (None: the op carries
        no local evidence)."""
        ev = op.expected_local
        if ev is None:
            return None
        dtype, digest = detail.get("digest_type"), detail.get("digest")
        if not digest and str(detail.get("verification", "")).startswith("digest:"):
            dtype, digest = ev.digest_type, ev.digest
        mtime = None
        on_demand = self.drive.capabilities().hashes_on_demand
        if not digest or on_demand:
            # Without a digest the next plan compares size and mtime: read them back.
            # On a remote that hashes on demand, the verified digest also primes the
            # remote digest cache, so the plan after a big upload reads nothing back.
            if remote_mtime is not None:
                mtime, size = remote_mtime, op.size
            else:
                found = self.drive.stat(op.remote_path or "")
                mtime = found.mtime if found is not None else None
                size = found.size if found is not None else None
            if digest and dtype and size is not None and size == op.size and mtime:
                row = (op.remote_path or "", size, mtime, str(digest).lower())
                self._digest_rows.setdefault(str(dtype), []).append(row)
        return BaselineEntry(
            rel, ev.sha256, dtype if digest else None, digest or None, op.size, mtime
        )

    @staticmethod
    def _downloaded(rel: str, op: Op, detail: Mapping[str, Any]) -> BaselineEntry | None:
        """The entry of a download that ended done or already_done (None: its content's
        SHA-256 is not known)."""
        src = op.expected_remote
        if src is None:
            return None
        sha = detail.get("sha256") or (src.digest if src.digest_type == "sha256" else None)
        if not sha:
            return None
        return BaselineEntry(
            rel, str(sha).lower(), src.digest_type, src.digest, src.size, src.mtime
        )

    def flush(self) -> None:
        """Write the queued entries and remote digests, each kind in one transaction
        (never raises)."""
        pending, rows = self._pending, self._digest_rows
        self._pending, self._digest_rows = [], {}
        try:
            for dtype, digests in rows.items():
                self.data.put_remote_digests(self.drive.spec, dtype, digests)
            if pending:
                self.data.record_baseline(self.pair, pending)
                self.recorded += len(pending)
        except Exception:
            log.exception("recording the sync baseline of %s ops failed; continuing", len(pending))

    def ops_finished(self) -> None:
        """Write what is queued, then the plan's verified skips (never raises)."""
        self.flush()
        try:
            skips = self.data.plan_skips(self.plan_id)
            if skips:
                self.data.record_baseline(self.pair, skips)
                self.recorded += len(skips)
        except Exception:
            log.exception("recording the verified skips of plan %s failed", self.plan_id)
