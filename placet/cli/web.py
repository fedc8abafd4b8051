"""`placet web`, `placet web pair` and `placet keys`: the review page, pairing a passkey,
and the owner's passkeys.

`placet web` serves the review page on 127.0.0.1:8765 as ``http://localhost:8765`` (a
passkey needs a host name); any other address needs TLS (``--cert``, ``--key``,
``--name``), else ``insecure_listen`` (docs/decisions/0029-web-passkeys.md). `placet web
pair` prints a one-time link valid 10 minutes that registers and pins a device's passkey;
`placet keys` lists, pins (after a code typed at the terminal), unpins and revokes them
(docs/design.md section 12). The host's executor loop runs while the page is served;
Starlette and uvicorn are imported only then."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path

from placet.cli.confirming import code_typed, terminal
from placet.config import load_settings
from placet.config.pins import Pins, editing_pins, key_sha256, read_pins
from placet.errors import EXIT_OK, NotFound, PolicyRefused, UsageError
from placet.store import open_store
from placet.store.passkeys import PAIRING_MINUTES, PasskeyRecord, open_pairing_link
from placet.text import quote

DEFAULT_PORT = 8765


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `web` (with `pair`) and `keys` to the `placet` parser."""
    p = subparsers.add_parser(
        "web", help="serve the review page for a phone or browser (passkey sign-in)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8765)")
    p.add_argument("--cert", type=Path, help="TLS certificate (PEM); needed off loopback")
    p.add_argument("--key", type=Path, help="TLS private key (PEM); needed off loopback")
    p.add_argument(
        "--name",
        help="the host name in the page's URL and the passkeys' scope (default localhost; "
        "with TLS, the name the certificate is for)",
    )
    p.set_defaults(func=cmd_web)
    sub = p.add_subparsers(dest="web_command", metavar="COMMAND")
    pair = sub.add_parser(
        "pair",
        help=f"print a one-time link (valid {PAIRING_MINUTES} minutes) to register a passkey",
    )
    pair.add_argument("--port", type=int, default=DEFAULT_PORT, help="the page's port")
    pair.add_argument("--name", default="localhost", help="the page's host name")
    pair.add_argument("--https", action="store_true", help="the page is served with TLS")
    pair.set_defaults(func=cmd_pair)

    k = subparsers.add_parser(
        "keys", help="list the passkeys that may approve, pin, unpin or revoke one"
    )
    k.add_argument("--json", action="store_true", help="one JSON object per passkey")
    k.add_argument("--all", action="store_true", help="include revoked passkeys")
    ksub = k.add_subparsers(dest="keys_command", metavar="COMMAND")
    rv = ksub.add_parser("revoke", help="revoke a passkey: it signs in and approves no more")
    rv.add_argument("id", type=int, help="the passkey id (see `placet keys`)")
    rv.set_defaults(func=cmd_revoke)
    pn = ksub.add_parser(
        "pin",
        help="pin a registered passkey so it may sign (a code typed at the terminal confirms)",
    )
    pn.add_argument("id", type=int, help="the passkey id (see `placet keys`)")
    pn.set_defaults(func=cmd_pin)
    up = ksub.add_parser("unpin", help="unpin a passkey: it signs in and approves no more")
    up.add_argument("id", type=int, help="the passkey id (see `placet keys`)")
    up.set_defaults(func=cmd_unpin)
    k.set_defaults(func=cmd_keys)


def cmd_web(args: argparse.Namespace) -> int:
    from placet.web import WebConfig, bind_listener, check_listen, serve

    tls = args.cert is not None or args.key is not None
    if tls and (args.cert is None or args.key is None):
        raise UsageError("give both --cert and --key for TLS", code="insecure_listen")
    check_listen(args.host, tls=tls)
    if tls:
        _check_certificate(args.cert, args.key)
    config = WebConfig(host=args.host, port=args.port, tls=tls, name=args.name or "localhost")
    settings = load_settings()
    with open_store(settings) as store:
        keys = store.passkeys()
        listener = bind_listener(config.host, config.port)  # port_in_use before the URL
        print(f"placet web: {config.origin}/", flush=True)
        if not keys:
            print("no passkey is registered yet: run `placet web pair` to register one")
        from placet.executor.service import HostLoop

        with HostLoop(store, settings):  # what was approved elsewhere runs here too
            serve(store, settings, config, cert=args.cert, key=args.key, listener=listener)
    return EXIT_OK


def _check_certificate(cert: Path, key: Path) -> None:
    """Load the TLS certificate and key once before serving, so a missing or wrong file
    is named (UsageError ``invalid_argument``) instead of failing inside the server
    after the page's URL was printed."""
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise UsageError(
            f"cannot use --cert {cert} with --key {key} for TLS: "
            f"{getattr(e, 'strerror', None) or e}",
            details={"cert": str(cert), "key": str(key)},
        ) from e


def cmd_pair(args: argparse.Namespace) -> int:
    settings = load_settings()
    with open_store(settings) as store:
        token = open_pairing_link(store)
    scheme = "https" if args.https else "http"
    default = 443 if args.https else 80
    port = "" if args.port == default else f":{args.port}"
    url = f"{scheme}://{args.name}{port}/pair/{token}"
    print(url)
    print(
        f"Open it on the device whose passkey may approve (valid {PAIRING_MINUTES} minutes, "
        "once); `placet web` must be running."
    )
    if sys.stdout.isatty():
        import segno

        segno.make(url, error="m").terminal(out=sys.stdout, compact=True)
    return EXIT_OK


def _pinned(pins: Pins, k: PasskeyRecord) -> bool:
    return pins.problem(k.credential_id, k.public_key, active=True) is None


def cmd_keys(args: argparse.Namespace) -> int:
    settings = load_settings()
    with open_store(settings) as store:
        keys = store.passkeys(include_revoked=args.all)
        alarms = store.counter_alarms(limit=10)
    pins = read_pins(settings.config_file)
    if args.json:
        for k in keys:
            print(json.dumps({**k.to_dict(), "pinned": _pinned(pins, k)}, sort_keys=True))
        return EXIT_OK
    if not keys:
        print("no passkeys: run `placet web pair` to register one")
    for k in keys:
        used = k.last_used_at.isoformat(timespec="seconds") if k.last_used_at else "never"
        revoked = f"  REVOKED {k.revoked_at.isoformat(timespec='seconds')}" if k.revoked_at else ""
        pinned = "pinned" if _pinned(pins, k) else "NOT PINNED (signs nothing)"
        print(
            f"{k.id}  {json.dumps(k.name)}  added {k.created_at.isoformat(timespec='seconds')}"
            f"  last used {used}  signatures {k.sign_count}  {pinned}{revoked}"
        )
    for alarm in alarms:
        print(
            f"WARNING: passkey {alarm.passkey_id} signed with sign count {alarm.new_count} "
            f"after {alarm.stored_count} at {alarm.at.isoformat(timespec='seconds')} "
            f"({alarm.what}): refused; another copy of it may be in use (revoke it with "
            f"`placet keys revoke {alarm.passkey_id}` if you did not expect this)"
        )
    unpinned = [k.id for k in keys if k.revoked_at is None and not _pinned(pins, k)]
    if unpinned:
        print(
            f"passkey(s) {', '.join(map(str, unpinned))} may not sign: if you registered "
            "them, run `placet keys pin ID` at your terminal; if not, `placet keys revoke ID`"
        )
    return EXIT_OK


def cmd_revoke(args: argparse.Namespace) -> int:
    settings = load_settings()
    now = datetime.now(UTC)
    with open_store(settings) as store:
        k = store.revoke_passkey(args.id, now=now)
    with editing_pins(settings.config_file) as pins:
        pins.unpin(k.credential_id, now)
    print(f"passkey {k.id} {json.dumps(k.name)} revoked and unpinned; its sessions ended")
    return EXIT_OK


def _passkey(passkey_id: int, keys: list[PasskeyRecord]) -> PasskeyRecord:
    key = next((k for k in keys if k.id == passkey_id), None)
    if key is None:
        raise NotFound(
            f"there is no passkey {passkey_id}; `placet keys --all` lists them",
            details={"passkey_id": passkey_id},
        )
    return key


def cmd_pin(args: argparse.Namespace) -> int:
    """Pin passkey ID after the owner types a code shown on the controlling terminal
    (never read from stdin: a command without a terminal cannot pin). A revoked passkey
    is pinned as unpinned: `placet audit --verify` then checks what it signed, and it
    signs nothing more.

    Raises:
        NotFound: no such passkey. PolicyRefused: ``no_terminal``,
        ``confirmation_mismatch``, ``pin_conflict`` (the credential is pinned with
        another public key than the database now holds: the database was altered).
    """
    settings = load_settings()
    with open_store(settings) as store:
        key = _passkey(args.id, store.passkeys(include_revoked=True))
    digest = key_sha256(key.public_key)
    pin = read_pins(settings.config_file).pin_of(key.credential_id)
    if pin is not None and not secrets.compare_digest(pin.key_sha256, digest):
        raise PolicyRefused(
            f"refusing to pin passkey {key.id}: its credential is pinned with the public key "
            f"SHA-256 {pin.key_sha256[:16]}..., but the database now holds {digest[:16]}...: "
            "the database was altered; revoke it (`placet keys revoke ID`) and pair again",
            code="pin_conflict",
            details={"passkey_id": key.id},
        )
    if pin is not None and pin.unpinned_at is None:
        print(f"passkey {key.id} {quote(key.name)} is already pinned")
        return EXIT_OK
    with terminal() as tty:
        if tty is None:
            raise PolicyRefused(
                f"refusing to pin passkey {key.id}: there is no terminal to confirm on (the "
                "code is read from /dev/tty, never from stdin); run `placet keys pin ID` in "
                "a terminal",
                code="no_terminal",
            )
        _confirm_pin(tty, key, digest)
    now = datetime.now(UTC)
    with editing_pins(settings.config_file) as pins:
        pins.pin(key.credential_id, key.public_key, key.name, now)
        if key.revoked_at is not None:
            pins.unpin(key.credential_id, now)
    if key.revoked_at is not None:
        print(
            f"passkey {key.id} {quote(key.name)} is revoked: recorded as pinned before, so "
            "`placet audit --verify` checks what it signed; it signs nothing more"
        )
    else:
        print(f"passkey {key.id} {quote(key.name)} pinned: it may sign in and approve")
    return EXIT_OK


def _confirm_pin(tty: int, key: PasskeyRecord, digest: str) -> None:
    """Show the passkey and a fresh code on the terminal, read the code back.

    Raises:
        PolicyRefused (``confirmation_mismatch``): something else was typed.
    """

    def prompt(code: str) -> str:
        return (
            f"\nPasskey {key.id} {quote(key.name)}, registered "
            f"{key.created_at.isoformat(timespec='seconds')}, used "
            f"{key.sign_count} time(s), credential {key.credential_id[:24]}, public key "
            f"SHA-256 {digest[:16]}...\nPin it only if you registered it: it may then sign "
            f"in to placet web and approve; type the code {code} and press Enter (anything "
            "else declines): "
        )

    if not code_typed(tty, prompt):
        raise PolicyRefused(
            f"passkey {key.id} was not pinned: the confirmation code did not match",
            code="confirmation_mismatch",
            details={"passkey_id": key.id},
        )


def cmd_unpin(args: argparse.Namespace) -> int:
    """Unpin passkey ID (it stays registered; `placet keys pin ID` pins it again).

    Raises:
        NotFound: no such passkey, or it is not pinned.
    """
    settings = load_settings()
    with open_store(settings) as store:
        key = _passkey(args.id, store.passkeys(include_revoked=True))
    with editing_pins(settings.config_file) as pins:
        done = pins.unpin(key.credential_id, datetime.now(UTC))
    if not done:
        raise NotFound(
            f"passkey {key.id} is not pinned; `placet keys` lists the pinned ones",
            details={"passkey_id": key.id},
        )
    print(f"passkey {key.id} {quote(key.name)} unpinned: it signs nothing until pinned again")
    return EXIT_OK
