"""The validated request of each proposal kind, the evidence it saw, and its ops.

A proposal stores `request` and `evidence` as canonical JSON (these models dumped with
`model_dump(mode="json")`); the request hash that the owner's confirmation shows and the
approval audit event binds to is `request_hash(kind, request, evidence)`. The executor
turns a stored request into a list of `Op`s (`ops_for`) and re-checks each op's
evidence before it touches anything (docs/design.md section 4).

Paths: `local_path` is POSIX, relative to the root named by `root` ("" is the root
itself); `remote_*` paths are POSIX, relative to the drive root ("" is the drive root).
Sizes are bytes; `mtime_ns` is nanoseconds since the epoch; digests are lower-case hex.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

DigestType = Literal["sha256", "sha1", "md5"]

DIGEST_PREFERENCE: tuple[DigestType, ...] = ("sha256", "sha1", "md5")
"""The digest types placet can compute with hashlib, strongest first: evidence and a
plan's comparisons use the first one both sides have (docs/design.md section 9)."""
OpKind = Literal["mkdir", "upload", "upload_revision", "download"]
ProposalKind = Literal["upload", "mkdir", "download", "sync"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RootRef(_Frozen):
    """A local root as the owner nominated it; the executor refuses if device/inode changed."""

    name: str
    path: str  # absolute, resolved
    device: int
    inode: int


class LocalFileEvidence(_Frozen):
    """A local regular file as placet read it: size, mtime and digests of the exact bytes."""

    size: int
    mtime_ns: int
    sha256: str
    digest_type: DigestType | None = None  # the remote's native type, computed locally
    digest: str | None = None


class RemoteEvidence(_Frozen):
    """A remote path as the drive reported it. `exists=False` means absent."""

    exists: bool
    is_dir: bool = False
    size: int | None = None
    mtime: str | None = None  # RFC 3339 as rclone reports it
    digest_type: DigestType | None = None
    digest: str | None = None  # None: the remote offers no digest for it (compare by size)
    read_by_placet: bool = False
    """True: the remote offers no digest of its own (crypt, many WebDAV servers), so
    `digest` is the SHA-256 of the bytes placet read at proposal time, and the executor
    compares the bytes it reads with it (size and mtime can be restored). Left out of the JSON when
    False, so evidence recorded before it existed hashes as it did."""

    @model_serializer(mode="wrap")
    def _omit_unread(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("read_by_placet") is False:
            del data["read_by_placet"]
        return data


def join_remote(parent: str, name: str) -> str:
    """Join a drive-relative parent and a name; "" is the drive root."""
    return f"{parent}/{name}" if parent else name


class UploadRequest(_Frozen):
    kind: Literal["upload"] = "upload"
    root: RootRef
    local_path: str
    remote_parent: str
    name: str
    replace_existing: bool = False

    @property
    def remote_path(self) -> str:
        return join_remote(self.remote_parent, self.name)


class _ParentsEvidence(_Frozen):
    """Evidence of a kind that creates missing remote parents on the way (upload, mkdir).

    `missing_parents`: the drive-relative folders above the target that did not exist
    when proposed, outermost first (`("a", "a/b")`); `()` when every one existed; None
    when placet did not check (proposals made before it recorded this, or a parent at
    the drive's top). None is left out of the dump, so an evidence dict stored without
    the key validates and dumps back to the same dict and the same `request_hash`.
    """

    missing_parents: tuple[str, ...] | None = None

    @model_serializer(mode="wrap")
    def _omit_unchecked(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("missing_parents", ()) is None:
            del data["missing_parents"]
        return data


class UploadEvidence(_ParentsEvidence):
    local: LocalFileEvidence
    remote: RemoteEvidence  # the target name


class MkdirRequest(_Frozen):
    kind: Literal["mkdir"] = "mkdir"
    remote_parent: str
    name: str

    @property
    def remote_path(self) -> str:
        return join_remote(self.remote_parent, self.name)


class MkdirEvidence(_ParentsEvidence):
    remote: RemoteEvidence  # the target name


class DownloadRequest(_Frozen):
    kind: Literal["download"] = "download"
    remote_path: str
    root: RootRef
    local_path: str
    overwrite: bool = False


class DownloadEvidence(_Frozen):
    remote: RemoteEvidence  # the source
    local: LocalFileEvidence | None = None  # the target, when it existed


class Op(_Frozen):
    """One unit of work the executor runs and journals (one `OpResult` row each).

    `expected_local` / `expected_remote` are what the op's source and target must still
    be at execution; a mismatch fails the op as `stale` unless the target already holds
    the approved content (`already_done`, checked first).
    """

    index: int
    kind: OpKind
    local_path: str | None = None
    remote_path: str | None = None
    size: int | None = None
    expected_local: LocalFileEvidence | None = None  # upload source / download target
    expected_remote: RemoteEvidence | None = None  # upload target / download source
    replace: bool = False  # upload_revision, or download overwrite
    reason: str = ""  # planner's reason (sync)


class _SyncRequestBase(_Frozen):
    """What a sync request says besides its ops: the plan it was made from, the pair
    (root, local folder, remote folder) and the owner's conflict decisions (path ->
    decision)."""

    kind: Literal["sync"] = "sync"
    plan_id: int
    root: RootRef
    local_path: str
    remote_path: str
    decisions: dict[str, Literal["keep_local", "keep_remote", "skip"]] = Field(default_factory=dict)


class SyncRequest(_SyncRequestBase):
    """A sync request with its ops inline: what `propose_sync` builds, and how proposals
    made before ops were stored by reference keep them
    (docs/decisions/0023-ops-by-reference.md). `Store.create_proposal` stores a new one as
    a `StoredSyncRequest` plus one `proposal_op` row per op."""

    ops: list[Op]


class OpTally(_Frozen):
    """Ops of one kind in a sync: how many, and the bytes their `size`s add up to."""

    count: int
    bytes: int


class StoredSyncRequest(_SyncRequestBase):
    """A sync request as stored, its ops by reference: the ops live in `proposal_op`
    rows (read through `Store.ops`), and `ops_digest` (`ops_digest`, over their
    canonical JSON in index order) binds every one of them into the request hash.
    `op_kinds`: kind -> `OpTally`; `op_count`: the number of ops."""

    op_count: int
    op_kinds: dict[str, OpTally]
    ops_digest: str


def ops_digest(op_texts: Iterable[str]) -> str:
    """SHA-256 hex over the ops' canonical JSON texts in index order, each followed by a
    newline (canonical JSON never holds a raw newline, so the framing is unambiguous)."""
    h = hashlib.sha256()
    for text in op_texts:
        h.update(text.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def by_reference(
    request: dict[str, Any],
) -> tuple[dict[str, Any], list[tuple[int, str]]] | None:
    """Split an inline sync request into its stored form and its ops' canonical JSON.

    Returns:
        (the `StoredSyncRequest` dict, (index, canonical JSON text) per op in index order),
        or None when `request` is not an inline sync request whose ops are a list of
        objects with strictly ascending integer `index`es (such a request is stored as
        given, inline; the executor refuses it as it always did).
    """
    ops = request.get("ops")
    if request.get("kind") != "sync" or not isinstance(ops, list):
        return None
    last = -1
    kinds: dict[str, list[int]] = {}
    for op in ops:
        index = op.get("index") if isinstance(op, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index <= last:
            return None
        last = index
        size = op.get("size")
        tally = kinds.setdefault(str(op.get("kind")), [0, 0])
        tally[0] += 1
        if isinstance(size, int) and not isinstance(size, bool):
            tally[1] += size
    rows = [(op["index"], canonical_json(op)) for op in ops]
    stored = {k: v for k, v in request.items() if k != "ops"}
    stored["op_count"] = len(rows)
    stored["op_kinds"] = {k: {"count": c, "bytes": b} for k, (c, b) in sorted(kinds.items())}
    stored["ops_digest"] = ops_digest(text for _, text in rows)
    return stored, rows


def parse_sync_request(request: dict[str, Any]) -> SyncRequest | StoredSyncRequest:
    """A stored sync request in either form (ops inline, or by reference).

    Raises:
        pydantic.ValidationError: it parses as neither.
    """
    if "ops_digest" in request and "ops" not in request:
        return StoredSyncRequest.model_validate(request)
    return SyncRequest.model_validate(request)


def is_by_reference(kind: str, request: dict[str, Any]) -> bool:
    """Whether a stored request is a sync whose ops are stored by reference."""
    return kind == "sync" and "ops_digest" in request and "ops" not in request


AnyRequest = Annotated[
    UploadRequest | MkdirRequest | DownloadRequest | SyncRequest, Field(discriminator="kind")
]


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept (the hashing form)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_hash(kind: str, request: dict[str, Any], evidence: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of kind + request + evidence.

    This is what idempotent proposing matches on, what the owner's confirmation shows,
    and what the approval audit event binds; the executor refuses a request that no
    longer hashes to it.
    """
    body = canonical_json({"kind": kind, "request": request, "evidence": evidence})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
