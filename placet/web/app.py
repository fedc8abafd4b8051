"""The `placet web` application: the routes of each resource over one shared `WebState`,
behind the edge's checks (`placet.web.guard`).

The resources: the queue, history and audit pages (`queue`), a proposal and its ops'
content (`proposal`), the passkey ceremonies that pair, sign in and accept (`passkeys`,
checked by `ceremonies`), the accept of a set (`sets`), the queue's live updates
(`changes`), the rules page (`rules_page`) and the script and stylesheet (`assets`).
Deciding goes through `placet.decisions`, as in the review UI and `placet accept`
(docs/decisions/0029-web-passkeys.md). Time comes from `clock`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime

from starlette.applications import Starlette

from placet.config import Settings
from placet.store import Store
from placet.web import assets, changes, passkeys, proposal, queue, rules_page, sets
from placet.web.ceremonies import Ceremonies
from placet.web.changes import QueueChanges
from placet.web.guard import Guard
from placet.web.listen import WebConfig
from placet.web.previews import ContentPages
from placet.web.rules_page import RulesSigning
from placet.web.runs import Runs
from placet.web.state import WebState, utc_now

__all__ = ["create_app"]

ROUTES = [
    *queue.ROUTES,
    *changes.ROUTES,
    *proposal.ROUTES,
    *passkeys.ROUTES,
    *sets.ROUTES,
    *rules_page.ROUTES,
    *assets.ROUTES,
]


def create_app(
    store: Store,
    settings: Settings,
    config: WebConfig,
    *,
    clock: Callable[[], datetime] = utc_now,
    runs: Runs | None = None,
) -> Starlette:
    """The `placet web` ASGI app over `store`. `runs` executes accepted proposals
    (default: `placet.executor.execute` in daemon threads). ``app.state.web`` holds the
    `WebState`; its `changes` (`QueueChanges`, also ``app.state.changes``) starts with
    the app and feeds the queue page's long-poll: call its `release()` before the server
    drains its requests."""
    ceremonies = Ceremonies(store, settings, config.name, config.origin, clock)
    runs = runs if runs is not None else Runs(store, settings)
    web = WebState(
        store=store,
        settings=settings,
        config=config,
        clock=clock,
        runs=runs,
        changes=QueueChanges(store),
        ceremonies=ceremonies,
        contents=ContentPages(store, settings),
        rules=RulesSigning(store, settings, clock),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        web.changes.start(asyncio.get_running_loop())
        try:
            yield
        finally:
            await web.off_loop(WebState.close)

    app = Starlette(routes=ROUTES, lifespan=lifespan)
    app.add_middleware(Guard, config=config)
    app.state.web = web
    app.state.changes = web.changes  # what `placet.web.serve` releases on a signal
    return app
