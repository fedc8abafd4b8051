"""The `Proposals` part of the store: reading proposals, their ops and op results.

A read is one deferred transaction (`Database.read`), returning typed rows
(`placet.store.models`). A sync proposal's ops are read here only, whichever way they are
stored (inline, or by reference as `proposal_op` rows bound by the request's
`ops_digest`, docs/decisions/0023-ops-by-reference.md): `ops` for display, `checked_ops`
and `checked_parsed` verified against the request the caller holds, streamed a page at
a time so a 100,000-op sync is never held whole.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, cast, func, or_, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Row

from placet.errors import PolicyRefused
from placet.schema import is_by_reference
from placet.store import lifecycle as lc
from placet.store.base import Database, P, proposal_of_row
from placet.store.db import qmark, raw
from placet.store.models import AUDIT_EVENT, OP_RESULT, PROPOSAL, OpResultRecord, ProposalRecord

T = TypeVar("T")

NO_LIMIT = 2**62
"""A LIMIT that limits nothing (SQLite has no OFFSET without LIMIT; PostgreSQL no -1)."""

OPS_PAGE = 1000
"""Ops read per store read when streaming a sync proposal's ops (`Store.iter_ops`)."""

_OPS_SQL = "SELECT op FROM proposal_op WHERE proposal_id = ? ORDER BY op_index LIMIT ? OFFSET ?"
_OP_PAGE_SQL = (
    "SELECT op_index, op FROM proposal_op WHERE proposal_id = ? AND op_index > ? "
    "ORDER BY op_index LIMIT ?"
)


def _altered(pid: int, what: str, details: dict[str, Any]) -> PolicyRefused:
    return PolicyRefused(
        f"refusing to use proposal {pid}: {what}; its ops were altered in the database: discard it",
        code="request_altered",
        details={"proposal_id": pid, **details},
    )


def _same(op: dict[str, Any]) -> dict[str, Any]:
    return op


def _op_json(pid: int, text: str) -> dict[str, Any]:
    """One stored op row as its JSON object. Raises PolicyRefused (``request_altered``)."""
    try:
        op = json.loads(text)
    except ValueError:
        op = None
    if not isinstance(op, dict):
        raise _altered(pid, "an op row is not a JSON object", {"row": text[:80]})
    return op


class Proposals:
    """Reading proposals, their ops and their op results (a part of `Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, proposal_id: int) -> ProposalRecord:
        """The proposal with this id. Raises NotFound."""
        return proposal_of_row(
            self.db.read("reading a proposal", lambda c: self.db.row(c, proposal_id))
        )

    def list(
        self,
        statuses: Collection[str] | None = None,
        *,
        run_id: str | None = None,
        limit: int = 100,
        after_id: int | None = None,
        newest_first: bool = False,
    ) -> list[ProposalRecord]:
        """Proposals by id (ascending, or descending with newest_first), at most `limit`.

        `after_id` pages: the next page starts after that id in the chosen order.
        """
        q = select(PROPOSAL)
        if statuses is not None:
            q = q.where(P.status.in_(list(statuses)))
        if run_id is not None:
            q = q.where(P.run_id == run_id)
        if after_id is not None:
            q = q.where(P.id < after_id if newest_first else P.id > after_id)
        q = q.order_by(P.id.desc() if newest_first else P.id).limit(limit)
        rows = self.db.read("listing proposals", lambda c: c.execute(q).all())
        return [ProposalRecord.stored(r._mapping) for r in rows]

    def approved_here(self, *, limit: int = 100) -> builtins.list[int]:
        """Ids of the approved proposals this host runs (its own, and any made before host
        ids were recorded), oldest first, at most `limit` (`placet.store.host`)."""
        q = (
            select(P.id)
            .where(P.status == "approved", or_(P.host_id == self.db.host_id, P.host_id.is_(None)))
            .order_by(P.id)
            .limit(limit)
        )
        return [
            int(r[0])
            for r in self.db.read("listing approved proposals", lambda c: c.execute(q).all())
        ]

    def approvals_here(
        self, *, limit: int = 100
    ) -> builtins.list[tuple[int, str, dict[str, Any] | None]]:
        """`approved_here` with what a host loop decides on, in one read: each approved
        proposal's (id, drive spec, the approving process its approval recorded:
        ``detail["process"]`` of its last audit event, None before placet recorded it)."""
        A = AUDIT_EVENT.c
        E = AUDIT_EVENT.alias("latest").c
        last = (
            select(func.max(E.id)).where(E.proposal_id == P.id).correlate(PROPOSAL)
        ).scalar_subquery()
        q = (
            select(P.id, P.drive_spec, A.detail)
            .select_from(PROPOSAL.join(AUDIT_EVENT, A.id == last))
            .where(P.status == "approved", or_(P.host_id == self.db.host_id, P.host_id.is_(None)))
            .order_by(P.id)
            .limit(limit)
        )
        rows = self.db.read("listing approved proposals", lambda c: c.execute(q).all())
        out: builtins.list[tuple[int, str, dict[str, Any] | None]] = []
        for pid, spec, detail in rows:
            process = json.loads(detail).get("process") if detail else None
            out.append((int(pid), str(spec), process if isinstance(process, dict) else None))
        return out

    def counts(self) -> dict[str, int]:
        """Number of proposals per status (statuses with none are 0)."""
        q = select(P.status, func.count()).group_by(P.status)
        rows = self.db.read("counting proposals", lambda c: c.execute(q).all())
        out = dict.fromkeys(lc.STATUSES, 0)
        out.update({str(s): int(n) for s, n in rows})
        return out

    # ---- a sync proposal's ops (the one way to read them) ---------------------------

    def _request(self, conn: Connection, pid: int) -> tuple[str, dict[str, Any]]:
        # Through SQLAlchemy, so the read transaction (one snapshot) begins here and the
        # op rows read next on the same driver connection belong to it.
        found = conn.exec_driver_sql(
            qmark(conn, "SELECT kind, request FROM proposal WHERE id = ?"), (pid,)
        ).fetchone()
        if found is None:
            self.db.row(conn, pid)  # raises NotFound
            raise AssertionError("unreachable")  # pragma: no cover
        return str(found[0]), json.loads(found[1])

    def op_count(self, pid: int) -> int:
        """How many ops the sync proposal `pid` holds, whichever way they are stored
        (docs/decisions/0023-ops-by-reference.md); 0 for the
        other kinds, whose one op `placet.executor.plan_for` derives from the request.

        Raises NotFound.
        """

        def rd(conn: Connection) -> int:
            kind, request = self._request(conn, pid)
            if is_by_reference(kind, request):
                return int(request.get("op_count") or 0)
            ops = request.get("ops") if kind == "sync" else None
            return len(ops) if isinstance(ops, list) else 0

        return self.db.read(f"counting the ops of proposal {pid}", rd)

    def ops(
        self, pid: int, *, start: int = 0, limit: int | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The stored ops (JSON objects, as `placet.schema.Op` dumps them) of the sync
        proposal `pid`, in index order, from position `start` (0-based: the op count
        before it) on, at most `limit` of them; [] for the other kinds. Pages: the next
        page starts at `start + len(page)` (stored ops never change). Unverified (a
        display read): the executor reads them with `checked_ops`.

        Raises NotFound; PolicyRefused (``request_altered``): a row is not a JSON object.
        """

        def rd(conn: Connection) -> builtins.list[dict[str, Any]]:
            kind, request = self._request(conn, pid)
            if is_by_reference(kind, request):
                rows = raw(conn).execute(
                    _OPS_SQL, (pid, NO_LIMIT if limit is None else limit, start)
                )
                return [_op_json(pid, t) for (t,) in rows]
            ops = request.get("ops") if kind == "sync" else None
            inline = [o for o in (ops if isinstance(ops, list) else []) if isinstance(o, dict)]
            return inline[start:] if limit is None else inline[start : start + limit]

        return self.db.read(f"reading the ops of proposal {pid}", rd)

    def iter_ops(self, pid: int, *, page: int = OPS_PAGE) -> Iterator[dict[str, Any]]:
        """Every op of `ops(pid)`, read `page` at a time (stored ops never change), so a
        100,000-op sync is streamed, never held whole. Raises NotFound."""
        start = 0
        while True:
            batch = self.ops(pid, start=start, limit=page)
            yield from batch
            if len(batch) < page:
                return
            start += len(batch)

    def checked_ops(
        self,
        pid: int,
        request: Mapping[str, Any],
        *,
        on_page: Callable[[int, int], None] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Every op of the sync proposal `pid`, verified against `request`: the request the
        caller holds and has already bound (its hash checked against the approval, or the
        one the owner is shown), never one read again here, so a row or request rewritten
        in the database after that check cannot slip in (docs/design.md section 4). By
        reference, the op rows must be exactly `request["op_count"]`, valid JSON objects
        numbered as stored, and hash to `request["ops_digest"]` (`placet.schema.ops_digest`);
        inline, the ops are the request's own, which its hash covers. What
        `placet accept` shows and the review UI reads. [] for a request with neither.
        `checked_parsed` is the same read, each op parsed as it comes (`on_page`: its
        progress; what it raises ends the read).

        Raises:
            NotFound.
            PolicyRefused (``request_altered``): the stored ops no longer match `request`.
        """
        return self.checked_parsed(pid, request, _same, on_page=on_page)

    def checked_parsed(
        self,
        pid: int,
        request: Mapping[str, Any],
        parse: Callable[[dict[str, Any]], T],
        *,
        page: int = OPS_PAGE,
        on_page: Callable[[int, int], None] | None = None,
    ) -> builtins.list[T]:
        """`checked_ops` streamed: the op rows are read `page` at a time (by index, each
        row once), hashed and handed to `parse` as they come, and only `parse`'s results
        are kept, so a 100,000-op sync is never held as rows, JSON objects and parsed ops
        at once. Nothing is returned before the last row was read and the whole sequence
        checked against `request` (the digest covers exactly the rows parsed, whichever
        read transaction each page came from). `on_page(ops read, op count)` is called
        after each page (progress for a long read). An exception from `parse` is raised
        after that check (an altered row is reported as altered, not as unparseable).

        Raises:
            NotFound.
            PolicyRefused (``request_altered``): as `checked_ops`.
        """
        if "ops_digest" not in request:
            ops = request.get("ops")
            inline = [o for o in ops if isinstance(o, dict)] if isinstance(ops, list) else []
            return [parse(o) for o in inline]
        parsed: builtins.list[T] = []
        numbered, failure = True, None
        for rows in self._op_pages(pid, request, page, on_page):
            for i, text in rows:
                op = _op_json(pid, text)
                numbered = numbered and op.get("index") == i
                if failure is None:
                    try:
                        parsed.append(parse(op))
                    except Exception as e:  # raised once the digest is known to match
                        failure, parsed = e, []
        if not numbered:
            raise _altered(pid, "its stored ops are not numbered as stored", {})
        if failure is not None:
            raise failure
        return parsed

    def check_ops(self, pid: int, request: Mapping[str, Any], *, page: int = OPS_PAGE) -> None:
        """Check that the op rows of the sync proposal `pid` still hash to `request`'s
        `ops_digest` and count `op_count`, reading and hashing them a page at a time
        without parsing any (the executor's check before it runs ops it parsed when
        they were shown: rows rewritten since are refused). Nothing to check for
        inline ops (the request's hash covers them).

        Raises:
            NotFound.
            PolicyRefused (``request_altered``): as `checked_ops`.
        """
        if "ops_digest" in request:
            for _ in self._op_pages(pid, request, page, None):
                pass

    def _op_pages(
        self,
        pid: int,
        request: Mapping[str, Any],
        page: int,
        on_page: Callable[[int, int], None] | None,
    ) -> Iterator[builtins.list[tuple[int, str]]]:
        """The op rows of `pid` as (op_index, canonical JSON), a page at a time, each row
        once (by index). After the last page, raises PolicyRefused (``request_altered``)
        unless the rows hash to `request["ops_digest"]` (what `placet.schema.ops_digest`
        computes) and number `request["op_count"]`: a caller keeps what it made of
        the pages only when the iteration ends without raising."""
        bound, count = str(request["ops_digest"]), request.get("op_count")
        total = count if isinstance(count, int) else 0
        digest = hashlib.sha256()
        seen, after = 0, None
        while True:

            def rd(conn: Connection, after: int | None = after) -> builtins.list[tuple[int, str]]:
                if after is None:
                    self.db.row(conn, pid)  # raises NotFound
                args = (pid, -1 if after is None else after, page)
                return [(int(i), str(t)) for i, t in raw(conn).execute(_OP_PAGE_SQL, args)]

            rows = self.db.read(f"reading the ops of proposal {pid}", rd)
            for _, text in rows:
                digest.update(text.encode("utf-8"))
                digest.update(b"\n")
            seen += len(rows)
            yield rows
            if on_page is not None:
                on_page(seen, total)
            if len(rows) < page:
                break
            after = rows[-1][0]
        now = digest.hexdigest()
        if now != bound or seen != count:
            raise _altered(
                pid,
                f"its {seen} stored ops hash to {now[:16]}..., not to the {bound[:16]}... "
                "its request binds",
                {"stored": bound, "now": now},
            )

    def _detail_has(self, key: str) -> ColumnElement[bool]:
        """An op result's `detail` holds `key` with a non-null value: SQLite's
        `json_extract`, PostgreSQL's `->>` on the text cast to jsonb (it has no
        `json_extract`). `key` is a plain name (checked by the caller)."""
        if self.db.postgres:
            return cast(OP_RESULT.c.detail, JSONB).op("->>")(key).isnot(None)
        return func.json_extract(OP_RESULT.c.detail, f"$.{key}").isnot(None)

    def op_results(
        self,
        pid: int,
        *,
        start: int = 0,
        stop: int | None = None,
        having: str | None = None,
        outcomes: Collection[str] | None = None,
    ) -> builtins.list[OpResultRecord]:
        """The journal of the proposal's latest attempt, by op index; only ops with
        `start <= op_index < stop` when given (one page of ops), only results whose
        detail has the key `having` (e.g. ``"temps"``: the few a crashed run left, not
        the whole journal of a 100,000-op sync), only results with an outcome in
        `outcomes`. Raises NotFound; ValueError: `having` is not a plain name."""
        if having is not None and not having.isidentifier():
            raise ValueError(f"not a detail key: {having!r}")

        def rd(conn: Connection) -> builtins.list[Row[Any]]:
            cur = self.db.row(conn, pid)
            q = select(OP_RESULT).where(
                OP_RESULT.c.proposal_id == pid, OP_RESULT.c.attempt == cur.attempt
            )
            if start:
                q = q.where(OP_RESULT.c.op_index >= start)
            if stop is not None:
                q = q.where(OP_RESULT.c.op_index < stop)
            if having is not None:
                q = q.where(self._detail_has(having))
            if outcomes is not None:
                q = q.where(OP_RESULT.c.outcome.in_(sorted(outcomes)))
            return list(conn.execute(q.order_by(OP_RESULT.c.op_index)).all())

        rows = self.db.read(f"reading op results of proposal {pid}", rd)
        return [OpResultRecord.stored(r._mapping) for r in rows]

    def outcome_counts(self, pid: int) -> dict[str, int]:
        """How many ops of the proposal's latest attempt ended with each outcome (its
        journal counted in SQL, never read whole). Raises NotFound."""

        def rd(conn: Connection) -> dict[str, int]:
            cur = self.db.row(conn, pid)
            R = OP_RESULT.c
            q = (
                select(R.outcome, func.count())
                .where(R.proposal_id == pid, R.attempt == cur.attempt)
                .group_by(R.outcome)
            )
            return {str(o): int(n) for o, n in conn.execute(q).all()}

        return self.db.read(f"counting op results of proposal {pid}", rd)
