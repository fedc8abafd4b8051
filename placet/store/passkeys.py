"""The owner's passkeys, `placet web` sign-in sessions and one-time pairing links.

Tables (migration `web_passkeys_sessions_pairings`): `web_passkey` (a registered
WebAuthn credential: its id, COSE public key, sign count, name; revoking sets
`revoked_at` and keeps the key, so `placet audit --verify` can still check the
approvals it signed), `web_session` (a signed-in browser: the SHA-256 of its session
token, the passkey that signed in, expiry) and `web_pairing` (a pairing link made by
`placet web pair`: the SHA-256 of its token, expiry, when it was used); and (migration
`web_passkey_counter_alarms`) `web_passkey_alarm`: an assertion that verified but whose
sign count did not grow, the sign of a copied (cloned) passkey, refused and recorded
here for `placet keys` and the audit page. Tokens are never
stored, only their hashes. A pairing link is used at most once, while unexpired: the
compare-and-set that marks it used and the passkey's insert are one transaction
(docs/design.md section 12). Times are injectable (`now=`), aware UTC.
"""

from __future__ import annotations

import builtins
import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Annotated, Any, Protocol

from pydantic import BeforeValidator
from sqlalchemy import LargeBinary, UniqueConstraint, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Field

from placet.config import Settings
from placet.config.pins import editing_pins
from placet.errors import NotFound, PolicyRefused
from placet.store.base import Database, Heads, now_or_utcnow
from placet.store.models import NullWhen, Row, Str, StrKey, Table, When, table

__all__ = [
    "PAIRING_MINUTES",
    "SESSION_HOURS",
    "CounterAlarm",
    "PasskeyRecord",
    "Passkeys",
    "open_pairing_link",
    "token_hash",
]

PAIRING_MINUTES = 10
"""How long a pairing link from `placet web pair` stays usable."""
SESSION_HOURS = 12
"""How long a `placet web` sign-in lasts."""


class PasskeyRecord(Row):
    """A registered passkey. `credential_id` base64url; `public_key` COSE bytes (left out
    of `to_dict`, the JSON shape of `placet keys --json`)."""

    id: int = Field(primary_key=True)
    credential_id: Str
    public_key: Annotated[bytes, BeforeValidator(bytes)] = Field(sa_type=LargeBinary, exclude=True)
    sign_count: int
    name: Str
    created_at: When
    last_used_at: NullWhen
    revoked_at: NullWhen


class Passkey(PasskeyRecord, table=True):
    """A passkey the owner registered through a pairing link."""

    __tablename__ = "web_passkey"
    __table_args__ = (UniqueConstraint("credential_id", name="ux_web_passkey_credential"),)


class Session(Table, table=True):
    """A browser signed in with a passkey; `token_hash` is SHA-256 hex of its session
    token."""

    __tablename__ = "web_session"

    token_hash: StrKey
    passkey_id: int = Field(foreign_key="web_passkey.id")
    created_at: When
    expires_at: When


class Pairing(Table, table=True):
    """A one-time pairing link; `token_hash` is SHA-256 hex of the link's token."""

    __tablename__ = "web_pairing"

    token_hash: StrKey
    created_at: When
    expires_at: When
    used_at: NullWhen


class CounterAlarm(Row):
    """An assertion by passkey `passkey_id` that verified, refused at `at` because its
    sign count `new_count` was not above `stored_count`; `what` names the ceremony."""

    id: int = Field(primary_key=True)
    passkey_id: int = Field(foreign_key="web_passkey.id")
    at: When
    stored_count: int
    new_count: int
    what: Str


class Alarm(CounterAlarm, table=True):
    """A verified assertion refused because its sign count did not grow past the stored
    one."""

    __tablename__ = "web_passkey_alarm"


PASSKEY = table(Passkey)
SESSION = table(Session)
PAIRING = table(Pairing)
ALARM = table(Alarm)
K = PASSKEY.c


def token_hash(token: str) -> str:
    """SHA-256 hex of a session or pairing token (what the tables store)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _pairing_refused(why: str) -> PolicyRefused:
    return PolicyRefused(
        f"this pairing link {why}; run `placet web pair` in your terminal for a new one",
        code="pairing_invalid",
    )


class Passkeys:
    """Passkeys, sessions and pairing links (the ``keys`` part of `Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_pairing(self, *, now: datetime | None = None) -> str:
        """A new one-time pairing token (URL-safe, 256 bits), usable `PAIRING_MINUTES`."""
        now = now_or_utcnow(now)
        token = secrets.token_urlsafe(32)
        values = {
            "token_hash": token_hash(token),
            "created_at": now,
            "expires_at": now + timedelta(minutes=PAIRING_MINUTES),
        }

        def tx(conn: Connection, heads: Heads) -> None:
            conn.execute(insert(PAIRING).values(**values))

        self.db.write("creating a pairing link", tx)
        return token

    def check_pairing(self, token: str, *, now: datetime | None = None) -> None:
        """Raise PolicyRefused (``pairing_invalid``) unless `token` is an unused,
        unexpired pairing link."""
        now = now_or_utcnow(now)
        q = select(PAIRING).where(PAIRING.c.token_hash == token_hash(token))
        row = self.db.read("reading a pairing link", lambda c: c.execute(q).first())
        _check_pairing_row(row, now)

    def register_passkey(
        self,
        token: str,
        *,
        credential_id: str,
        public_key: bytes,
        sign_count: int,
        name: str,
        now: datetime | None = None,
    ) -> PasskeyRecord:
        """Use the pairing link `token` (once) to register a passkey.

        Raises:
            PolicyRefused (``pairing_invalid``): unknown, used or expired link; or
                (``passkey_exists``) this credential is already registered.
        """
        now = now_or_utcnow(now)
        th = token_hash(token)

        def tx(conn: Connection, heads: Heads) -> PasskeyRecord:
            row = conn.execute(select(PAIRING).where(PAIRING.c.token_hash == th)).first()
            _check_pairing_row(row, now)
            used = conn.execute(
                update(PAIRING)
                .where(PAIRING.c.token_hash == th, PAIRING.c.used_at.is_(None))
                .values(used_at=now)
            )
            if used.rowcount != 1:
                raise _pairing_refused("was already used")
            if conn.execute(select(K.id).where(K.credential_id == credential_id)).first():
                raise PolicyRefused(
                    "this passkey is already registered; sign in with it instead",
                    code="passkey_exists",
                )
            new = conn.execute(
                insert(PASSKEY)
                .values(
                    credential_id=credential_id,
                    public_key=public_key,
                    sign_count=sign_count,
                    name=name,
                    created_at=now,
                )
                .returning(*PASSKEY.c)
            ).one()
            return PasskeyRecord.of(new._mapping)

        return self.db.write("registering a passkey", tx)

    def passkeys(self, *, include_revoked: bool = False) -> builtins.list[PasskeyRecord]:
        """Registered passkeys by id; revoked ones only with `include_revoked`."""
        q = select(PASSKEY).order_by(K.id)
        if not include_revoked:
            q = q.where(K.revoked_at.is_(None))
        rows = self.db.read("listing passkeys", lambda c: c.execute(q).all())
        return [PasskeyRecord.of(r._mapping) for r in rows]

    def passkey_by_credential(self, credential_id: str) -> PasskeyRecord | None:
        """The passkey with this base64url credential id (revoked or not), or None."""
        q = select(PASSKEY).where(K.credential_id == credential_id)
        row = self.db.read("reading a passkey", lambda c: c.execute(q).first())
        return None if row is None else PasskeyRecord.of(row._mapping)

    def revoke_passkey(self, passkey_id: int, *, now: datetime | None = None) -> PasskeyRecord:
        """Revoke a passkey: it signs nothing more and its sessions end. The key stays
        stored, so the approvals it signed still verify. Raises NotFound."""
        now = now_or_utcnow(now)

        def tx(conn: Connection, heads: Heads) -> PasskeyRecord:
            row = conn.execute(
                update(PASSKEY)
                .where(K.id == passkey_id, K.revoked_at.is_(None))
                .values(revoked_at=now)
                .returning(*PASSKEY.c)
            ).first()
            if row is None:
                raise NotFound(
                    f"there is no active passkey {passkey_id}; `placet keys` lists them",
                    details={"passkey_id": passkey_id},
                )
            conn.execute(delete(SESSION).where(SESSION.c.passkey_id == passkey_id))
            return PasskeyRecord.of(row._mapping)

        return self.db.write(f"revoking passkey {passkey_id}", tx)

    def use_passkey(
        self, passkey_id: int, *, seen: int, new: int, now: datetime | None = None
    ) -> bool:
        """Record a verified assertion's sign count `new` if the stored count is still
        `seen` (compare-and-set) and the key is not revoked; False otherwise (another
        assertion was counted in between, or the key was revoked)."""
        now = now_or_utcnow(now)

        def tx(conn: Connection, heads: Heads) -> bool:
            res = conn.execute(
                update(PASSKEY)
                .where(K.id == passkey_id, K.sign_count == seen, K.revoked_at.is_(None))
                .values(sign_count=new, last_used_at=now)
            )
            return bool(res.rowcount == 1)

        return self.db.write(f"using passkey {passkey_id}", tx)

    def record_counter_alarm(
        self, passkey_id: int, *, stored: int, new: int, what: str, now: datetime | None = None
    ) -> CounterAlarm:
        """Record that passkey `passkey_id` signed (verified) with sign count `new`, not
        above the `stored` one: the assertion was refused (`CounterAlarm`)."""
        values = {"passkey_id": passkey_id, "at": now_or_utcnow(now), "stored_count": stored,
                  "new_count": new, "what": what[:200]}  # fmt: skip

        def tx(conn: Connection, heads: Heads) -> int:
            q = insert(ALARM).values(**values).returning(ALARM.c.id)
            return int(conn.execute(q).scalar_one())

        alarm_id = self.db.write(f"recording passkey {passkey_id}'s sign count", tx)
        return CounterAlarm.of({**values, "id": alarm_id})

    def counter_alarms(self, *, limit: int = 100) -> builtins.list[CounterAlarm]:
        """The latest `limit` sign-count alarms, newest first."""
        q = select(ALARM).order_by(ALARM.c.id.desc()).limit(limit)
        rows = self.db.read("reading passkey alarms", lambda c: c.execute(q).all())
        return [CounterAlarm.of(r._mapping) for r in rows]

    def open_session(self, passkey_id: int, *, now: datetime | None = None) -> str:
        """A new session token for a browser that signed in with `passkey_id`."""
        now = now_or_utcnow(now)
        token = secrets.token_urlsafe(32)
        values = {
            "token_hash": token_hash(token),
            "passkey_id": passkey_id,
            "created_at": now,
            "expires_at": now + timedelta(hours=SESSION_HOURS),
        }

        def tx(conn: Connection, heads: Heads) -> None:
            conn.execute(delete(SESSION).where(SESSION.c.expires_at <= now))
            conn.execute(insert(SESSION).values(**values))

        self.db.write("opening a web session", tx)
        return token

    def session_passkey(self, token: str, *, now: datetime | None = None) -> PasskeyRecord | None:
        """The unrevoked passkey of the unexpired session `token`, or None."""
        now = now_or_utcnow(now)
        q = (
            select(PASSKEY)
            .join(SESSION, SESSION.c.passkey_id == K.id)
            .where(
                SESSION.c.token_hash == token_hash(token),
                SESSION.c.expires_at > now,
                K.revoked_at.is_(None),
            )
        )
        row = self.db.read("reading a web session", lambda c: c.execute(q).first())
        return None if row is None else PasskeyRecord.of(row._mapping)

    def close_session(self, token: str) -> None:
        """End the session `token` (signing out); unknown tokens are ignored."""

        def tx(conn: Connection, heads: Heads) -> None:
            conn.execute(delete(SESSION).where(SESSION.c.token_hash == token_hash(token)))

        self.db.write("closing a web session", tx)


class PairingStore(Protocol):
    """What `open_pairing_link` needs of a store (a `Store`)."""

    @property
    def settings(self) -> Settings: ...

    def create_pairing(self, *, now: datetime | None = None) -> str: ...


def open_pairing_link(store: PairingStore, *, now: datetime | None = None) -> str:
    """A new pairing token (`Passkeys.create_pairing`) also recorded in the owner's pins
    file beside `config.toml` (`placet.config.pins`), where the registration ceremony
    looks for it: what `placet web pair` makes. A link made in the database alone
    (`create_pairing`) registers nothing.

    Raises:
        ConfigError: the pins file cannot be read or written (the database's link is
            then left unusable).
    """
    now = now_or_utcnow(now)
    with editing_pins(store.settings.config_file) as pins:
        token = store.create_pairing(now=now)
        pins.open_pairing(token_hash(token), now + timedelta(minutes=PAIRING_MINUTES), now)
    return token


def _check_pairing_row(row: Any, now: datetime) -> None:
    if row is None:
        raise _pairing_refused("is not known (mistyped, or from another placet)")
    if row.used_at is not None:
        raise _pairing_refused("was already used")
    if row.expires_at <= now:
        raise _pairing_refused(f"expired ({PAIRING_MINUTES} minutes after it was made)")
