"""ntfy takes a message of at most 4,096 bytes: placet cuts its text to fit, counted in
UTF-8 bytes (names in Japanese or emoji take 3 or 4 bytes a character) and cut between
characters, with an ellipsis. The webhook, which has no such limit, gets the whole text.
A real listener on 127.0.0.1 receives both."""

from __future__ import annotations

import pytest

from placet.notify import channels as ch
from placet.notify.sender import Sender
from placet.store import Store
from tests.support.notify import Clock, Listener, propose

NTFY_LIMIT = 4096
"""ntfy's limit on a message, in bytes (its documentation)."""
NAME = "é日本" + "🗂" * 100  # 2-, 3- and 4-byte characters


def test_a_long_non_ascii_message_is_cut_to_ntfys_limit(
    notify_store: Store, listener: Listener
) -> None:
    clock = Clock()
    n = notify_store.settings.notify
    assert n.ntfy is not None and n.webhook is not None
    channels: dict[str, ch.Channel] = {
        "ntfy": ch.Ntfy(n.ntfy.url, n.ntfy.priority, None, None),
        "webhook": ch.Webhook(n.webhook.url, "secret"),
    }
    sender = Sender(notify_store.settings, notify_store, channels=channels, clock=clock)
    for i in range(12):
        propose(notify_store, f"{i}{NAME}", at=clock(), label=f"エージェント{i}" + "🤖" * 40)
    clock.advance(1)
    assert sender.tick() == 2
    full = listener.on("/hook")[0].json()["body"]
    assert len(full.encode()) > NTFY_LIMIT  # the case: more than ntfy takes
    message = listener.on("/")[0].json()["message"]
    assert len(message.encode()) <= NTFY_LIMIT
    assert len(message.encode()) > NTFY_LIMIT - 8  # cut at the limit, not before
    assert message.endswith("\u2026") and full.startswith(message[:-1])
    assert "\ufffd" not in message  # no character cut in two


@pytest.mark.parametrize(
    ("text", "limit", "want"),
    [
        ("abc", 3, "abc"),
        ("abcd", 3, "\u2026"),  # the ellipsis alone takes 3 bytes
        ("abcdef", 5, "ab\u2026"),
        ("日本語", 9, "日本語"),
        ("日本語", 8, "日\u2026"),  # 日 (3) + … (3); 本 would need 3 more
        ("é🗂xyzw", 7, "é\u2026"),  # 🗂 (4 bytes) does not fit beside é (2) and … (3)
        ("é🗂xyzw", 9, "é🗂\u2026"),
    ],
)
def test_fit_utf8_cuts_between_characters(text: str, limit: int, want: str) -> None:
    from placet.text import fit_utf8

    got = fit_utf8(text, limit)
    assert got == want and len(got.encode()) <= limit
