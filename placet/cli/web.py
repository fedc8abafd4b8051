"""`placet web`, `placet web pair` and `placet keys`: the review page, pairing a passkey,
and the owner's passkeys.

`placet web` serves the review page (placet/web) on 127.0.0.1:8765 as
``http://localhost:8765`` (a passkey needs a host name; localhost is a secure context).
Any other listen address needs TLS (``--cert`` and ``--key``, and ``--name`` for the
name the certificate is for), else it is refused (``insecure_listen``). `placet web
pair` prints a one-time pairing link valid 10 minutes (and its QR code on a terminal);
opening it registers that device's passkey. `placet keys` lists the passkeys and
`placet keys revoke ID` revokes one (docs/design.md section 12). Starlette and uvicorn
are imported only when the page is served.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from placet.config import load_settings
from placet.errors import EXIT_OK, UsageError
from placet.store import open_store
from placet.store.passkeys import PAIRING_MINUTES

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

    k = subparsers.add_parser("keys", help="list the passkeys that may approve, or revoke one")
    k.add_argument("--json", action="store_true", help="one JSON object per passkey")
    k.add_argument("--all", action="store_true", help="include revoked passkeys")
    ksub = k.add_subparsers(dest="keys_command", metavar="COMMAND")
    rv = ksub.add_parser("revoke", help="revoke a passkey: it signs in and approves no more")
    rv.add_argument("id", type=int, help="the passkey id (see `placet keys`)")
    rv.set_defaults(func=cmd_revoke)
    k.set_defaults(func=cmd_keys)


def cmd_web(args: argparse.Namespace) -> int:
    from placet.web import WebConfig, check_listen, serve

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
        print(f"placet web: {config.origin}/", flush=True)
        if not keys:
            print("no passkey is registered yet: run `placet web pair` to register one")
        serve(store, settings, config, cert=args.cert, key=args.key)
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
        token = store.create_pairing()
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


def cmd_keys(args: argparse.Namespace) -> int:
    settings = load_settings()
    with open_store(settings) as store:
        keys = store.passkeys(include_revoked=args.all)
    if args.json:
        for k in keys:
            print(json.dumps(k.to_dict(), sort_keys=True))
        return EXIT_OK
    if not keys:
        print("no passkeys: run `placet web pair` to register one")
    for k in keys:
        used = k.last_used_at.isoformat(timespec="seconds") if k.last_used_at else "never"
        revoked = f"  REVOKED {k.revoked_at.isoformat(timespec='seconds')}" if k.revoked_at else ""
        print(
            f"{k.id}  {json.dumps(k.name)}  added {k.created_at.isoformat(timespec='seconds')}"
            f"  last used {used}  signatures {k.sign_count}{revoked}"
        )
    return EXIT_OK


def cmd_revoke(args: argparse.Namespace) -> int:
    settings = load_settings()
    with open_store(settings) as store:
        k = store.revoke_passkey(args.id)
    print(f"passkey {k.id} {json.dumps(k.name)} revoked; its sessions ended")
    return EXIT_OK
