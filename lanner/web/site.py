"""What the web pages add to the app besides their routers (``install``, called by ``create_app``): the static
files, the sign-in redirect, and errors as pages where a browser opened a page.

An error on ``/api/...``, from htmx or ``fetch``, or for any client that does not ask for HTML keeps the API's
JSON shape (``lanner.http.handlers``); ``static/lanner.js`` shows its ``error`` in the page's message area."""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from lanner.errors import LannerError
from lanner.http import handlers
from lanner.web.templating import STATIC_DIR, SignInRequired, render, sign_in_url

HTTP_TITLES = {400: "Bad request", 401: "Sign-in needed", 403: "Not allowed", 404: "Not found", 405: "Not allowed",
               409: "Conflict", 413: "Too large", 422: "Not accepted", 429: "Too many requests"}


class VersionedStaticFiles(StaticFiles):
    """A URL with ``?v=<content hash>`` (``static_url``) never changes content: browsers keep it a year. Without
    it, they revalidate (ETag) each time."""

    def file_response(self, full_path: Any, stat_result: os.stat_result, scope: Scope,
                      status_code: int = 200) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        versioned = b"v=" in scope.get("query_string", b"")
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable" if versioned else "no-cache"
        return response


def wants_page(request: Request) -> bool:
    """A browser navigating or posting a form (not the API, htmx or a script): it should see a page."""
    return (not request.url.path.startswith(("/api/", "/static/")) and request.headers.get("hx-request") != "true"
            and "text/html" in request.headers.get("accept", ""))


def _error_page(request: Request, status: int, message: str) -> Response:
    """The page shows no navigation: finding out who is asking costs database work an error should not do."""
    return render(request, "error.html", {"status": status, "title": HTTP_TITLES.get(status, "Something went wrong"),
                                          "message": message}, status_code=status)


def install(app: FastAPI) -> None:
    app.mount("/static", VersionedStaticFiles(directory=STATIC_DIR), name="static")

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, exc: SignInRequired) -> Response:
        target = sign_in_url(exc.next_url)
        if request.headers.get("hx-request") == "true":
            return Response(status_code=204, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)

    @app.exception_handler(LannerError)
    async def _lanner_error(request: Request, exc: LannerError) -> Response:
        if wants_page(request):
            return _error_page(request, exc.status_code, exc.message)
        return await handlers.lanner_error(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if wants_page(request) and exc.status_code >= 400:
            message = exc.detail if isinstance(exc.detail, str) and exc.detail != "Not Found" else (
                "There is no page at this address.")
            return _error_page(request, exc.status_code, message)
        return await handlers.http_error(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        if wants_page(request):  # a hand-edited address (?page=abc): say what is wrong, as a page
            return _error_page(request, 422, handlers.describe_validation(exc))
        return await handlers.validation_error(request, exc)
