"""Sync: the local indexer and the pure planner (docs/design.md section 7).

`index_local` walks a folder (a `LocalTree`) whole and digests its files (cached);
`plan` classifies two listings against the last synced baseline into a `SyncPlan`;
`to_request_ops` turns a plan plus the agent's conflict decisions into the executor's
`Op`s. Only the indexer does I/O.
"""

from placet.sync.cache import CachedDigest, DigestCache, MemoryDigestCache
from placet.sync.digests import choose_digest_type, compare, hash_fd
from placet.sync.entries import (
    BaselineEntry,
    CapabilityFlags,
    LocalEntry,
    PlanCapabilities,
    RemoteEntry,
)
from placet.sync.index_file import IndexResult
from placet.sync.indexer import index_local
from placet.sync.local_tree import LocalTree
from placet.sync.model import (
    ALLOWED_DECISIONS,
    DEFAULT_ENTRY_CAP,
    EmptySideRefused,
    PlanOp,
    PlanReport,
    SyncPlan,
)
from placet.sync.ops import (
    baseline_for,
    check_decisions,
    remote_entries_from_drive,
    to_request_ops,
)
from placet.sync.planner import plan

__all__ = [
    "ALLOWED_DECISIONS",
    "DEFAULT_ENTRY_CAP",
    "BaselineEntry",
    "CachedDigest",
    "CapabilityFlags",
    "DigestCache",
    "EmptySideRefused",
    "IndexResult",
    "LocalEntry",
    "LocalTree",
    "MemoryDigestCache",
    "PlanCapabilities",
    "PlanOp",
    "PlanReport",
    "RemoteEntry",
    "SyncPlan",
    "baseline_for",
    "check_decisions",
    "choose_digest_type",
    "compare",
    "hash_fd",
    "index_local",
    "plan",
    "remote_entries_from_drive",
    "to_request_ops",
]
