"""The session viewer: a static single-page app at `/ui/` (and `/` redirects there).

The page holds no secret of its own: the user types an API key, which stays in the tab's
`sessionStorage` and goes out only in `Authorization` headers; the websocket gets a single-use
ticket instead (`POST /v1/sessions/ws-ticket`). Only the files shipped in
`orchestrator/api/web/static/` are served, by name (no path from the request reaches the file
system), with a content security policy that allows nothing but this origin.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from orchestrator.errors import NotFound

router = APIRouter(include_in_schema=False)
STATIC = Path(__file__).resolve().parent.parent / "web" / "static"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _files() -> dict[str, tuple[bytes, str]]:
    """Every servable file, read once: name -> (body, media type)."""
    return {
        path.name: (path.read_bytes(), _TYPES[path.suffix])
        for path in sorted(STATIC.iterdir())
        if path.is_file() and not path.is_symlink() and path.suffix in _TYPES
    }


FILES = _files()


def _serve(name: str) -> Response:
    found = FILES.get(name)
    if found is None:
        raise NotFound(f"no such page file {name!r}")
    body, media_type = found
    return Response(body, media_type=media_type, headers=SECURITY_HEADERS)


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui")
async def ui_bare() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
async def index() -> Response:
    return _serve("index.html")


@router.get("/ui/{name}")
async def static_file(name: str) -> Response:
    return _serve(name)
