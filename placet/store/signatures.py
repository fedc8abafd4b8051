"""A web approval's passkey signature: what its challenge binds, and checking it again.

Every accept in `placet web` is a fresh user-verified WebAuthn assertion whose challenge
is `accept_challenge(accept_fields(...), nonce)`: SHA-256 over the canonical JSON of the
proposal id, its request hash, the unticked op indexes, the host id that runs it, the
drive spec it was made against, and a one-time nonce (docs/design.md section 12), so a
proposal moved to another host or drive by an edit of the shared database is no longer
the one signed. The approval's audit event keeps the assertion (`detail["passkey"]`), so
`check_signed_approval` can check it again against the stored public key, for `placet
audit --verify` and for the executor in signed mode. An approval signed before host and
drive were bound (`LEGACY_PURPOSE`) is told apart: the audit accepts it, the executor
refuses it. Several proposals accepted with one assertion sign `set_challenge` of
their list instead (`check_signed_set`). Core module: py_webauthn only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from placet.schema import canonical_json
from placet.text import inert

__all__ = [
    "ASSERTION_FIELDS",
    "LEGACY_SIGNED",
    "accept_challenge",
    "accept_fields",
    "check_signed_approval",
    "check_signed_rules",
    "check_signed_set",
    "rules_challenge",
    "set_challenge",
    "set_entry",
    "signature_id",
]

ASSERTION_FIELDS = (
    "credential_id",
    "authenticator_data",
    "client_data",
    "signature",
    "nonce",
    "origin",
    "rp_id",
)
"""The keys of an approval's `detail["passkey"]`."""

PURPOSE = "placet-accept/2"
"""What an accept's challenge says it is for (with the host and the drive bound)."""
LEGACY_PURPOSE = "placet-accept"
"""The challenge of an older placet, which bound neither the host nor the drive."""


def accept_fields(
    *,
    proposal_id: int,
    request_hash: str,
    skip_ops: Iterable[int],
    host_id: str | None,
    drive_spec: str,
) -> dict[str, Any]:
    """What an accept's challenge binds besides its nonce: the proposal, its request
    hash, the ops left unticked (sorted), the host that runs it (its `host_id`; None for
    a proposal made before host ids were recorded) and the drive it was made against.
    The one place these fields are built: a signature approves exactly them."""
    return {
        "purpose": PURPOSE,
        "proposal_id": proposal_id,
        "request_hash": request_hash,
        "skip_ops": sorted(int(i) for i in skip_ops),
        "host_id": host_id,
        "drive_spec": drive_spec,
    }


def _legacy_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` as an older placet bound them: no host, no drive."""
    keep = ("proposal_id", "request_hash", "skip_ops")
    return {"purpose": LEGACY_PURPOSE, **{k: fields[k] for k in keep}}


def accept_challenge(fields: Mapping[str, Any], nonce: str) -> bytes:
    """The 32-byte WebAuthn challenge of an accept: SHA-256 of the canonical JSON of
    `fields` (`accept_fields`) and ``"nonce"``. A signature over it approves those
    fields only."""
    return hashlib.sha256(canonical_json({**fields, "nonce": nonce}).encode("utf-8")).digest()


def signature_id(nonce: str, proposal_id: int | None = None) -> str:
    """How a signed approval is named once spent (`placet.store.store.Store.claim`, the
    spent-signatures file): SHA-256 hex of its nonce, unique to one assertion; for an
    assertion over a set (`set_challenge`), of its nonce and `proposal_id`, since it
    approves each proposal of the set once."""
    key = nonce if proposal_id is None else f"{nonce} #{proposal_id}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


LEGACY_SIGNED = (
    "the passkey signature was made by an older placet, whose challenge binds neither the "
    "host nor the drive"
)
"""What `check_signed_approval` says of a valid signature over an older challenge."""


def check_signed_approval(
    assertion: Mapping[str, Any], public_key: bytes, fields: Mapping[str, Any]
) -> str | None:
    """Why the stored `assertion` (an approval's `detail["passkey"]`) is not a valid,
    user-verified signature by `public_key` (COSE) over `accept_challenge` of `fields`
    (`accept_fields` of the proposal as it is now), or None when it is. A valid
    signature over an older placet's challenge of the same proposal, request hash and
    selection (no host, no drive) is `LEGACY_SIGNED` exactly: the executor refuses it,
    the audit accepts it. The sign count is not checked here (it was checked when the
    approval was made). The reason is inert text (`placet.text.inert`): it may quote
    the stored client data."""
    missing = [k for k in ASSERTION_FIELDS if not isinstance(assertion.get(k), str)]
    if missing:
        return f"the stored assertion lacks {', '.join(missing)}"
    nonce = str(assertion["nonce"])
    why = _verify(assertion, public_key, accept_challenge(fields, nonce))
    if why is None:
        return None
    if _verify(assertion, public_key, accept_challenge(_legacy_fields(fields), nonce)) is None:
        return LEGACY_SIGNED
    return why


SET_PURPOSE = "placet-accept-set/1"
"""What the challenge of an accept of several proposals says it is for."""
SET_ENTRY_KEYS = ("proposal_id", "request_hash", "skip_ops", "host_id", "drive_spec")
"""What a set's challenge binds of each proposal (`placet.decisions.set_entries`)."""


def set_challenge(entries: Sequence[Mapping[str, Any]], nonce: str) -> bytes:
    """The 32-byte WebAuthn challenge of an accept of several proposals with one passkey
    assertion: SHA-256 of the canonical JSON ``{"purpose", "set", "nonce"}``, where
    ``set`` lists each proposal's id, request hash, unticked ops (sorted), host id and
    drive spec, in the order shown (the approval events' ``detail["set"]``). A signature
    over it approves exactly that list, once."""
    items = [
        {**{k: e.get(k) for k in SET_ENTRY_KEYS}, "skip_ops": sorted(e.get("skip_ops") or [])}
        for e in entries
    ]
    body = {"purpose": SET_PURPOSE, "set": items, "nonce": nonce}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).digest()


def check_signed_set(
    assertion: Mapping[str, Any], public_key: bytes, entries: Sequence[Mapping[str, Any]]
) -> str | None:
    """`check_signed_approval` for an approval made with several others by one assertion:
    why it is not a valid signature by `public_key` over `set_challenge(entries, nonce)`
    (`entries`: the approval event's ``detail["set"]``), or None when it is."""
    missing = [k for k in ASSERTION_FIELDS if not isinstance(assertion.get(k), str)]
    if missing:
        return f"the stored assertion lacks {', '.join(missing)}"
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return "the stored set is not a list of proposals"
    return _verify(assertion, public_key, set_challenge(entries, str(assertion["nonce"])))


def set_entry(entries: object, proposal_id: int) -> Mapping[str, Any] | None:
    """The entry of `proposal_id` in a stored set, or None when it has none."""
    if not isinstance(entries, list):
        return None
    found = [e for e in entries if isinstance(e, dict) and e.get("proposal_id") == proposal_id]
    return found[0] if len(found) == 1 else None


def rules_challenge(*, rules_sha256: str, nonce: str) -> bytes:
    """The 32-byte WebAuthn challenge of signing a rules file: SHA-256 of the canonical
    JSON ``{"purpose": "placet-rules", "rules_sha256", "nonce"}``. A signature over it
    vouches for the rules file whose bytes hash to `rules_sha256`, and for no other."""
    body = {"purpose": "placet-rules", "rules_sha256": rules_sha256, "nonce": nonce}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).digest()


def check_signed_rules(
    assertion: Mapping[str, Any], public_key: bytes, *, rules_sha256: str
) -> str | None:
    """Why the stored `assertion` is not a valid, user-verified signature by `public_key`
    over `rules_challenge` of the rules file hashing to `rules_sha256`, or None."""
    missing = [k for k in ASSERTION_FIELDS if not isinstance(assertion.get(k), str)]
    if missing:
        return f"the stored assertion lacks {', '.join(missing)}"
    challenge = rules_challenge(rules_sha256=rules_sha256, nonce=str(assertion["nonce"]))
    return _verify(assertion, public_key, challenge)


def _verify(assertion: Mapping[str, Any], public_key: bytes, challenge: bytes) -> str | None:
    """Why `assertion` is not a user-verified signature by `public_key` over
    `challenge`, or None."""
    credential = {
        "id": assertion["credential_id"],
        "rawId": assertion["credential_id"],
        "type": "public-key",
        "response": {
            "authenticatorData": assertion["authenticator_data"],
            "clientDataJSON": assertion["client_data"],
            "signature": assertion["signature"],
        },
    }
    import webauthn  # here, not at the top: every `placet` command imports the store
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        webauthn.verify_authentication_response(
            credential=json.dumps(credential),
            expected_challenge=challenge,
            expected_rp_id=str(assertion["rp_id"]),
            expected_origin=str(assertion["origin"]),
            credential_public_key=public_key,
            credential_current_sign_count=0,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError, AttributeError) as e:
        # py_webauthn quotes the client data's type and origin back: stored text that a
        # process writing the database chose, shown on the owner's terminal and page.
        return f"the passkey signature does not verify ({inert(str(e))})"
    return None


def credential_bytes(credential_id: str) -> bytes:
    """A base64url credential id as bytes (ValueError when malformed)."""
    from webauthn.helpers import base64url_to_bytes

    return base64url_to_bytes(credential_id)
