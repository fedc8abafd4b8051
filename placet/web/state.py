"""What every `placet web` handler shares, and the one way its work leaves the event loop.

`create_app` builds one `WebState` and keeps it as ``app.state.web``; a handler reaches
it with `web_state(request)`. Store, drive, pins-file and passkey work runs only through
`WebState.off_loop`: the rule the package docstring states (`placet.web`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection, Request

from placet.config import Settings
from placet.store import Store
from placet.store.passkeys import PasskeyRecord
from placet.web.session import session_token

if TYPE_CHECKING:  # the parts import this module for `web_state`
    from placet.web.ceremonies import Ceremonies
    from placet.web.challenges import Challenges
    from placet.web.changes import QueueChanges
    from placet.web.listen import WebConfig
    from placet.web.previews import ContentPages
    from placet.web.rules_page import RulesSigning
    from placet.web.runs import Runs

__all__ = ["WebState", "utc_now", "web_state"]

P = ParamSpec("P")
T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class WebState:
    """The app's shared parts: the store and settings, where it is served (`config`),
    its clock, the executions it starts, the queue's change counter, the passkey
    ceremonies (holding the challenge book), the content pages (holding the drive) and
    the rules page."""

    store: Store
    settings: Settings
    config: WebConfig
    clock: Callable[[], datetime]
    runs: Runs
    changes: QueueChanges
    ceremonies: Ceremonies
    contents: ContentPages
    rules: RulesSigning

    @property
    def challenges(self) -> Challenges:
        """The challenges issued and not yet answered (`placet.web.challenges`)."""
        return self.ceremonies.challenges

    def session(self, request: Request) -> tuple[str, PasskeyRecord] | None:
        """The request's session token and the passkey it signed in with, or None when
        it carries no live session (`placet.web.session`). Reads the store: off the loop."""
        token = session_token(request)
        if token is None:
            return None
        key = self.store.session_passkey(token, now=self.clock())
        return None if key is None else (token, key)

    async def off_loop(
        self, work: Callable[Concatenate[WebState, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`work(self, *args, **kwargs)` in Starlette's thread pool: the one way a handler
        runs store, drive, pins-file or passkey work (each may block on a lock, a disk or
        rclone), so the event loop keeps answering other requests and long-polls."""
        return await run_in_threadpool(work, self, *args, **kwargs)

    def close(self) -> None:
        """Stop the change counter's thread and close the drive the content pages opened."""
        self.changes.close()
        self.contents.close()


def web_state(request: HTTPConnection) -> WebState:
    """The app's `WebState` (``app.state.web``)."""
    web = request.app.state.web
    assert isinstance(web, WebState)
    return web
