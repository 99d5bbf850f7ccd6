"""``create_app``: the web lab's FastAPI application around one open ``Lab``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

import agent_lab.interfaces.web.rest as rest
from agent_lab.domain.errors import ConfigError, StoreError
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.web.guards import RateLimit
from agent_lab.interfaces.web.hub import SessionHub
from agent_lab.interfaces.web.masking import Masker
from agent_lab.interfaces.web.options import WebOptions
from agent_lab.interfaces.web.security import HostGuard, NoSniff, RequireToken, check_token
from agent_lab.interfaces.web.sockets import session_socket
from agent_lab.interfaces.web.state import WebState

_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def create_app(lab: Lab, *, token: str | None = None, options: WebOptions | None = None) -> FastAPI:
    """The web lab: the page at ``/``, assets under ``/static``, the REST API under
    ``/api`` and the session WebSocket at ``/ws/sessions/{id}``.

    The ``Lab`` must be open (``async with Lab(...)``) while the app serves; live
    sessions are stopped when the app shuts down (its lifespan), before the lab closes.

    Args:
        lab: The composition root whose store, tools and endpoint the app uses.
        token: When set, ``/api`` calls need ``Authorization: Bearer <token>`` and the
            WebSocket needs it too (see ``security``). It must not be empty.
        options: Buffer sizes, idle timeout, allowed hosts and endpoints, limits (see
            ``WebOptions``).

    Raises:
        ValueError: ``token`` is empty.
    """
    check_token(token)
    options = options or WebOptions()
    hub = SessionHub(lab, options)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await hub.aclose()

    app = FastAPI(
        title="Agent Lab",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    masker = Masker([lab.settings.secret_key()], error_chars=options.error_chars)
    rate = RateLimit(options.rate_burst, options.rate_per_second)
    app.state.web = WebState(
        lab=lab, hub=hub, options=options, token=token, masker=masker, rate=rate
    )
    app.include_router(rest.router, dependencies=[Depends(RequireToken(token))])
    app.add_api_websocket_route("/ws/sessions/{session_id}", session_socket)
    _add_page(app)
    _add_error_handlers(app)
    hosts = options.hosts(token)
    if hosts is not None:
        app.add_middleware(HostGuard, allowed=hosts)
    app.add_middleware(NoSniff)
    return app


def static_dir() -> Path:
    """Where the page's HTML, JavaScript and CSS are installed."""
    return Path(str(resources.files("agent_lab.interfaces.web") / "static"))


def _add_page(app: FastAPI) -> None:
    directory = static_dir()

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(directory / "index.html", headers=_PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=directory), name="static")


def _add_error_handlers(app: FastAPI) -> None:
    masker: Masker = app.state.web.masker

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": list(error.get("loc", ())), "msg": error.get("msg", "")}
            for error in exc.errors()
        ]  # without the ``input`` FastAPI would echo back
        return JSONResponse({"detail": problems}, status_code=422)

    @app.exception_handler(StoreError)
    async def store_failed(_: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"detail": masker.text(f"storage failed: {exc}")}, status_code=503)

    @app.exception_handler(ConfigError)
    async def not_ready(_: Request, exc: ConfigError) -> JSONResponse:
        return JSONResponse({"detail": masker.text(str(exc))}, status_code=503)
