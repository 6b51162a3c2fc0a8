"""The web chat page: `/` serves static/index.html, `/static/*` its script and style.

Plain files, no build step. Every answer carries a strict Content-Security-Policy
(scripts and styles from this origin only, no inline code): the page builds the
DOM from model and graph text with textContent, and the policy is a second wall.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

STATIC_DIR = Path(__file__).with_name("static")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


async def index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


class SecureStaticFiles(StaticFiles):
    """StaticFiles with the page's security headers on every answer."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


routes = [
    Route("/", index, methods=["GET", "HEAD"]),
    Mount("/static", SecureStaticFiles(directory=STATIC_DIR), name="static"),
]
