"""A passkey in software: an EC P-256 key that signs authenticator data and client data as
WebAuthn specifies, so a test can answer placet's ceremonies without a browser, and
answer them wrongly on purpose (no user verification, another origin, a sign count that
goes backwards). Its answers are real signatures that py_webauthn verifies."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url

ORIGIN, RP_ID = "http://localhost:8765", "localhost"
UP, UV, AT = 0x01, 0x04, 0x40
"""Authenticator data flags: user present, user verified, attested credential data."""


class SoftKey:
    """A passkey: COSE public key, assertions and a registration ("none" attestation)."""

    def __init__(self, rp_id: str = RP_ID) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.rp_id = rp_id
        self.count = 0

    def cose(self) -> bytes:
        n = self.key.public_key().public_numbers()
        return bytes(cbor2.dumps(
            {1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")}
        ))  # fmt: skip

    def _client(self, kind: str, challenge: bytes, origin: str) -> bytes:
        return json.dumps({"type": kind, "challenge": bytes_to_base64url(challenge),
                           "origin": origin, "crossOrigin": False}).encode()  # fmt: skip

    def _auth(self, flags: int, count: int | None) -> bytes:
        if count is None:
            self.count += 1
            count = self.count
        return hashlib.sha256(self.rp_id.encode()).digest() + bytes([flags]) + count.to_bytes(4)

    def _sign(self, data: bytes) -> bytes:
        return self.key.sign(data, ec.ECDSA(hashes.SHA256()))

    def assert_(self, challenge: bytes, credential_id: str) -> dict[str, str]:
        """An assertion over `challenge` in the form an approval's audit event keeps it."""
        client = self._client("webauthn.get", challenge, ORIGIN)
        auth = self._auth(UP | UV, None)
        sig = self._sign(auth + hashlib.sha256(client).digest())
        return {
            "credential_id": credential_id,
            "authenticator_data": bytes_to_base64url(auth),
            "client_data": bytes_to_base64url(client),
            "signature": bytes_to_base64url(sig),
            "origin": ORIGIN,
            "rp_id": self.rp_id,
        }

    def assertion(
        self, options: dict[str, Any], credential_id: str, *, origin: str = ORIGIN,
        flags: int = UP | UV, count: int | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The credential JSON a browser posts for `navigator.credentials.get(options)`
        (the options placet answered: ``publicKey.challenge``); `count` None: one more
        than the last."""
        challenge = base64url_to_bytes(options["publicKey"]["challenge"])
        client = self._client("webauthn.get", challenge, origin)
        auth = self._auth(flags, count)
        sig = self._sign(auth + hashlib.sha256(client).digest())
        raw = base64url_to_bytes(credential_id)
        return {
            "id": credential_id, "rawId": bytes_to_base64url(raw), "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client),
                "authenticatorData": bytes_to_base64url(auth),
                "signature": bytes_to_base64url(sig), "userHandle": None,
            },
            "clientExtensionResults": {},
        }  # fmt: skip

    def registration(
        self, options: dict[str, Any], credential_id: str, *, origin: str = ORIGIN,
        flags: int = UP | UV | AT,
    ) -> dict[str, Any]:  # fmt: skip
        """The credential JSON a browser posts for `navigator.credentials.create(options)`,
        with a "none" attestation of this key under `credential_id`."""
        challenge = base64url_to_bytes(options["publicKey"]["challenge"])
        client = self._client("webauthn.create", challenge, origin)
        raw = base64url_to_bytes(credential_id)
        attested = bytes(16) + len(raw).to_bytes(2) + raw + self.cose()
        auth = self._auth(flags, 0) + attested
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth})
        return {
            "id": credential_id, "rawId": bytes_to_base64url(raw), "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client),
                "attestationObject": bytes_to_base64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
        }  # fmt: skip
