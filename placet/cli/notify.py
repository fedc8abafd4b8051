"""`placet notify`: try the notification channels, read their log, store their secrets.

    placet notify test                  send a test through each configured channel
    placet notify log [--limit N] [--json]   deliveries, newest first, and final failures
    placet notify secret ntfy|webhook [--stdin]   store the ntfy token / webhook secret

Channels are set in `config.toml` under `[notify]` (`placet.config.notify`); secrets live
in the keyring, never in the file.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from datetime import UTC, datetime

from placet.config import load_settings
from placet.config.notify import NTFY_TOKEN_USER, WEBHOOK_SECRET_USER
from placet.errors import EXIT_OK, EXIT_OP_FAILED, UsageError
from placet.text import inert


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `notify` and its subcommands to the `placet` parser."""
    p = subparsers.add_parser("notify", help="notifications: test the channels, read the log")
    sub = p.add_subparsers(dest="notify_command", metavar="SUBCOMMAND", required=True)
    t = sub.add_parser("test", help="send a test notification through each configured channel")
    t.set_defaults(func=cmd_test)
    lg = sub.add_parser("log", help="list deliveries, newest first, with final failures")
    lg.add_argument("--limit", type=int, default=50, help="show at most this many (default 50)")
    lg.add_argument("--json", action="store_true", help="one JSON object per delivery")
    lg.set_defaults(func=cmd_log)
    s = sub.add_parser("secret", help="store the ntfy token or the webhook secret in the keyring")
    s.add_argument("channel", choices=("ntfy", "webhook"), help="whose secret")
    s.add_argument("--stdin", action="store_true", help="read it from stdin, not a prompt")
    s.set_defaults(func=cmd_secret)


def cmd_test(args: argparse.Namespace) -> int:
    from placet.notify import channels as ch
    from placet.notify.content import test_message
    from placet.store.outbox import new_uid

    settings = load_settings()
    n = settings.notify
    configured = n.channels()
    if not configured:
        print("no notification channels configured: add [notify] to " + str(settings.config_file))
        return EXIT_OK
    built = ch.build(n)
    content = test_message(datetime.now(UTC))
    delivery = new_uid()  # one id for this test on every channel, never an earlier one's
    failed = False
    for name in configured:
        channel = built.get(name)
        if channel is None and name == "desktop":
            print(f"{name}: off: {ch.desktop_available()[1]}")
            continue
        if channel is None:
            failed = True
            print(
                f"{name}: FAILED: no webhook secret in the keyring (or the keyring cannot be "
                "read): run `placet notify secret webhook`"
            )
            continue
        try:
            channel.send(delivery, content)
        except ch.DeliveryFailed as e:
            failed = True
            print(f"{name}: FAILED: {inert(e.message)}")
            continue
        print(f"{name}: sent")
    return EXIT_OP_FAILED if failed else EXIT_OK


def _ts(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%SZ")


def cmd_log(args: argparse.Namespace) -> int:
    from placet.store import open_store
    from placet.store.outbox import Outbox

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: give a positive number")
    settings = load_settings()
    with open_store(settings) as store:
        rows = Outbox(store.engine, db_label=str(settings.db_path)).log(limit=args.limit)
    if args.json:
        for r in rows:
            print(
                json.dumps(
                    {
                        "delivery": r.delivery_id,
                        "uid": r.uid,
                        "message": r.message_id,
                        "channel": r.channel,
                        "state": r.state,
                        "attempts": r.attempts,
                        "title": r.title,
                        "created_at": r.created_at.isoformat(),
                        "sent_at": r.sent_at.isoformat() if r.sent_at else None,
                        "next_at": r.next_at.isoformat(),
                        "last_error": r.last_error,
                    },
                    ensure_ascii=True,
                    sort_keys=True,
                )
            )
        return EXIT_OK
    if not rows:
        print("no notifications sent yet")
        return EXIT_OK
    print(f"{'ID':>6}  {'CHANNEL':<8} {'STATE':<8} {'TRIES':>5}  {'MADE':<20} {'SENT':<20} TITLE")
    for r in rows:
        print(
            f"{r.delivery_id:>6}  {r.channel:<8} {r.state:<8} {r.attempts:>5}  "
            f"{_ts(r.created_at):<20} {_ts(r.sent_at):<20} {inert(r.title)}"
        )
        if r.last_error and r.state != "sent":
            when = f" (next try {_ts(r.next_at)})" if r.state == "pending" else ""
            print(f"{'':>6}  {r.state}: {inert(r.last_error)}{when}")
    return EXIT_OK


def cmd_secret(args: argparse.Namespace) -> int:
    from placet.notify.channels import store_secret

    user = NTFY_TOKEN_USER if args.channel == "ntfy" else WEBHOOK_SECRET_USER
    what = "ntfy access token" if args.channel == "ntfy" else "webhook HMAC secret"
    read = sys.stdin.readline if args.stdin else lambda: getpass.getpass(f"{what}: ")
    value = read().rstrip("\r\n")
    if not value:
        raise UsageError(f"no {what} given; nothing stored")
    store_secret(user, value)
    print(f"stored the {what} in the keyring (service placet, user {user})")
    return EXIT_OK
