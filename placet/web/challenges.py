"""The WebAuthn challenges `placet web` hands out, each answered at most once.

Sign-in options are asked without a session, by anyone who reaches the port, so nothing
is stored when they are issued: a sign-in nonce is ``EXPIRY.RANDOM.TAG``, the tag an
HMAC under a key of this process, and the challenge is derived from the nonce by the
same key. A flood of `/signin/options` therefore fills nothing and pushes out no one's
pending sign-in. A sign-in nonce is spent once its assertion has verified (`spend`):
kept until it lapses, so the store holds at most the genuine sign-ins of the last
`CHALLENGE_SECONDS` (each needs the owner's user-verified passkey).

Registration and accept challenges are issued only to a pairing link's holder or a
signed-in owner; they are kept (at most `MAX_OPEN_CHALLENGES` of each purpose) and
taken out when their answer arrives.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from placet.errors import PolicyRefused

__all__ = ["CHALLENGE_SECONDS", "MAX_OPEN_CHALLENGES", "Challenges", "Issued"]

CHALLENGE_SECONDS = 300
"""How long an issued challenge may be answered."""
MAX_OPEN_CHALLENGES = 1000
"""Registration or accept challenges kept open at most, each purpose on its own."""


@dataclass(frozen=True)
class Issued:
    """A challenge handed to a page: what it is for and what it binds."""

    purpose: str  # "register" | "signin" | "accept" | "accept-set"
    challenge: bytes
    expires_at: datetime
    session: str = ""
    """SHA-256 of the session token that asked (accept), or the pairing token."""
    proposal_id: int | None = None
    request_hash: str | None = None
    skip_ops: tuple[int, ...] = ()
    entries: tuple[dict[str, Any], ...] = ()
    """An accept of several proposals (``accept-set``): what its challenge binds of each
    (`placet.decisions.Shown.entry`), in the order shown."""
    nonce: str = ""
    """The sign-in nonce (spent once its assertion verifies); "" for a kept challenge."""
    bound: dict[str, Any] = field(default_factory=dict)
    """An accept's `placet.store.signatures.accept_fields`: what its signature approves."""


def _no_open_request() -> PolicyRefused:
    return PolicyRefused(
        "this passkey answer is for no open request (it was already used, has lapsed, or "
        "was made for something else); reload the page and try again",
        code="challenge_invalid",
    )


@dataclass
class Challenges:
    """Issued challenges: sign-in ones by HMAC (nothing stored until spent), the others
    kept by nonce."""

    clock: Callable[[], datetime]
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    _issued: dict[str, Issued] = field(default_factory=dict)
    _spent: dict[str, datetime] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _mac(self, *parts: str) -> bytes:
        return hmac.new(self._key, "\0".join(parts).encode(), hashlib.sha256).digest()

    def issue_signin(self) -> tuple[str, Issued]:
        """A sign-in challenge and its nonce; nothing is kept."""
        stamp = int((self.clock() + timedelta(seconds=CHALLENGE_SECONDS)).timestamp())
        rand = secrets.token_hex(16)
        nonce = f"{stamp}.{rand}.{self._mac('signin-nonce', str(stamp), rand).hex()[:32]}"
        return nonce, self._signin(nonce, stamp)

    def _signin(self, nonce: str, stamp: int) -> Issued:
        expires = datetime.fromtimestamp(stamp, UTC)
        return Issued("signin", self._mac("signin", nonce), expires, nonce=nonce)

    def issue(self, make: Callable[[str], Issued]) -> tuple[str, Issued]:
        """Keep the challenge `make(nonce)` under a fresh nonce: at most
        `MAX_OPEN_CHALLENGES` of its purpose, the oldest of that purpose dropped first."""
        nonce = secrets.token_hex(16)
        issued = make(nonce)
        with self._lock:
            now = self.clock()
            for k in [k for k, v in self._issued.items() if v.expires_at <= now]:
                del self._issued[k]
            same = [k for k, v in self._issued.items() if v.purpose == issued.purpose]
            for k in same[: max(0, len(same) - MAX_OPEN_CHALLENGES + 1)]:
                del self._issued[k]
            self._issued[nonce] = issued
        return nonce, issued

    def take(self, nonce: object, purpose: str) -> Issued:
        """The challenge issued under `nonce` for `purpose` (a kept one is removed); else
        refused (``challenge_invalid``: unknown, forged, already answered, lapsed or
        for another purpose)."""
        if purpose == "signin":
            issued = self._check_signin(nonce)
        else:
            with self._lock:
                issued = self._issued.pop(nonce, None) if isinstance(nonce, str) else None
        if issued is None or issued.purpose != purpose or issued.expires_at <= self.clock():
            raise _no_open_request()
        return issued

    def _check_signin(self, nonce: object) -> Issued | None:
        if not isinstance(nonce, str) or nonce.count(".") != 2:
            return None
        stamp, rand, tag = nonce.split(".")
        if not stamp.isdigit() or len(stamp) > 12:
            return None
        if not hmac.compare_digest(tag, self._mac("signin-nonce", stamp, rand).hex()[:32]):
            return None
        with self._lock:
            if nonce in self._spent:
                return None
        return self._signin(nonce, int(stamp))

    def spend(self, issued: Issued) -> bool:
        """Record that `issued`'s answer verified: True the first time, False when it
        was already spent (two uses of one sign-in answer: the second is refused). A
        kept challenge was removed when taken: always True."""
        if not issued.nonce:
            return True
        with self._lock:
            now = self.clock()
            for k in [k for k, at in self._spent.items() if at <= now]:
                del self._spent[k]
            if issued.nonce in self._spent:
                return False
            self._spent[issued.nonce] = issued.expires_at
            return True

    @property
    def spent(self) -> int:
        """Sign-in nonces kept as spent (until they lapse)."""
        with self._lock:
            return len(self._spent)
