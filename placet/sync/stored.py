"""Sync's accessors: stored plans, baselines and drive snapshots (the tables are
`placet.sync.tables`; `SyncData` extends `placet.sync.digest_store.DigestCaches`, so
callers keep one accessor object).

Plans (`sync_plan`) are immutable and record both fingerprints, the baseline generation
and the options, so `propose_sync(plan_id)` proposes exactly what the agent was shown;
the body holds the ops and every report but skips, zlib'd JSON tagged `PLAN_FORMAT`,
with the digest-verified skips beside it for the baseline. Plans and snapshots are
capped per session and in total and pruned past `RETENTION`
(docs/decisions/0024-sync-plans.md). Baselines (`sync_baseline`) carry a generation bumped
with every write, so an in-memory copy is used only while current. Drive snapshots
(`drive_snapshot`) are the anchors of `drive_changes`. Writes are plain SQL beside the
table models, for `bench/propose.py` and `bench/plan_memory.py`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import IO, Any, NamedTuple

from placet.errors import NotFound
from placet.store.db import RawDB, dt_text, utcnow
from placet.store.store import Store
from placet.sync.cache import FolderRows, OwnedRows, Ranges
from placet.sync.digest_store import MEMORY_ROWS, DigestCaches, gaps, in_ranges
from placet.sync.entries import BaselineEntry
from placet.sync.model import SyncPlan
from placet.sync.tables import (
    RETENTION,
    Pair,
    RowPacker,
    SkipRow,
    Snapshot,
    StoredCaps,
    StoredPlan,
    StoredRow,
    cap_victims,
    pack,
    parse_dt,
    read_sealed,
    unpack,
)

_ROWS_OF = {  # table -> (its rows as `StoredRow`s, delete one)
    "sync_plan": (
        "SELECT id, pair_key, length(body) + length(skips) + coalesce((SELECT "
        "length(s.skips) FROM sync_plan_skips s WHERE s.plan_id = sync_plan.id), 0) "
        "FROM sync_plan",
        "DELETE FROM sync_plan WHERE id = ?",
    ),
    "drive_snapshot": (
        "SELECT id, drive_spec || ? || path, length(body) FROM drive_snapshot",
        "DELETE FROM drive_snapshot WHERE id = ?",
    ),
}
_LIVE_PLANS = (
    "SELECT DISTINCT {plan_id} FROM proposal WHERE kind = 'sync' "
    "AND status IN ('pending', 'approved', 'executing')"
)
_PLAN_ID = {
    False: "json_extract(request, '$.plan_id')",
    True: "(request::jsonb ->> 'plan_id')",
}
"""A sync proposal's `plan_id` (SQLite: an integer; PostgreSQL: its text), per
`RawDB.postgres`."""
_SAME_PLAN = {
    pg: "SELECT id FROM sync_plan WHERE id = (SELECT max(id) FROM sync_plan WHERE "  # noqa: S608
    "pair_key = ?) AND options = ? AND local_fingerprint = ? AND "
    "remote_fingerprint = ? AND baseline_generation = ? AND meta = ? AND "
    "created_at > ? AND NOT EXISTS (SELECT 1 FROM proposal WHERE kind = 'sync' "
    f"AND status = 'succeeded' AND {_PLAN_ID[pg]} = "
    f"{'CAST(sync_plan.id AS TEXT)' if pg else 'sync_plan.id'})"
    for pg in (False, True)
}
"""The pair's newest plan when identical and never applied (`find_plan`), per backend."""
_KEY_SEP = {False: "\0", True: "\x01"}
"""Between a snapshot's drive and path in its cap key (PostgreSQL text holds no NUL)."""


def _int(value: object) -> int | None:
    """A plan id as `_PLAN_ID` reads it, or None (not an integer)."""
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


_BASELINE_ROWS = (
    "SELECT path, sha256, remote_digest_type, remote_digest, size, mtime FROM sync_baseline "
    "WHERE pair_key = ?"
)

_INSERT_PLAN = (
    "INSERT INTO sync_plan (pair_key, root_name, root_path, local_path, drive_spec, "
    "remote_path, options, local_fingerprint, remote_fingerprint, baseline_generation, "
    "summary, meta, body, skips, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
"""A new plan row (its skips in `sync_plan_skips`: `skips` here is empty)."""


def _packed(rows: Iterable[SkipRow]) -> RowPacker:
    packer = RowPacker()
    for row in rows:
        packer.add(row)
    return packer


def _store_skips(db: RawDB, plan_id: int, spool: IO[bytes], size: int) -> None:
    """Store plan `plan_id`'s packed skips (`size` bytes of `spool`): on SQLite reserved
    (`zeroblob`, the row's last column, so never built in memory) and copied a MiB at a
    time; on PostgreSQL sent whole."""
    # A row left by a plan deleted otherwise than by the prune or the caps: its id may
    # come again (SQLite numbers rows from the largest id there).
    db.execute("DELETE FROM sync_plan_skips WHERE plan_id = ?", (plan_id,))
    if db.postgres:
        blob = read_sealed(spool, size)
        db.execute("INSERT INTO sync_plan_skips (plan_id, skips) VALUES (?, ?)", (plan_id, blob))
        return
    db.execute(
        "INSERT INTO sync_plan_skips (plan_id, skips) VALUES (?, zeroblob(?))", (plan_id, size)
    )
    spool.seek(0)
    with db.driver.blobopen("sync_plan_skips", "skips", plan_id) as out:
        while chunk := spool.read(1 << 20):
            out.write(chunk)


REUSE_WITHIN = timedelta(hours=1)
"""A new plan identical to one stored this recently reuses its id instead of a new row."""


class PlanStanding(NamedTuple):
    """`SyncData.plan_standing`: the plan's drive and creation time, the id of a newer
    plan of its pair (or None), and a proposal made from it that succeeded or is approved
    or executing (or None)."""

    drive_spec: str
    created_at: datetime
    newer_plan_id: int | None
    proposal_id: int | None
    proposal_status: str | None


def _baseline_row(b: BaselineEntry) -> list[Any]:
    return [b.path, b.sha256, b.remote_digest_type, b.remote_digest, b.size, b.mtime]


class SyncData(DigestCaches):
    """Accessors for sync's tables over an open `Store` (thread-safe; one per process):
    plans, baselines and snapshots here, the digest caches from `DigestCaches`.

    Raises `StoreError` (retryable when the database stayed locked) from any method.
    """

    def __init__(self, store: Store, *, memory_rows: int = MEMORY_ROWS) -> None:
        super().__init__(store, memory_rows=memory_rows)
        self._baselines: dict[str, tuple[int, dict[str, BaselineEntry]]] = {}
        self._mine: dict[str, list[int]] = {"sync_plan": [], "drive_snapshot": []}

    # ---- caps -----------------------------------------------------------------------

    @property
    def caps(self) -> StoredCaps:
        """The caps on stored plans and on stored snapshots (from the store's settings)."""
        s = self.store.settings
        return StoredCaps(
            s.stored_per_session, s.stored_bytes_per_session, s.stored_total, s.stored_bytes_total
        )

    def _enforce_caps(self, db: RawDB, table: str, new_id: int) -> None:
        """Delete rows of `table` ("sync_plan" or "drive_snapshot") beyond the caps, in
        the caller's transaction, after it stored `new_id` (module docstring)."""
        caps = self.caps
        select, delete = _ROWS_OF[table]
        args = (_KEY_SEP[db.postgres],) if "?" in select else ()
        rows: list[StoredRow] = [(int(i), str(k), int(n)) for i, k, n in db.execute(select, args)]
        with self._lock:
            mine = {*self._mine[table], new_id}
        own = [r for r in rows if r[0] in mine]

        def over(rs: list[StoredRow], count: int, size: int) -> bool:
            return len(rs) > count or sum(r[2] for r in rs) > size

        over_own = over(own, caps.per_session, caps.bytes_per_session)
        if not over_own and not over(rows, caps.total, caps.bytes_total):
            with self._lock:
                self._mine[table] = [r[0] for r in own]
            return
        keep = {new_id}
        if table == "sync_plan":
            live = db.execute(_LIVE_PLANS.format(plan_id=_PLAN_ID[db.postgres]))
            keep |= {i for (v,) in live if (i := _int(v)) is not None}
        frozen = frozenset(keep)
        gone: set[int] = set()
        if over_own:
            gone.update(cap_victims(own, caps.per_session, caps.bytes_per_session, frozen))
        rest = [r for r in rows if r[0] not in gone]
        gone.update(cap_victims(rest, caps.total, caps.bytes_total, frozen))
        db.executemany(delete, [(i,) for i in sorted(gone)])
        if table == "sync_plan":
            db.executemany("DELETE FROM sync_plan_skips WHERE plan_id = ?", [(i,) for i in gone])
        with self._lock:
            self._mine[table] = [r[0] for r in own if r[0] not in gone]

    # ---- plans ----------------------------------------------------------------------

    def find_plan(
        self,
        *,
        pair: Pair,
        options: Mapping[str, Any],
        fingerprints: tuple[str, str],
        baseline_generation: int,
        meta: Mapping[str, Any],
        now: datetime | None = None,
    ) -> StoredPlan | None:
        """The pair's newest plan, marked `reused`, if it is identical (same options,
        (local, remote) listing fingerprints, baseline generation and meta), was stored
        within `REUSE_WITHIN` and no proposal made from it succeeded; else None.

        The planner is a pure function, so the same inputs give the same plan: handing
        out the stored one saves storing 100,000 paths again on every warm re-plan. Only
        the newest plan of the pair is handed out again, because `propose_sync` refuses
        a plan once a newer one of its pair exists or once it was applied
        (`plan_standing`); reusing an older or applied plan would refuse it forever.
        """
        now = utcnow() if now is None else now
        opts, meta_text = json.dumps(dict(options), sort_keys=True), json.dumps(dict(meta))
        found = self._read(
            "looking for an identical sync plan",
            lambda db: db.execute(
                _SAME_PLAN[db.postgres],
                (pair.key, opts, *fingerprints, baseline_generation, meta_text,
                 dt_text(now - REUSE_WITHIN)),
            ).fetchone(),
        )  # fmt: skip
        if found is None:
            return None
        stored = self.load_plan(int(found[0]))
        return StoredPlan(**{**stored.__dict__, "reused": True})

    def save_plan(
        self,
        *,
        pair: Pair,
        root_name: str,
        options: Mapping[str, Any],
        plan: SyncPlan,
        baseline_generation: int,
        meta: Mapping[str, Any],
        skips: Iterable[SkipRow] | RowPacker,
        now: datetime | None = None,
    ) -> StoredPlan:
        """Store `plan` as a new immutable row (callers try `find_plan` first).

        `skips`: baseline rows to record if the plan is applied (skips verified by
        digest whose baseline would change); an iterator is packed as it goes, a
        `RowPacker` is finished (its rows packed while the plan was classified). Prunes
        plans and snapshots past `RETENTION`, and plans beyond the caps (module
        docstring), in the same transaction.
        """
        now = utcnow() if now is None else now
        opts, meta_text = json.dumps(dict(options), sort_keys=True), json.dumps(dict(meta))
        kept = SyncPlan(
            plan.ops,
            tuple(r for r in plan.reports if r.kind != "skip"),
            plan.summary,
            plan.local_fingerprint,
            plan.remote_fingerprint,
            plan.content,
        )
        if isinstance(skips, RowPacker):
            spool, size = skips.seal()
        else:  # packed here, into the same kind of file
            spool, size = _packed(skips).seal()
        body = pack(kept.to_dict())
        summary = json.dumps(dict(plan.summary))

        def tx(db: RawDB) -> int:
            cur = db.execute(
                _INSERT_PLAN,
                (pair.key, root_name, pair.root_path, pair.local_path, pair.drive_spec,
                 pair.remote_path, opts, plan.local_fingerprint, plan.remote_fingerprint,
                 baseline_generation, summary, meta_text, body, b"", dt_text(now)),
            )  # fmt: skip
            new_id = int(cur.fetchone()[0])
            self._prune(db, now)  # after the insert: the new row holds the largest id
            _store_skips(db, new_id, spool, size)
            self._enforce_caps(db, "sync_plan", new_id)
            return new_id

        try:
            pid = self._write("storing a sync plan", tx)
        finally:
            spool.close()
        return StoredPlan(
            pid, pair, root_name, dict(options), plan.local_fingerprint,
            plan.remote_fingerprint, baseline_generation, dict(plan.summary), dict(meta),
            datetime.fromisoformat(dt_text(now)).replace(tzinfo=UTC), kept,
        )  # fmt: skip

    def load_plan(self, plan_id: int) -> StoredPlan:
        """The stored plan `plan_id`.

        Raises:
            NotFound: no such plan (never made, or pruned after `RETENTION`).
        """
        row = self._read(
            "reading a sync plan",
            lambda db: db.execute(
                "SELECT id, root_path, local_path, drive_spec, remote_path, root_name, options, "
                "local_fingerprint, remote_fingerprint, baseline_generation, summary, meta, "
                "created_at, body FROM sync_plan WHERE id = ?",
                (plan_id,),
            ).fetchone(),
        )
        if row is None:
            raise NotFound(
                f"sync plan {plan_id} does not exist (plans are kept {RETENTION.days} days); "
                "call sync_plan again for a fresh plan",
                details={"plan_id": plan_id},
            )
        return StoredPlan(
            int(row[0]), Pair(row[1], row[2], row[3], row[4]), row[5], json.loads(row[6]),
            row[7], row[8], int(row[9]), json.loads(row[10]), json.loads(row[11]),
            parse_dt(row[12]), SyncPlan.from_dict(unpack(row[13])),
        )  # fmt: skip

    def plan_standing(self, plan_id: int) -> PlanStanding | None:
        """What overtook stored plan `plan_id` (None: no such plan): the newest plan of
        the same pair (any options) stored after it, and the newest proposal made from it
        that succeeded or is approved or executing. `propose_sync` refuses
        such a plan (docs/decisions/0024-sync-plans.md).
        """

        def rd(db: RawDB) -> PlanStanding | None:
            row = db.execute(
                "SELECT p.drive_spec, p.created_at, (SELECT max(n.id) FROM sync_plan n "
                "WHERE n.pair_key = p.pair_key AND n.id > p.id) FROM sync_plan p WHERE p.id = ?",
                (plan_id,),
            ).fetchone()
            if row is None:
                return None
            used = db.execute(
                "SELECT id, status FROM proposal WHERE kind = 'sync' AND status IN "  # noqa: S608
                f"('succeeded', 'approved', 'executing') AND {_PLAN_ID[db.postgres]} = ? "
                "ORDER BY id DESC LIMIT 1",
                (str(plan_id) if db.postgres else plan_id,),
            ).fetchone()
            return PlanStanding(row[0], parse_dt(row[1]), row[2], *(used or (None, None)))

        return self._read("reading what overtook a sync plan", rd)

    def plan_skips(self, plan_id: int) -> list[BaselineEntry]:
        """The baseline entries plan `plan_id` records when applied ([] if pruned)."""
        row = self._read(
            "reading a sync plan's verified skips",
            lambda db: db.execute(
                "SELECT coalesce((SELECT s.skips FROM sync_plan_skips s WHERE s.plan_id = ?), "
                "skips) FROM sync_plan WHERE id = ?",
                (plan_id, plan_id),
            ).fetchone(),
        )
        return [] if row is None else [BaselineEntry(*r) for r in unpack(row[0])]

    @staticmethod
    def _prune(db: RawDB, now: datetime) -> None:
        # The newest row stays: SQLite numbers a new row after the largest id left, and a
        # pruned id given again would name another plan (listing) to what still holds it.
        cutoff = dt_text(now - RETENTION)
        for table in ("sync_plan", "drive_snapshot"):
            db.execute(
                f"DELETE FROM {table} WHERE created_at < ? "  # noqa: S608  (two names)
                f"AND id < (SELECT max(id) FROM {table})",
                (cutoff,),
            )
        db.execute("DELETE FROM sync_plan_skips WHERE plan_id NOT IN (SELECT id FROM sync_plan)")

    def prune(self, now: datetime | None = None) -> None:
        """Delete plans and snapshots older than `RETENTION`."""
        now = utcnow() if now is None else now
        self._write("pruning old sync plans and snapshots", lambda db: self._prune(db, now))

    # ---- baselines ------------------------------------------------------------------

    def baseline(self, pair: Pair) -> tuple[dict[str, BaselineEntry], int]:
        """The pair's baseline (NFC path -> entry) and its generation (0: none yet)."""
        key = pair.key

        def gen(db: RawDB) -> int:
            row = db.execute(
                "SELECT generation FROM sync_pair WHERE pair_key = ?", (key,)
            ).fetchone()
            return int(row[0]) if row else 0

        generation = self._read("reading a sync baseline's generation", gen)
        with self._lock:
            cached = self._baselines.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1], generation

        def rd(db: RawDB) -> tuple[int, list[Any]]:
            db.begin(write=False)  # one snapshot for the generation and its rows
            try:
                g = gen(db)
                rows = db.execute(
                    "SELECT path, sha256, remote_digest_type, remote_digest, size, mtime "
                    "FROM sync_baseline WHERE pair_key = ?",
                    (key,),
                ).fetchall()
            finally:
                db.commit()
            return g, rows

        generation, rows = self._read("reading a sync baseline", rd)
        entries = {r[0]: BaselineEntry(*r) for r in rows}
        if len(entries) <= self.memory_rows:  # kept for the next plan, as the digest caches
            with self._lock:
                self._baselines[key] = (generation, entries)
        return entries, generation

    def baseline_count(self, pair: Pair) -> tuple[int, int]:
        """(the number of the pair's baseline entries, its generation)."""
        key = pair.key

        def rd(db: RawDB) -> tuple[int, int]:
            db.begin(write=False)
            try:
                row = db.execute(
                    "SELECT generation FROM sync_pair WHERE pair_key = ?", (key,)
                ).fetchone()
                n = db.execute(
                    "SELECT count(*) FROM sync_baseline WHERE pair_key = ?", (key,)
                ).fetchone()
            finally:
                db.commit()
            return int(n[0]), int(row[0]) if row else 0

        return self._read("counting a sync baseline", rd)

    def baseline_folders(self, pair: Pair) -> FolderRows[BaselineEntry]:
        """The pair's baseline a folder at a time (`FolderRows`: NFC path -> entry),
        for a plan too big to hold it (`baseline` keeps it in memory)."""
        key = pair.key

        def read(db: RawDB, ranges: Ranges) -> OwnedRows[BaselineEntry]:
            return OwnedRows(
                (r[0], BaselineEntry(*r)) for r in in_ranges(db, _BASELINE_ROWS, (key,), ranges)
            )

        return FolderRows(
            lambda ranges: self._read("reading a sync baseline", lambda db: read(db, ranges)),
            gaps,
        )

    def record_baseline(
        self, pair: Pair, entries: Sequence[BaselineEntry], now: datetime | None = None
    ) -> int:
        """Upsert baseline entries of `pair` and bump its generation; returns it."""
        if not entries:
            return self.baseline(pair)[1]
        now_text = dt_text(utcnow() if now is None else now)
        key = pair.key

        def tx(db: RawDB) -> int:
            db.execute(
                "INSERT INTO sync_pair (pair_key, root_path, local_path, drive_spec, "
                "remote_path, generation, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?) "
                "ON CONFLICT (pair_key) DO UPDATE SET generation = sync_pair.generation + 1, "
                "updated_at = excluded.updated_at",
                (key, pair.root_path, pair.local_path, pair.drive_spec, pair.remote_path,
                 now_text),
            )  # fmt: skip
            db.executemany(
                "INSERT INTO sync_baseline (pair_key, path, sha256, "
                "remote_digest_type, remote_digest, size, mtime, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pair_key, path) DO UPDATE SET "
                "sha256 = excluded.sha256, remote_digest_type = excluded.remote_digest_type, "
                "remote_digest = excluded.remote_digest, size = excluded.size, "
                "mtime = excluded.mtime, updated_at = excluded.updated_at",
                [(key, *_baseline_row(b), now_text) for b in entries],
            )
            row = db.execute(
                "SELECT generation FROM sync_pair WHERE pair_key = ?", (key,)
            ).fetchone()
            return int(row[0])

        return self._write("recording a sync baseline", tx)

    # ---- drive snapshots ------------------------------------------------------------

    def save_snapshot(
        self,
        drive_spec: str,
        path: str,
        entries: Mapping[str, list[Any]],
        now: datetime | None = None,
    ) -> Snapshot:
        """Store a listing of `path` (see `Snapshot`); prunes old plans and snapshots, and
        snapshots beyond the caps (module docstring), in the same transaction."""
        now = utcnow() if now is None else now
        body = pack(entries)

        def tx(db: RawDB) -> int:
            cur = db.execute(
                "INSERT INTO drive_snapshot (drive_spec, path, entry_count, body, created_at) "
                "VALUES (?, ?, ?, ?, ?) RETURNING id",
                (drive_spec, path, len(entries), body, dt_text(now)),
            )
            new_id = int(cur.fetchone()[0])
            self._prune(db, now)  # after the insert: the new row holds the largest id
            self._enforce_caps(db, "drive_snapshot", new_id)
            return new_id

        sid = self._write("storing a drive snapshot", tx)
        return Snapshot(sid, drive_spec, path, parse_dt(dt_text(now)), dict(entries))

    def load_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """The stored snapshot, or None (never made, or pruned after `RETENTION`)."""
        row = self._read(
            "reading a drive snapshot",
            lambda db: db.execute(
                "SELECT id, drive_spec, path, created_at, body FROM drive_snapshot WHERE id = ?",
                (snapshot_id,),
            ).fetchone(),
        )
        if row is None:
            return None
        return Snapshot(int(row[0]), row[1], row[2], parse_dt(row[3]), unpack(row[4]))


__all__ = [
    "REUSE_WITHIN",
    "PlanStanding",
    "SyncData",
]
