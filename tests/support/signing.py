"""The challenge a passkey signs to accept a proposal as stored (what `placet web` asks
for: `placet.store.signatures.accept_fields` of the proposal, its selection and a nonce),
for tests that sign with a software authenticator."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from placet.store import ProposalRecord
from placet.store.signatures import accept_challenge, accept_fields


def fields_of(rec: ProposalRecord, skip_ops: Iterable[int] = ()) -> dict[str, Any]:
    """`accept_fields` of `rec` as stored (its host and drive), `skip_ops` unticked."""
    return accept_fields(
        proposal_id=rec.id, request_hash=rec.request_hash, skip_ops=skip_ops,
        host_id=rec.host_id, drive_spec=rec.drive_spec,
    )  # fmt: skip


def challenge_of(rec: ProposalRecord, nonce: str, skip_ops: Iterable[int] = ()) -> bytes:
    """The accept challenge of `rec` as stored, with `nonce`."""
    return accept_challenge(fields_of(rec, skip_ops), nonce)
