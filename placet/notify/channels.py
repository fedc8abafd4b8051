"""The channels a message goes out through: ntfy, a signed webhook, the desktop.

Each channel's `send(delivery_id, content)` returns once the receiver accepted the
message, else raises `DeliveryFailed` saying whether a retry may help (connection
refused, timeout, HTTP 408/429/5xx) or not (another 4xx: the owner must fix the config).
HTTP goes through `urllib.request`, bounded by `TIMEOUT_S`, no redirects followed. ntfy
gets a JSON publish to the server root, cut to `NTFY_MESSAGE_MAX` bytes at a character
boundary, its token only where it cannot be read on the way (`token_in_clear`); the
webhook a JSON body signed `X-Placet-Signature: t=<unix>,v1=<HMAC of "<t>.<id>." + body>`
with the delivery's random id, the same on every retry, so a receiver can refuse a
replay (README, "Notifications"); the desktop `desktop-notifier`, off without a session
bus (docs/decisions/0031-notifications.md)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from placet.config.notify import (
    NTFY_TOKEN_USER,
    WEBHOOK_SECRET_USER,
    NotifySettings,
)
from placet.errors import ConfigError
from placet.store.outbox_rows import Rendered
from placet.text import fit_utf8

log = logging.getLogger("placet.notify")

TIMEOUT_S = 10.0
NTFY_MESSAGE_MAX = 4096
"""ntfy's limit on a message, in bytes (a longer one becomes an attachment, or is
refused where attachments are off): placet cuts its text to fit, with an ellipsis."""
KEYRING_SERVICE = "placet"
USER_AGENT = "placet-notify/1"


class DeliveryFailed(Exception):
    """A send that did not reach the receiver; `retryable` says whether to try again."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class Channel(Protocol):
    name: str

    def send(self, delivery: str, content: Rendered) -> None: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(sockets: list[socket.socket]) -> urllib.request.OpenerDirector:
    """An opener that follows no redirect and lists the sockets it connects in
    `sockets`, so a deadline can cut them off (`post`)."""

    class Plain(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            sockets.append(self.sock)

    class Tls(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            sockets.append(self.sock)

    class PlainHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Plain, req)

    class TlsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Tls, req)

    return urllib.request.build_opener(_NoRedirect, PlainHandler, TlsHandler)


def _cut(sockets: list[socket.socket], expired: threading.Event) -> None:
    expired.set()
    for sock in list(sockets):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _watch(
    sockets: list[socket.socket],
    expired: threading.Event,
    finished: threading.Event,
    cancel: threading.Event | None,
    timeout: float,
) -> None:
    """Cut `sockets` off once `timeout` s pass or `cancel` is set, unless `finished`."""
    end = time.monotonic() + timeout
    while not finished.wait(min(0.1, max(0.0, end - time.monotonic()))):
        if time.monotonic() >= end or (cancel is not None and cancel.is_set()):
            _cut(sockets, expired)
            return


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float = TIMEOUT_S,
    cancel: threading.Event | None = None,
) -> int:
    """POST `body` to `url`; the HTTP status when 2xx. The whole exchange (connect,
    send, the answer's first 64 KiB) ends within `timeout` s, or about 0.1 s after
    `cancel` is set (the process is stopping): a receiver that answers a byte at a time,
    or not at all, is cut off then. Raises DeliveryFailed (retryable unless the
    receiver answered a 4xx other than 408, 425, 429)."""
    req = urllib.request.Request(  # noqa: S310 (the scheme is checked by the config)
        url, data=body, method="POST", headers={"User-Agent": USER_AGENT, **headers}
    )
    sockets: list[socket.socket] = []
    expired, finished = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=_watch, args=(sockets, expired, finished, cancel, timeout), daemon=True
    )
    watcher.start()
    try:
        with _opener(sockets).open(req, timeout=timeout) as resp:
            resp.read(65536)
            status = int(resp.status)
    except urllib.error.HTTPError as e:
        retry = e.code in (408, 425, 429) or e.code >= 500
        raise DeliveryFailed(f"HTTP {e.code} {e.reason} from {_where(url)}", retryable=retry) from e
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        if expired.is_set():
            why: object = "timed out"
        elif isinstance(e, http.client.HTTPException):  # its text is the receiver's bytes
            why = f"not an HTTP answer ({type(e).__name__})"
        else:
            why = getattr(e, "reason", e)
        raise DeliveryFailed(f"cannot reach {_where(url)}: {why}", retryable=True) from e
    finally:
        finished.set()
    if expired.is_set():  # cut off: the answer read may be truncated, not trusted
        raise DeliveryFailed(f"cannot reach {_where(url)}: timed out", retryable=True)
    return status


def _where(url: str) -> str:
    """`url` without its path (a topic name is a secret of sorts)."""
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, "/", "", ""))


def read_secret(user: str) -> str | None:
    """The keyring's secret for `user` under service ``placet``, or None.

    Raises:
        ConfigError (``no_keyring`` / ``keyring_error``): no usable keyring.
    """
    import keyring
    import keyring.errors

    try:
        value = keyring.get_password(KEYRING_SERVICE, user)
    except keyring.errors.NoKeyringError as e:
        raise ConfigError(
            f"cannot read the {user} secret: no keyring backend is available", code="no_keyring"
        ) from e
    except keyring.errors.KeyringError as e:
        raise ConfigError(
            f"cannot read the {user} secret: the keyring refused ({type(e).__name__})",
            code="keyring_error",
        ) from e
    return value if isinstance(value, str) and value else None


def store_secret(user: str, value: str) -> None:
    """Store `value` for `user` under service ``placet``. Raises ConfigError."""
    import keyring
    import keyring.errors

    try:
        keyring.set_password(KEYRING_SERVICE, user, value)
    except keyring.errors.KeyringError as e:
        raise ConfigError(
            f"cannot store the {user} secret in the keyring ({type(e).__name__}: {e})",
            code="no_keyring" if isinstance(e, keyring.errors.NoKeyringError) else "keyring_error",
        ) from e


def click_url(base: str, payload: dict[str, Any]) -> str:
    """Where tapping a notification leads: `placet web`'s page of the one proposal a
    message is about (``<base>/p/<id>``), else the queue at `base`."""
    listed = payload.get("proposals") or []
    if payload.get("count") == 1 and len(listed) == 1 and isinstance(listed[0].get("id"), int):
        return f"{base.rstrip('/')}/p/{listed[0]['id']}"
    return base


def token_in_clear(url: str) -> str | None:
    """The host a token sent to `url` would cross the network to unencrypted (a plain
    `http://` URL whose host is not loopback: `localhost`, 127.0.0.0/8, ::1), or None."""
    p = urlsplit(url)
    host = (p.hostname or "").rstrip(".")
    if p.scheme != "http" or host == "localhost" or host.endswith(".localhost"):
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass  # a name, not an address
    return host


def refusal_in_clear(host: str) -> str:
    """Why a token is not sent to `host` over plain http, and what to do."""
    return (
        f"refusing to send the ntfy access token to {host} over plain http://: anyone on "
        "the network path could read it; use an https:// URL, or set "
        "allow_insecure_token = true under [notify.ntfy] if that path is trusted"
    )


@dataclass
class Ntfy:
    url: str
    priority: int
    click: str | None
    token: str | None
    name: str = "ntfy"
    cancel: threading.Event | None = None
    """Set when the process stops: a send in flight is cut off (`post`)."""
    allow_insecure_token: bool = False
    """Send the token even where `token_in_clear` finds it would cross in clear."""

    def send(self, delivery: str, content: Rendered) -> None:
        clear = token_in_clear(self.url) if self.token else None
        if clear and not self.allow_insecure_token:
            raise DeliveryFailed(refusal_in_clear(clear), retryable=False)
        p = urlsplit(self.url)
        base, _, topic = p.path.rstrip("/").rpartition("/")
        root = urlunsplit((p.scheme, p.netloc, base + "/", "", ""))
        body: dict[str, Any] = {
            "topic": topic,
            "title": content.title,
            "message": fit_utf8(content.body, NTFY_MESSAGE_MAX),
            # The owner's priority; a failure or interruption is always urgent.
            "priority": 5 if content.priority >= 5 else self.priority,
            "tags": ["placet", str(content.payload.get("tag") or content.payload.get("event"))],
        }
        if self.click:
            body["click"] = click_url(self.click, content.payload)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        post(root, json.dumps(body, ensure_ascii=False).encode(), headers, cancel=self.cancel)


def signature(secret: str, timestamp: int, delivery: str, body: bytes) -> str:
    """The `X-Placet-Signature` value, ``t=<timestamp>,v1=<hex>``: the HMAC-SHA256, with
    `secret`, of ``<timestamp>.<delivery>.`` (ASCII) followed by the exact `body` bytes."""
    signed = f"{timestamp}.{delivery}.".encode() + body
    return f"t={timestamp},v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


@dataclass
class Webhook:
    url: str
    secret: str | None
    name: str = "webhook"
    cancel: threading.Event | None = None
    """Set when the process stops: a send in flight is cut off (`post`)."""

    def send(self, delivery: str, content: Rendered) -> None:
        if not self.secret:
            raise DeliveryFailed(
                "no webhook secret in the keyring: run `placet notify secret webhook`",
                retryable=False,
            )
        body = json.dumps(
            {
                "delivery": delivery,
                "title": content.title,
                "body": content.body,
                "priority": content.priority,
                **content.payload,
            },
            ensure_ascii=False,
            sort_keys=True,
        ).encode()
        post(
            self.url,
            body,
            {
                "Content-Type": "application/json",
                "X-Placet-Signature": signature(self.secret, int(time.time()), delivery, body),
                "X-Placet-Delivery": delivery,
            },
            cancel=self.cancel,
        )


def desktop_available(env: dict[str, str] | None = None) -> tuple[bool, str]:
    """(whether desktop notifications can be shown, why) for this process."""
    env = dict(os.environ) if env is None else env
    if sys.platform in ("darwin", "win32"):
        return True, f"{sys.platform} notifications"
    if env.get("DBUS_SESSION_BUS_ADDRESS"):
        return True, "D-Bus session bus"
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    if Path(runtime, "bus").exists():
        return True, f"D-Bus session bus at {runtime}/bus"
    return False, "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS unset): off"


@dataclass
class Desktop:
    name: str = "desktop"

    def send(self, delivery: str, content: Rendered) -> None:
        try:
            from desktop_notifier import DesktopNotifier
        except ImportError as e:  # pragma: no cover (a declared dependency)
            raise DeliveryFailed(f"desktop-notifier is not installed: {e}", retryable=False) from e

        async def show() -> None:
            await DesktopNotifier(app_name="placet").send(title=content.title, message=content.body)

        try:
            asyncio.run(asyncio.wait_for(show(), TIMEOUT_S))
        except Exception as e:  # the library's errors vary by platform and backend
            raise DeliveryFailed(
                f"the desktop refused the notification: {type(e).__name__}: {e}", retryable=True
            ) from e


def build(
    settings: NotifySettings,
    *,
    env: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Channel]:
    """The channels this process can send through, by name: the configured ones, with
    their secrets read from the keyring; the webhook only when its secret could be read,
    the desktop only when available here. A channel left out here is not claimed by this
    process: another placet process that can send it will (or, after an hour, the
    delivery is recorded as failed). A keyring that cannot be read leaves the ntfy token
    unset. `cancel`: set when the process stops, cutting off the HTTP sends in flight."""
    out: dict[str, Channel] = {}

    def secret(user: str) -> str | None:
        try:
            return read_secret(user)
        except Exception as e:  # a keyring backend may raise anything; never stop placet
            quiet = isinstance(e, ConfigError) and e.error_code == "no_keyring"
            (log.info if quiet else log.warning)("notify: no %s from the keyring: %s", user, e)
            return None

    if settings.ntfy is not None:
        n = settings.ntfy
        out["ntfy"] = Ntfy(
            n.url,
            n.priority,
            n.click,
            secret(NTFY_TOKEN_USER),
            cancel=cancel,
            allow_insecure_token=n.allow_insecure_token,
        )
    if settings.webhook is not None:
        key = secret(WEBHOOK_SECRET_USER)
        if key:  # a process that cannot sign leaves the webhook to one that can
            out["webhook"] = Webhook(settings.webhook.url, key, cancel=cancel)
    if settings.desktop is not None and settings.desktop.enabled and desktop_available(env)[0]:
        out["desktop"] = Desktop()
    return out
