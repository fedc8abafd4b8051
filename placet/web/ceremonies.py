"""The WebAuthn ceremonies of `placet web`, verified server-side with py_webauthn.

Registration takes an unused, unexpired pairing link that `placet web pair` recorded in
the pins file, and pins the key it registers; sign-in takes a registered, unrevoked,
pinned passkey; an accept is an assertion over `accept_challenge` of the proposal id,
the request hash shown, the unticked ops, its host and drive and a fresh nonce
(docs/design.md section 12;
docs/decisions/0030-signed-mode.md). Every ceremony requires user verification and the
exact origin, port included. Every challenge is answered once (`placet.web.challenges`)
and lapses after `CHALLENGE_SECONDS`; sign-in challenges are stored by nobody until
spent, so a flood evicts none. A sign count that does not grow is refused and recorded
(``passkey_counter``); it is stored by compare-and-set, so one assertion never passes twice."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import webauthn
from webauthn.helpers import bytes_to_base64url, options_to_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from placet.config import Settings
from placet.config.pins import editing_pins, read_pins
from placet.errors import PolicyRefused
from placet.store import ProposalRecord, Store
from placet.store.passkeys import PasskeyRecord, token_hash
from placet.store.signatures import (
    accept_challenge,
    accept_fields,
    credential_bytes,
    set_challenge,
)
from placet.text import quote
from placet.web.challenges import CHALLENGE_SECONDS, Challenges, Issued

__all__ = ["CHALLENGE_SECONDS", "Ceremonies", "Issued"]

_USER_ID = b"placet-owner"


def _unpinned_pairing() -> PolicyRefused:
    return PolicyRefused(
        "this pairing link was not made by `placet web pair` for this placet (the owner's "
        "pins file does not record it, or it lapsed); run `placet web pair` in your "
        "terminal for a new one",
        code="pairing_invalid",
    )


def _refused(what: str, e: Exception | str) -> PolicyRefused:
    return PolicyRefused(
        f"{what}: the passkey's answer does not verify ({e})", code="passkey_refused"
    )


@dataclass
class Ceremonies:
    """Registration, sign-in and accept assertions against one origin and RP ID; the
    pins are those beside `settings.config_file`."""

    store: Store
    settings: Settings
    rp_id: str
    origin: str
    clock: Callable[[], datetime]
    challenges: Challenges = field(init=False)

    def __post_init__(self) -> None:
        self.challenges = Challenges(self.clock)

    def _expiry(self) -> datetime:
        return self.clock() + timedelta(seconds=CHALLENGE_SECONDS)

    def expiry(self) -> datetime:
        """When a challenge issued now lapses."""
        return self._expiry()

    # ---- registration --------------------------------------------------------------

    def check_pairing(self, pairing_token: str) -> None:
        """Raise PolicyRefused (``pairing_invalid``) unless `pairing_token` is an unused,
        unexpired link of the database that `placet web pair` also recorded in the pins
        file (`placet.config.pins`)."""
        now = self.clock()
        self.store.check_pairing(pairing_token, now=now)
        if not read_pins(self.settings.config_file).has_pairing(token_hash(pairing_token), now):
            raise _unpinned_pairing()

    def registration_options(self, pairing_token: str) -> dict[str, Any]:
        """Options for `navigator.credentials.create`, plus ``nonce``. Raises
        PolicyRefused (``pairing_invalid``) for a used, expired or unknown link
        (`check_pairing`)."""
        self.check_pairing(pairing_token)
        existing = [
            PublicKeyCredentialDescriptor(id=credential_bytes(k.credential_id))
            for k in self.store.passkeys()
        ]

        def make(nonce: str) -> Issued:
            return Issued("register", secrets.token_bytes(32), self._expiry(), pairing_token)

        nonce, issued = self.challenges.issue(make)
        opts = webauthn.generate_registration_options(
            rp_id=self.rp_id,
            rp_name="placet",
            user_name="owner",
            user_id=_USER_ID,
            challenge=issued.challenge,
            authenticator_selection=AuthenticatorSelectionCriteria(
                user_verification=UserVerificationRequirement.REQUIRED,
                resident_key=ResidentKeyRequirement.PREFERRED,
            ),
            exclude_credentials=existing,
        )
        return {"nonce": nonce, "publicKey": json.loads(options_to_json(opts))}

    def register(self, pairing_token: str, body: dict[str, Any]) -> PasskeyRecord:
        """Verify a registration answer, store the passkey (using the link) and pin it.

        The pins file's record of the link is taken and the key pinned under the pins'
        lock, around the database's one-transaction use of the link: a refused
        registration changes neither. Should writing the pins fail after the database
        committed, the key is registered but unpinned (it signs nothing) until the owner
        runs `placet keys pin ID`.

        Raises:
            PolicyRefused: ``challenge_invalid``, ``passkey_refused``, ``pairing_invalid``
                (see `check_pairing`), ``passkey_exists``.
            ConfigError: the pins file cannot be read or written.
        """
        issued = self.challenges.take(body.get("nonce"), "register")
        if issued.session != pairing_token:
            raise PolicyRefused(
                "this passkey answer was made for another pairing link; open your link again",
                code="challenge_invalid",
            )
        try:
            reg = webauthn.verify_registration_response(
                credential=json.dumps(body.get("credential")),
                expected_challenge=issued.challenge,
                expected_origin=self.origin,
                expected_rp_id=self.rp_id,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError, AttributeError) as e:
            raise _refused("registering the passkey", e) from e
        name = str(body.get("name") or "passkey")[:60]
        now = self.clock()
        with editing_pins(self.settings.config_file) as pins:
            if not pins.take_pairing(token_hash(pairing_token), now):
                raise _unpinned_pairing()
            key = self.store.register_passkey(
                pairing_token,
                credential_id=bytes_to_base64url(reg.credential_id),
                public_key=reg.credential_public_key,
                sign_count=reg.sign_count,
                name=name,
                now=now,
            )
            pins.pin(key.credential_id, key.public_key, key.name, now)
        return key

    # ---- assertions ----------------------------------------------------------------

    def _assertion_options(self, issued: Issued, nonce: str) -> dict[str, Any]:
        pins = read_pins(self.settings.config_file)
        keys = [
            k
            for k in self.store.passkeys()
            if pins.problem(k.credential_id, k.public_key, active=True) is None
        ]
        opts = webauthn.generate_authentication_options(
            rp_id=self.rp_id,
            challenge=issued.challenge,
            allow_credentials=[
                PublicKeyCredentialDescriptor(id=credential_bytes(k.credential_id)) for k in keys
            ],
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        return {"nonce": nonce, "publicKey": json.loads(options_to_json(opts))}

    def options(self, make: Callable[[str], Issued]) -> dict[str, Any]:
        """Options for an assertion over the challenge `make(nonce)` builds, kept under
        its nonce (the rules page's signature: `placet.web.rules_page`)."""
        nonce, issued = self.challenges.issue(make)
        return self._assertion_options(issued, nonce)

    def signin_options(self) -> dict[str, Any]:
        nonce, issued = self.challenges.issue_signin()
        return self._assertion_options(issued, nonce)

    def accept_options(
        self, session: str, record: ProposalRecord, skip_ops: list[int]
    ) -> dict[str, Any]:
        """Options whose challenge binds this proposal as shown (`record`: its request
        hash, host and drive), the unticked ops and the nonce (`accept_fields`)."""
        skip = tuple(sorted(set(skip_ops)))
        bound = accept_fields(
            proposal_id=record.id, request_hash=record.request_hash, skip_ops=skip,
            host_id=record.host_id, drive_spec=record.drive_spec,
        )  # fmt: skip

        def make(nonce: str) -> Issued:
            challenge = accept_challenge(bound, nonce)
            return Issued("accept", challenge, self._expiry(), session, record.id,
                          record.request_hash, skip, bound=bound)  # fmt: skip

        nonce, issued = self.challenges.issue(make)
        return self._assertion_options(issued, nonce)

    def accept_set_options(self, session: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """Options whose challenge binds the list `entries` (each proposal's id, request
        hash, unticked ops, host and drive, in the order shown) and the nonce
        (`set_challenge`): one assertion for the whole set, answered once."""
        kept = tuple(dict(e) for e in entries)

        def make(nonce: str) -> Issued:
            challenge = set_challenge(kept, nonce)
            return Issued("accept-set", challenge, self._expiry(), session, entries=kept)

        nonce, issued = self.challenges.issue(make)
        return self._assertion_options(issued, nonce)

    def _check_count(self, key: PasskeyRecord, new: int, what: str) -> None:
        """Refuse a verified assertion whose sign count does not grow past the stored one
        (either non-zero: WebAuthn's sign of a copied authenticator), and record it
        (`Store.record_counter_alarm`)."""
        if (new or key.sign_count) and new <= key.sign_count:
            self.store.record_counter_alarm(
                key.id, stored=key.sign_count, new=new, what=what, now=self.clock()
            )
            raise PolicyRefused(
                f"{what}: passkey {key.id} {quote(key.name)} signed with sign count {new}, "
                f"not above the {key.sign_count} it reached before: another copy of this "
                "passkey may be in use. Refused and recorded (`placet keys`); if you did "
                f"not expect this, run `placet keys revoke {key.id}`",
                code="passkey_counter",
                details={"passkey_id": key.id, "stored": key.sign_count, "new": new},
            )

    def verify_assertion(
        self, issued: Issued, credential: object, what: str
    ) -> tuple[PasskeyRecord, dict[str, Any]]:
        """Verify an assertion answering `issued` (user verified, sign count grown and
        recorded). Returns the passkey and the assertion as the audit event keeps it
        (`placet.store.signatures.ASSERTION_FIELDS`, without the nonce)."""
        if not isinstance(credential, dict) or not isinstance(credential.get("id"), str):
            raise _refused(what, "no credential")
        key = self.store.passkey_by_credential(credential["id"])
        if key is None or key.revoked_at is not None:
            raise PolicyRefused(
                f"{what}: this passkey is not registered with placet (or was revoked); "
                "run `placet web pair` to register one",
                code="passkey_refused",
            )
        unpinned = read_pins(self.settings.config_file).problem(
            key.credential_id, key.public_key, active=True
        )
        if unpinned is not None:
            raise PolicyRefused(
                f"{what}: passkey {key.id} {quote(key.name)} {unpinned}",
                code="passkey_not_pinned",
                details={"passkey_id": key.id},
            )
        try:
            auth = webauthn.verify_authentication_response(
                credential=json.dumps(credential),
                expected_challenge=issued.challenge,
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,  # exact: scheme, host and port
                credential_public_key=key.public_key,
                # py_webauthn compares the count before the signature: compared below,
                # once the signature verified, so only a genuine answer raises the alarm
                credential_current_sign_count=0,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError, AttributeError) as e:
            raise _refused(what, e) from e
        self._check_count(key, auth.new_sign_count, what)
        if not self.challenges.spend(issued):
            raise _refused(what, "its challenge was already answered")
        if not self.store.use_passkey(
            key.id, seen=key.sign_count, new=auth.new_sign_count, now=self.clock()
        ):
            raise _refused(what, "its sign count was already used")
        response = credential.get("response") or {}
        kept = {
            "credential_id": key.credential_id,
            "authenticator_data": str(response.get("authenticatorData", "")),
            "client_data": str(response.get("clientDataJSON", "")),
            "signature": str(response.get("signature", "")),
            "origin": self.origin,
            "rp_id": self.rp_id,
            "sign_count": auth.new_sign_count,
        }
        return key, kept
