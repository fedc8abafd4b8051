"""The page's one script and one stylesheet, served from the package (`static/`): the CSP
allows no other script or style (`placet.web.guard`). Served to anyone, like any site's
login page: they hold no secret."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

__all__ = ["ROUTES"]

TYPES = {"placet.js": "text/javascript", "placet.css": "text/css"}
"""The files served, with their content types."""


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in TYPES:
        return PlainTextResponse("not found", status_code=404)
    data = resources.files("placet.web").joinpath("static", name).read_bytes()
    return Response(data, media_type=TYPES[name])


ROUTES = [Route("/static/{name}", static)]
