"""From a stored request to the ordered list of `Op`s the executor runs.

Every proposal kind runs through the same per-op path (docs/design.md section 4), so a single
upload, mkdir or download is expanded here into a one-op list with the evidence it saw,
and a sync proposal's stored ops are used as they are: folders first (parents before
children, so a later upload finds its folder), then the file transfers in the order the
planner gave. Parsing goes through the `placet.schema` models with `extra="forbid"`: a
stored request that no longer parses is refused before anything is touched.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from placet.errors import NotFound, PlacetError
from placet.schema import (
    AnyRequest,
    DownloadEvidence,
    DownloadRequest,
    MkdirEvidence,
    MkdirRequest,
    Op,
    RootRef,
    StoredSyncRequest,
    SyncRequest,
    UploadEvidence,
    UploadRequest,
    is_by_reference,
    parse_sync_request,
    request_hash,
)

if TYPE_CHECKING:
    from placet.store import ProposalRecord, Store

_REQUEST: TypeAdapter[Any] = TypeAdapter(AnyRequest)


@dataclass(frozen=True)
class Plan:
    """What one proposal asks the executor to do.

    Attributes:
        kind: the proposal kind (upload, mkdir, download, sync).
        root: the local root the ops' local paths are relative to (None for mkdir).
        ops: in execution order (mkdir ops first); each op's `index` is its journal key.
        skip: indexes of the ops the owner unticked when accepting (a sync's approval
            `skip_ops`): journaled `skipped`, never run. Set by the executor's binding.
        request_hash: what the request and evidence the ops were read from hash to
            (`placet.schema.request_hash`), set by `load_plan`: the executor reuses a
            plan loaded for display only when it equals the approved proposal's hash.
    """

    kind: str
    root: RootRef | None
    ops: list[Op]
    skip: frozenset[int] = frozenset()
    request_hash: str = ""

    @property
    def bytes_total(self) -> int:
        """Bytes the selected transfer ops move (sizes from the evidence)."""
        return sum(
            op.size or 0 for op in self.ops if op.kind != "mkdir" and op.index not in self.skip
        )


def _transfer_op(req: UploadRequest | DownloadRequest, evidence: dict[str, Any]) -> Op:
    """The one op of an upload or a download: sized by its source's evidence (the local
    file, the remote file), bound to both sides' evidence.

    Raises:
        ValidationError: the evidence does not parse.
    """
    ev: UploadEvidence | DownloadEvidence
    size: int | None
    if isinstance(req, UploadRequest):
        ev = up = UploadEvidence.model_validate(evidence)
        op_kind = "upload_revision" if req.replace_existing else "upload"
        size, replace = up.local.size, req.replace_existing
    else:
        ev = DownloadEvidence.model_validate(evidence)
        op_kind, size, replace = "download", ev.remote.size, req.overwrite
    return Op(
        index=0,
        kind=op_kind,
        local_path=req.local_path,
        remote_path=req.remote_path,
        size=size,
        expected_local=ev.local,
        expected_remote=ev.remote,
        replace=replace,
    )


def _bad(kind: str, e: Exception) -> PlacetError:
    return PlacetError(
        f"the stored {kind} request does not parse ({e}); it was not written by this "
        "placet or was altered: discard it and ask the agent to propose again",
        code="request_invalid",
        details={"kind": kind},
    )


def load_plan(
    store: Store, record: ProposalRecord, *, on_page: Callable[[int, int], None] | None = None
) -> Plan:
    """The `Plan` of a stored proposal, its sync ops read through `Store.checked_parsed`
    (paged, verified against the request's `ops_digest`, each op parsed as it is read,
    so only the parsed ops are held): what the executor runs and what `placet accept`
    and the review UI's confirmation show. `on_page(ops read, op count)`: progress of a
    by-reference sync's read. The plan's `request_hash` is computed from the request and
    evidence its ops were read from.

    Raises:
        PolicyRefused (``request_altered``): a by-reference sync's stored ops no longer
            match its request.
        PlacetError (``request_invalid``): see `plan_for`.
        NotFound.
    """
    digest = request_hash(record.kind, record.request, record.evidence)
    if not is_by_reference(record.kind, record.request):
        plan = plan_for(record.kind, record.request, record.evidence)
        return replace(plan, request_hash=digest)
    try:
        stored = StoredSyncRequest.model_validate(record.request)
        # the request `bind` hash-checked; each op parsed as its page is read
        ops = store.checked_parsed(record.id, record.request, _Parser(), on_page=on_page)
        plan = _by_reference(stored, ops)
    except (ValidationError, ValueError) as e:
        raise _bad(record.kind, e) from e
    return replace(plan, request_hash=digest)


class _Parser:
    """`Op.model_validate` for many ops, with what equal ops repeat held once: pydantic
    keeps a set of the fields given for every model instance (three per op: the op and
    its two evidence models, about 2 KiB of a 3.6 KiB op), and a sync's ops give the
    same few combinations of fields. Each parsed model gets the one set of its
    combination: equal to its own, never changed (the models are frozen, and
    `model_copy` copies the set before it adds to it). The op's kind, reason and digest
    type strings are interned too."""

    def __init__(self) -> None:
        self._sets: dict[frozenset[str], set[str]] = {}

    def __call__(self, data: dict[str, Any]) -> Op:
        _intern(data, "kind", "reason")
        for side in ("expected_local", "expected_remote"):
            if isinstance(data.get(side), dict):
                _intern(data[side], "digest_type")
        op = Op.model_validate(data)
        for model in (op, op.expected_local, op.expected_remote):
            if model is not None:
                self._share(model)
        return op

    def _share(self, model: BaseModel) -> None:
        own = model.__pydantic_fields_set__
        shared = self._sets.setdefault(frozenset(own), own)
        if shared is not own:
            object.__setattr__(model, "__pydantic_fields_set__", shared)


def _intern(data: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if isinstance(data.get(key), str):
            data[key] = sys.intern(data[key])


def _by_reference(stored: StoredSyncRequest, ops: list[Op]) -> Plan:
    """The plan of a by-reference sync from its parsed ops. Raises ValueError."""
    if len(ops) != stored.op_count:
        raise ValueError(f"a sync of {stored.op_count} ops given {len(ops)} ops")
    return Plan("sync", stored.root, sync_order(ops))


def plan_for(
    kind: str,
    request: dict[str, Any],
    evidence: dict[str, Any],
    ops: Sequence[dict[str, Any]] | None = None,
) -> Plan:
    """Parse a stored request + evidence into a `Plan`.

    `ops`: a by-reference sync's stored ops (`Store.checked_ops`, or `Store.ops` for a
    display that does not execute); ignored for the other kinds and for a sync that
    holds its ops inline.

    Raises:
        PlacetError (code ``request_invalid``): the request or evidence does not parse,
            its kind disagrees with the proposal's, or a by-reference sync came without
            its ops (or with another number of them than its `op_count`).
    """
    try:
        if is_by_reference(kind, request):
            stored = StoredSyncRequest.model_validate(request)
            if ops is None:
                raise ValueError(f"a sync of {stored.op_count} ops given none")
            return _by_reference(stored, [Op.model_validate(o) for o in ops])
        req = _REQUEST.validate_python(request)
        if req.kind != kind:
            raise ValueError(f"request kind {req.kind!r} under a {kind!r} proposal")
        if isinstance(req, UploadRequest | DownloadRequest):
            return Plan(kind, req.root, [_transfer_op(req, evidence)])
        if isinstance(req, MkdirRequest):
            mev = MkdirEvidence.model_validate(evidence)
            op = Op(index=0, kind="mkdir", remote_path=req.remote_path, expected_remote=mev.remote)
            return Plan(kind, None, [op])
        assert isinstance(req, SyncRequest)
        return Plan(kind, req.root, sync_order(req.ops))
    except (ValidationError, ValueError) as e:
        raise _bad(kind, e) from e


def stored_ops(store: Store, record: ProposalRecord) -> Iterator[Op]:
    """Every op of `record` in stored order, parsed, for display (a sync's read from the
    store a page at a time, unverified as `Store.ops` is; the executor reads its own).

    Raises:
        PlacetError (``request_invalid``): the request or an op does not parse.
    """
    if record.kind != "sync":
        yield from plan_for(record.kind, record.request, record.evidence).ops
        return
    try:
        parse_sync_request(record.request)
    except ValidationError as e:
        raise _bad(record.kind, e) from e
    for raw in store.iter_ops(record.id):
        try:
            yield Op.model_validate(raw)
        except ValidationError as e:
            raise _bad(record.kind, e) from e


def op_at(store: Store, record: ProposalRecord, index: int) -> Op:
    """Op `index` of `record` for display (a content preview): a single op from its
    request and evidence, a by-reference sync's op read alone from the store (its
    position is its index when the ops are numbered from 0, else they are scanned).
    Unverified, as `Store.ops` is: the executor re-reads and checks every op.

    Raises:
        NotFound: no op has that index.
        PlacetError (``request_invalid``): the request or the op does not parse.
    """
    if record.kind != "sync" or not is_by_reference(record.kind, record.request):
        found = [op for op in plan_for(record.kind, record.request, record.evidence).ops
                 if op.index == index]  # fmt: skip
    else:
        page = store.ops(record.id, start=index, limit=1) if index >= 0 else []
        if not page or page[0].get("index") != index:
            page = [o for o in store.iter_ops(record.id) if o.get("index") == index][:1]
        try:
            found = [Op.model_validate(o) for o in page]
        except ValidationError as e:
            raise _bad(record.kind, e) from e
    if not found:
        raise NotFound(
            f"proposal {record.id} has no op #{index}; `placet show {record.id}` lists its ops",
            details={"proposal_id": record.id, "op_index": index},
        )
    return found[0]


def sync_order(ops: list[Op]) -> list[Op]:
    """mkdir ops first (shallow before deep), then the others in their stored order.

    Raises:
        ValueError: two ops share an index (their journal entries would collide).
    """
    indexes = [op.index for op in ops]
    if len(set(indexes)) != len(indexes):
        raise ValueError("two ops of the sync request share an index")
    mkdirs = sorted(
        (op for op in ops if op.kind == "mkdir"),
        key=lambda op: ((op.remote_path or "").count("/"), op.remote_path or ""),
    )
    return mkdirs + [op for op in ops if op.kind != "mkdir"]
