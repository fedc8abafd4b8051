"""What `placet doctor` and `placet notify test` say about the notification channels.

`channel_checks` returns one (name, status, text, fix) per configured channel, status
``ok``, ``warn`` or ``FAIL`` as in `placet doctor`: a webhook without its secret in the
keyring fails (nothing could be signed), and so does an ntfy token that would be sent in
clear (`token_in_clear`) unless `allow_insecure_token` (then ``warn``); a desktop
channel without a session bus is ``warn`` ("off"); and deliveries that failed for good
are counted from the database (opened read-only; a database without the outbox yet
counts none).
"""

from __future__ import annotations

import sqlite3
from urllib.parse import urlsplit

from placet.config import Settings
from placet.config.notify import NTFY_TOKEN_USER, WEBHOOK_SECRET_USER
from placet.errors import ConfigError
from placet.notify.channels import (
    desktop_available,
    read_secret,
    refusal_in_clear,
    token_in_clear,
)

CheckRow = tuple[str, str, str, str]


def _host(url: str) -> str:
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


def _secret(user: str) -> tuple[bool | None, str]:
    try:
        return read_secret(user) is not None, ""
    except ConfigError as e:
        return None, e.message


def failed_count(settings: Settings) -> int:
    """Deliveries recorded as failed for good (0 when there is no database or outbox)."""
    if not settings.db_path.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT count(*) FROM notify_delivery WHERE state = 'failed'")
            return int(row.fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def channel_checks(settings: Settings, env: dict[str, str] | None = None) -> list[CheckRow]:
    """The `placet doctor` lines for `[notify]` (module docstring)."""
    n = settings.notify
    out: list[CheckRow] = []
    if n.ntfy is None and n.webhook is None and n.desktop is None:
        return [("notify", "ok", "no channels configured ([notify] in config.toml)", "")]
    if n.ntfy is not None:
        has, err = _secret(NTFY_TOKEN_USER)
        token = "no token" if has is False else "token in keyring" if has else f"keyring: {err}"
        shown = f"{_host(n.ntfy.url)} (topic hidden; {token}; detail {n.detail})"
        clear = token_in_clear(n.ntfy.url) if has else None
        if clear and not n.ntfy.allow_insecure_token:
            out.append(("notify ntfy", "FAIL", f"{shown}: {refusal_in_clear(clear)}",
                        "use an https:// URL for [notify.ntfy] url"))  # fmt: skip
        elif clear:
            out.append(("notify ntfy", "warn", f"{shown}: the token crosses the network to "
                        f"{clear} in clear (allow_insecure_token = true)",
                        "use an https:// URL"))  # fmt: skip
        else:
            out.append(("notify ntfy", "ok" if has is not None else "warn", shown, ""))
    if n.webhook is not None:
        has, err = _secret(WEBHOOK_SECRET_USER)
        if has:
            out.append(("notify webhook", "ok", f"{_host(n.webhook.url)} (secret in keyring)", ""))
        else:
            out.append(
                (
                    "notify webhook",
                    "FAIL",
                    f"{_host(n.webhook.url)}: no HMAC secret ({err or 'not in the keyring'})",
                    "run `placet notify secret webhook`",
                )
            )
    if n.desktop is not None:
        if not n.desktop.enabled:
            out.append(("notify desktop", "ok", "disabled in config.toml", ""))
        else:
            on, why = desktop_available(env)
            out.append(
                (
                    "notify desktop",
                    "ok" if on else "warn",
                    why,
                    "" if on else "run placet inside a desktop session",
                )
            )
    failed = failed_count(settings)
    if failed:
        out.append(
            (
                "notify log",
                "warn",
                f"{failed} deliveries failed for good",
                "`placet notify log` shows why",
            )
        )
    return out
