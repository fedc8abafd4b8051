"""The passkey routes of `placet web`: pairing a passkey (registration), signing in and
out, and accepting one proposal with a passkey's assertion; each ceremony is checked by
`Ceremonies` (`placet.web.ceremonies`), every accept decided by `placet.decisions`.

The accept is asked in two steps: the challenge, given only once every refusal the
accept would meet was checked (`decisions.check`), binds the proposal as the page showed
it, its host and drive and the unticked ops; the answer is checked again before the
assertion is verified, since verifying spends its sign count. Sign-in and pairing answer
the session token in their JSON, for placet's own script only (`placet.web.session`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from placet import decisions
from placet.decisions import Accepted, Proof, Shown
from placet.errors import PlacetError, PolicyRefused, UsageError
from placet.store.decisions import changed_since_shown, moved_since_shown
from placet.store.passkeys import PasskeyRecord, token_hash
from placet.web import pages
from placet.web.endpoints import html, json_body, not_signed_in, refused_json, signed_json
from placet.web.state import WebState, web_state

__all__ = ["ROUTES", "web_proof"]


def web_proof(request: Request, key: PasskeyRecord, kept: dict[str, Any], nonce: object) -> Proof:
    """The proof of an approval made on the page: the verified assertion as the audit
    keeps it (`Ceremonies.verify_assertion`) with its nonce, the passkey and the client."""
    return Proof.web(
        {**kept, "nonce": nonce},
        passkey_id=key.id,
        passkey_name=key.name,
        client=request.client.host if request.client else None,
        user_agent=request.headers.get("user-agent", ""),
    )


Ceremony = Callable[[WebState, dict[str, Any]], tuple[PasskeyRecord, dict[str, Any]]]
"""A ceremony that opens a session: the passkey it proves and the JSON to answer."""


async def _open_session(request: Request, refused: int, ceremony: Ceremony) -> Response:
    """Run `ceremony` on the request's JSON body and sign the browser in as the passkey
    it proves; a refusal answers status `refused`."""
    web = web_state(request)
    try:
        body = await json_body(request)
        answer = await web.off_loop(_signed_in_as, ceremony, body)
    except PlacetError as e:
        return refused_json(e, refused)
    return JSONResponse(answer)


def _signed_in_as(web: WebState, ceremony: Ceremony, body: dict[str, Any]) -> dict[str, Any]:
    key, answer = ceremony(web, body)
    # the token goes to placet's own script only (`placet.web.session`)
    return {**answer, "session": web.store.open_session(key.id, now=web.clock())}


async def pair_page(request: Request) -> Response:
    """The page that registers a passkey with the pairing link `placet web pair` made."""
    web, token = web_state(request), request.path_params["token"]
    try:
        await web.off_loop(lambda web: web.ceremonies.check_pairing(token))
    except PlacetError as e:
        return html(pages.pair_page(token, e), 410)
    return html(pages.pair_page(token, None))


async def pair_options(request: Request) -> Response:
    web, token = web_state(request), request.path_params["token"]
    try:
        options = await web.off_loop(lambda web: web.ceremonies.registration_options(token))
        return JSONResponse(options)
    except PlacetError as e:
        return refused_json(e, 410)


async def pair(request: Request) -> Response:
    """Register the passkey answering the pairing link's challenge, and sign in as it."""
    token = request.path_params["token"]

    def registration(web: WebState, body: dict[str, Any]) -> tuple[PasskeyRecord, dict[str, Any]]:
        key = web.ceremonies.register(token, body)
        return key, {"ok": True, "passkey_id": key.id}

    return await _open_session(request, 410, registration)


async def signin_options(request: Request) -> Response:
    """The options of a sign-in assertion; a refusal (a pins file that cannot be read:
    ``config_error``) as JSON."""
    web = web_state(request)
    try:
        return JSONResponse(await web.off_loop(lambda web: web.ceremonies.signin_options()))
    except PlacetError as e:
        return refused_json(e)


async def signin(request: Request) -> Response:
    """Sign in as the registered, pinned passkey whose assertion answers a sign-in
    challenge."""
    return await _open_session(request, 403, _signin_assertion)


def _signin_assertion(web: WebState, body: dict[str, Any]) -> tuple[PasskeyRecord, dict[str, Any]]:
    issued = web.challenges.take(body.get("nonce"), "signin")
    key, _ = web.ceremonies.verify_assertion(issued, body.get("credential"), "signing in")
    return key, {"ok": True}


async def signout(request: Request) -> Response:
    web = web_state(request)
    if not await web.off_loop(_sign_out, request):
        return html(pages.refusal_page(not_signed_in()), 403)
    return RedirectResponse("/", status_code=303)


def _sign_out(web: WebState, request: Request) -> bool:
    session = web.session(request)
    if session is not None:
        web.store.close_session(session[0])
    return session is not None


async def accept_options(request: Request) -> Response:
    """The assertion options for accepting the proposal as the page showed it (its
    ``request_hash``, the unticked ``skip_ops``); every refusal is given first."""
    return await signed_json(request, accept_challenge_for, int(request.path_params["pid"]))


def accept_challenge_for(
    web: WebState, token: str, body: dict[str, Any], pid: int
) -> dict[str, Any]:
    shown = body.get("request_hash")
    record = web.store.get(pid)
    if shown != record.request_hash:
        raise changed_since_shown(pid, record.request_hash, shown)
    skip = _skip_ops(body.get("skip_ops"))
    web.runs.warm_up(record)  # rcd starts while the ops are checked and the owner signs
    # every refusal (the selection's included) before the passkey is asked; the plan
    # read here is what the accept runs
    try:
        checked = decisions.check(
            web.store, web.settings, Shown.of(record, skip), now=web.clock(), signed=True
        )
        web.runs.keep_plan(pid, checked.plan)
        return web.ceremonies.accept_options(token_hash(token), record, skip)
    except BaseException:
        web.runs.cool(pid)
        raise


async def accept(request: Request) -> Response:
    """Accept the proposal with the assertion answering its challenge, as that challenge
    bound it, and start its run here when this host runs it."""
    return await signed_json(request, accept_signed, int(request.path_params["pid"]), request)


def accept_signed(
    web: WebState, token: str, body: dict[str, Any], pid: int, request: Request
) -> dict[str, Any]:
    warm = web.runs.take_warm(pid)  # warmed for the challenge: its run's, else closed
    try:
        accepted = _accepted(web, token, body, pid, request)
    except BaseException:
        warm.close()
        raise
    if accepted.runs_here:  # else its own host's placet runs it (`placet.store.host`)
        web.runs.start(accepted, warm)
    else:
        warm.close()
    return {"ok": True, "status": "approved", "waiting": accepted.waiting}


def _accepted(
    web: WebState, token: str, body: dict[str, Any], pid: int, request: Request
) -> Accepted:
    """Proposal `pid` accepted with the assertion answering its challenge, as bound."""
    issued = web.challenges.take(body.get("nonce"), "accept")
    if issued.proposal_id != pid or issued.session != token_hash(token):
        raise PolicyRefused(
            f"refusing to accept proposal {pid}: the passkey answer was made for "
            f"another request (proposal {issued.proposal_id}); nothing was approved",
            code="challenge_invalid",
            details={"proposal_id": pid},
        )
    assert issued.request_hash is not None
    record = web.store.get(pid)
    if (record.host_id, record.drive_spec) != (
        issued.bound.get("host_id"),
        issued.bound.get("drive_spec"),
    ):
        raise moved_since_shown(pid)
    plan = web.runs.take_plan(pid)  # as the challenge read and checked it
    shown = Shown(pid, issued.request_hash, record.status, frozenset(issued.skip_ops), plan)
    # every refusal before the assertion is verified (its sign count is then spent)
    checked = decisions.check(web.store, web.settings, shown, now=web.clock(), signed=True)
    key, kept = web.ceremonies.verify_assertion(
        issued, body.get("credential"), f"refusing to accept proposal {pid}"
    )
    proof = web_proof(request, key, kept, body["nonce"])
    shown = Shown(pid, shown.request_hash, shown.status, shown.skip_ops, checked.plan)
    [accepted] = decisions.accept(web.store, web.settings, [shown], proof, now=web.clock())
    return accepted


def _skip_ops(value: object) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise UsageError("skip_ops must be a list of op indexes", code="skip_invalid")
    return sorted(set(value))


ROUTES = [
    Route("/p/{pid:int}/challenge", accept_options, methods=["POST"]),
    Route("/p/{pid:int}/accept", accept, methods=["POST"]),
    Route("/signin/options", signin_options, methods=["POST"]),
    Route("/signin", signin, methods=["POST"]),
    Route("/signout", signout, methods=["POST"]),
    Route("/pair/{token}", pair_page),
    Route("/pair/{token}/options", pair_options, methods=["POST"]),
    Route("/pair/{token}", pair, methods=["POST"]),
]
