"""The owner's pinned passkeys: which passkeys may sign, kept outside the database.

A process that can write the database could add a passkey there and sign with it, so the
keys that may sign in and approve are pinned in `pinned-passkeys.json` beside
`config.toml`: per credential id, the SHA-256 of its COSE public key (`key_sha256`). A
pairing link from `placet web pair` is recorded there too. Unpinned pins are kept, so
`audit --verify` still checks what they signed; only an active pin signs (docs/design.md
section 12; docs/decisions/0030-signed-mode.md).

The file is rewritten whole and atomically under an exclusive `flock`, so the web process
and the CLI never lose each other's change; a malformed file is a ConfigError; times are
injected. Beside it, `spent-signatures` lists the SHA-256 of every nonce the executor ran
(`spend_signature`), so a signature never approves a second run. POSIX only."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from placet.config.files import write_whole
from placet.errors import ConfigError

__all__ = [
    "PINS_FILE",
    "PairingPin",
    "Pin",
    "Pins",
    "editing_pins",
    "key_sha256",
    "pins_path",
    "read_pins",
    "spend_signature",
]

PINS_FILE = "pinned-passkeys.json"
"""The pins' file name, in the folder of `config.toml`."""
SPENT_FILE = "spent-signatures"
"""The signed approvals already run: one SHA-256 hex of a nonce a line, beside the pins."""
_LOCK_FILE = "pinned-passkeys.lock"
_FORMAT = 1


def pins_path(config_file: Path) -> Path:
    """Where the pins of the owner whose `config.toml` is `config_file` are kept."""
    return config_file.parent / PINS_FILE


def key_sha256(public_key: bytes) -> str:
    """SHA-256 hex of a passkey's COSE public key bytes (what a pin names)."""
    return hashlib.sha256(public_key).hexdigest()


@dataclass(frozen=True)
class Pin:
    """A passkey the owner pinned: its base64url credential id and key digest."""

    credential_id: str
    key_sha256: str
    name: str
    pinned_at: datetime
    unpinned_at: datetime | None = None


@dataclass(frozen=True)
class PairingPin:
    """A pairing link made at the owner's terminal: SHA-256 hex of its token, expiry."""

    token_sha256: str
    expires_at: datetime


@dataclass
class Pins:
    """The pins file's content: passkey pins (one per credential id) and open pairings."""

    passkeys: list[Pin] = field(default_factory=list)
    pairings: list[PairingPin] = field(default_factory=list)

    def pin_of(self, credential_id: str) -> Pin | None:
        """The pin of this credential id, active or not, or None."""
        return next((p for p in self.passkeys if p.credential_id == credential_id), None)

    def problem(self, credential_id: str, public_key: bytes, *, active: bool) -> str | None:
        """Why the passkey `credential_id` whose stored COSE key is `public_key` may not
        sign, or None: it must be pinned with that key's digest, and (`active`) not
        unpinned since. `active=False` asks only whether the owner ever pinned it, which
        is what an approval it signed earlier needs."""
        pin = self.pin_of(credential_id)
        if pin is None:
            return (
                "is not pinned by the owner (it was added to the database without a pairing "
                "link made by `placet web pair`, or registered before keys were pinned: if it "
                "is yours, run `placet keys pin ID` at your terminal)"
            )
        stored = key_sha256(public_key)
        if not secrets.compare_digest(pin.key_sha256, stored):
            return (
                f"has a public key in the database (SHA-256 {stored[:16]}...) other than the "
                f"one the owner pinned ({pin.key_sha256[:16]}...): the database was altered"
            )
        if active and pin.unpinned_at is not None:
            return f"was unpinned (or revoked) at {pin.unpinned_at.isoformat(timespec='seconds')}"
        return None

    def pin(self, credential_id: str, public_key: bytes, name: str, now: datetime) -> Pin:
        """Pin (or pin again) a passkey; replaces an earlier pin of the credential id."""
        new = Pin(credential_id, key_sha256(public_key), name, now)
        self.passkeys = [p for p in self.passkeys if p.credential_id != credential_id] + [new]
        return new

    def unpin(self, credential_id: str, now: datetime) -> bool:
        """Mark the active pin of `credential_id` unpinned; False when there is none."""
        pin = self.pin_of(credential_id)
        if pin is None or pin.unpinned_at is not None:
            return False
        self.passkeys = [replace(p, unpinned_at=now) if p is pin else p for p in self.passkeys]
        return True

    def open_pairing(self, token_sha256: str, expires_at: datetime, now: datetime) -> None:
        """Record a pairing link (and drop the lapsed ones)."""
        self.pairings = [p for p in self.pairings if p.expires_at > now]
        self.pairings.append(PairingPin(token_sha256, expires_at))

    def has_pairing(self, token_sha256: str, now: datetime) -> bool:
        """True when the pairing link with this token hash is recorded and unexpired."""
        return any(
            secrets.compare_digest(p.token_sha256, token_sha256) and p.expires_at > now
            for p in self.pairings
        )

    def take_pairing(self, token_sha256: str, now: datetime) -> bool:
        """Remove the recorded, unexpired pairing link with this token hash; False when
        there is none (never made at the terminal, already used, or expired)."""
        found = self.has_pairing(token_sha256, now)
        self.pairings = [
            p for p in self.pairings if p.token_sha256 != token_sha256 and p.expires_at > now
        ]
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "placet_pinned_passkeys": _FORMAT,
            "passkeys": [
                {
                    "credential_id": p.credential_id,
                    "key_sha256": p.key_sha256,
                    "name": p.name,
                    "pinned_at": p.pinned_at.isoformat(),
                    "unpinned_at": p.unpinned_at.isoformat() if p.unpinned_at else None,
                }
                for p in self.passkeys
            ],
            "pairings": [
                {"token_sha256": p.token_sha256, "expires_at": p.expires_at.isoformat()}
                for p in self.pairings
            ],
        }


def _malformed(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"cannot read the pinned passkeys {path}: {why}; restore it from a backup, or remove "
        "it and pin your passkeys again with `placet keys pin ID`",
        details={"path": str(path)},
    )


def _time(value: object, path: Path) -> datetime:
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError as e:
        raise _malformed(path, f"{value!r} is not a time") from e
    if t.tzinfo is None:
        raise _malformed(path, f"{value!r} has no time zone")
    return t


def _parse(text: str, path: Path) -> Pins:
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("placet_pinned_passkeys") != _FORMAT:
            raise _malformed(path, "it is not a placet pinned-passkeys file of format 1")
        keys = [
            Pin(
                credential_id=str(p["credential_id"]),
                key_sha256=str(p["key_sha256"]),
                name=str(p.get("name", "")),
                pinned_at=_time(p["pinned_at"], path),
                unpinned_at=None if p.get("unpinned_at") is None else _time(p["unpinned_at"], path),
            )
            for p in data.get("passkeys", [])
        ]
        pairings = [
            PairingPin(str(p["token_sha256"]), _time(p["expires_at"], path))
            for p in data.get("pairings", [])
        ]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise _malformed(path, f"{type(e).__name__}: {e}") from e
    return Pins(keys, pairings)


def read_pins(config_file: Path) -> Pins:
    """The pins beside `config_file` (no pins when the file does not exist).

    Raises:
        ConfigError: the file cannot be read or is not a pins file of format 1.
    """
    path = pins_path(config_file)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Pins()
    except (OSError, UnicodeDecodeError) as e:
        raise _malformed(path, str(e)) from e
    return _parse(text, path)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The exclusive lock of the pins' folder (created 0700 if missing), held in the block.

    Raises:
        ConfigError: the folder or its lock file cannot be created.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(folder / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise ConfigError(
            f"cannot write the pinned passkeys in {folder}: {e.strerror or e}",
            details={"path": str(folder)},
        ) from e
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)  # closing releases the lock


def spend_signature(config_file: Path, nonce: str) -> bool:
    """Record that the signed approval whose challenge carried `nonce` is being run, in
    `spent-signatures` beside `config_file` (under the pins' lock; appended, fsynced);
    False, and nothing written, when it was recorded before: that signature already
    approved a run, and approves no other.

    Raises:
        ConfigError: the file cannot be read or written.
    """
    line = hashlib.sha256(nonce.encode("utf-8")).hexdigest()
    path = config_file.parent / SPENT_FILE
    with _locked(config_file.parent):
        try:
            fd = os.open(
                path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                with os.fdopen(os.dup(fd), "rb") as f:
                    if any(seen.strip() == line.encode() for seen in f):
                        return False
                os.write(fd, (line + "\n").encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise ConfigError(
                f"cannot record the signed approvals run in {path}: {e.strerror or e}",
                details={"path": str(path)},
            ) from e
    return True


@contextlib.contextmanager
def editing_pins(config_file: Path) -> Iterator[Pins]:
    """The pins beside `config_file`, locked against other writers; written back
    atomically when the block ends without an exception (nothing is written otherwise).

    Raises:
        ConfigError: the folder cannot be created or written, or see `read_pins`.
    """
    with _locked(config_file.parent):
        pins = read_pins(config_file)
        yield pins
        _write(pins_path(config_file), json.dumps(pins.to_json(), indent=2) + "\n")


def _write(path: Path, text: str) -> None:
    try:
        write_whole(path, text.encode("utf-8"), replace=True)
    except OSError as e:
        raise ConfigError(
            f"cannot write the pinned passkeys {path}: {e.strerror or e}",
            details={"path": str(path)},
        ) from e
