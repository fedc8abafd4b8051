"""The `[notify]` table of `config.toml`: which channels tell the owner that proposals wait.

```toml
[notify]
detail = "full"          # or "minimal": no path, no name in any message
[notify.ntfy]
url = "https://ntfy.example.org/placet-owner"   # priority, click optional
# allow_insecure_token = true   # send the token over http:// to a host not loopback
[notify.webhook]
url = "https://bridge.example.org/placet"   # [notify.desktop] enabled = true: desktop
```

Secrets never live here but in the keyring (`placet notify secret`). Bad values are a
`ConfigError` naming the dotted key."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

NTFY_TOKEN_USER = "notify-ntfy-token"  # noqa: S105 (a keyring user name, not a secret)
WEBHOOK_SECRET_USER = "notify-webhook-secret"  # noqa: S105
CHANNEL_NAMES = ("ntfy", "webhook", "desktop")


def _http_url(value: str, *, need_path: bool) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ValueError("must not hold a user or password (secrets go in the keyring)")
    if need_path and not parts.path.strip("/"):
        raise ValueError("must name the topic, e.g. https://ntfy.sh/my-placet-topic")
    return value


class NtfyChannel(BaseModel):
    """An ntfy topic (self-hosted or public); the token, if any, is in the keyring.

    `allow_insecure_token`: send the token even over plain `http://` to a host that is
    not loopback, where anyone on the path can read it (refused otherwise:
    `placet.notify.channels.token_in_clear`).
    """

    model_config = ConfigDict(extra="forbid")
    url: str
    priority: int = Field(4, ge=1, le=5)
    click: str | None = None
    allow_insecure_token: bool = False

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, need_path=True)

    @field_validator("click")
    @classmethod
    def _click(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value, need_path=False)


class WebhookChannel(BaseModel):
    """A URL that receives a signed JSON POST; the HMAC secret is in the keyring."""

    model_config = ConfigDict(extra="forbid")
    url: str

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value, need_path=False)


class DesktopChannel(BaseModel):
    """The desktop's notifications (freedesktop over D-Bus, or macOS)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True


class NotifySettings(BaseModel):
    """`[notify]`: channels (none by default) and how messages are made.

    `burst_quiet_s` / `burst_window_s`: proposals of one `placet serve` session coalesce
    into one message until the session has been quiet for `burst_quiet_s` seconds, or at
    most `burst_window_s` after the first (docs/decisions/0031-notifications.md).
    """

    model_config = ConfigDict(extra="forbid")
    detail: Literal["full", "minimal"] = "full"
    burst_quiet_s: float = Field(0.3, gt=0, le=60)
    burst_window_s: float = Field(2.0, gt=0, le=600)
    ntfy: NtfyChannel | None = None
    webhook: WebhookChannel | None = None
    desktop: DesktopChannel | None = None

    def channels(self) -> tuple[str, ...]:
        """Names of the configured channels, in `CHANNEL_NAMES` order."""
        on = {
            "ntfy": self.ntfy is not None,
            "webhook": self.webhook is not None,
            "desktop": self.desktop is not None and self.desktop.enabled,
        }
        return tuple(n for n in CHANNEL_NAMES if on[n])
