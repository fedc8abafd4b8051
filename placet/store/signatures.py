"""A web approval's passkey signature: what its challenge binds, and checking it again.

Every accept made in `placet web` is a fresh user-verified WebAuthn assertion whose
challenge is `accept_challenge(...)`: SHA-256 over the canonical JSON of the proposal
id, its request hash, the op indexes the owner unticked (sorted) and a one-time nonce
(docs/design.md section 12). The approval's audit event keeps the assertion
(`detail["passkey"]`: credential id, authenticator data, client data, signature, the
nonce, origin and RP ID, all base64url or text), so anyone holding the stored public
key can check afterwards that the owner's authenticator signed exactly that request
and selection: `check_signed_approval` does, for `placet audit --verify` and for the
executor in signed mode (`approvals = "signed"`). Core module: py_webauthn only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from placet.schema import canonical_json
from placet.text import inert

__all__ = [
    "ASSERTION_FIELDS",
    "accept_challenge",
    "check_signed_approval",
    "check_signed_rules",
    "rules_challenge",
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


def accept_challenge(
    *, proposal_id: int, request_hash: str, skip_ops: Iterable[int], nonce: str
) -> bytes:
    """The 32-byte WebAuthn challenge of an accept: SHA-256 of the canonical JSON
    ``{"purpose": "placet-accept", "proposal_id", "request_hash", "skip_ops", "nonce"}``
    (`skip_ops` sorted). A signature over it approves that request and selection only."""
    body = {
        "purpose": "placet-accept",
        "proposal_id": proposal_id,
        "request_hash": request_hash,
        "skip_ops": sorted(int(i) for i in skip_ops),
        "nonce": nonce,
    }
    return hashlib.sha256(canonical_json(body).encode("utf-8")).digest()


def rules_challenge(*, rules_sha256: str, nonce: str) -> bytes:
    """The 32-byte WebAuthn challenge of signing a rules file: SHA-256 of the canonical
    JSON ``{"purpose": "placet-rules", "rules_sha256", "nonce"}``. A signature over it
    vouches for the rules file whose bytes hash to `rules_sha256`, and for no other."""
    body = {"purpose": "placet-rules", "rules_sha256": rules_sha256, "nonce": nonce}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).digest()


def check_signed_approval(
    assertion: Mapping[str, Any],
    public_key: bytes,
    *,
    proposal_id: int,
    request_hash: str,
    skip_ops: Iterable[int],
) -> str | None:
    """Why the stored `assertion` (an approval's `detail["passkey"]`) is not a valid,
    user-verified signature by `public_key` (COSE) over `accept_challenge` of this
    proposal, request hash and selection, or None when it is. The sign count is not
    checked here (it was checked when the approval was made). The reason is inert text
    (`placet.text.inert`): it may quote the stored client data."""
    missing = _missing(assertion)
    if missing:
        return missing
    challenge = accept_challenge(
        proposal_id=proposal_id,
        request_hash=request_hash,
        skip_ops=skip_ops,
        nonce=str(assertion["nonce"]),
    )
    return _verify(assertion, public_key, challenge)


def check_signed_rules(
    assertion: Mapping[str, Any], public_key: bytes, *, rules_sha256: str
) -> str | None:
    """Why the stored `assertion` is not a valid, user-verified signature by `public_key`
    over `rules_challenge` of the rules file hashing to `rules_sha256`, or None."""
    missing = _missing(assertion)
    if missing:
        return missing
    challenge = rules_challenge(rules_sha256=rules_sha256, nonce=str(assertion["nonce"]))
    return _verify(assertion, public_key, challenge)


def _missing(assertion: Mapping[str, Any]) -> str | None:
    missing = [k for k in ASSERTION_FIELDS if not isinstance(assertion.get(k), str)]
    return f"the stored assertion lacks {', '.join(missing)}" if missing else None


def _verify(assertion: Mapping[str, Any], public_key: bytes, challenge: bytes) -> str | None:
    """Why `assertion` is not `public_key`'s user-verified signature over `challenge`."""
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
