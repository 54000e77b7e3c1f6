"""Turn every failure into the hosted platform's error shape: ``{"error": "<message>", "code": "..."}``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from lanner.errors import LannerError

log = logging.getLogger("lanner")


def _location(loc: tuple) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def describe_errors(errors: Sequence[Any], *, limit: int = 5, within: str | None = None) -> str:
    """Pydantic's errors as one line for a person: ``field.path: what is wrong``; ``within`` names the object
    the paths are inside (a webhook's ``data``). Used for request bodies and for payloads checked later."""
    messages = []
    for err in list(errors)[:limit]:
        if err.get("type") == "json_invalid":
            messages.append("request body is not valid JSON")
            continue
        where = _location(tuple(err.get("loc", ())))
        if within:
            where = within if where == "body" else f"{within}.{where}"
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")  # our validators' own words
        messages.append(f"{where}: {message}")
    return "; ".join(messages)


def describe_validation(exc: RequestValidationError) -> str:
    return describe_errors(exc.errors())


async def lanner_error(_: Request, exc: LannerError) -> JSONResponse:
    return JSONResponse({"error": exc.message, "code": exc.code, **exc.extra}, status_code=exc.status_code,
                        headers=exc.headers or None)


async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    if exc.status_code == 404 and message == "Not Found":
        message = "not found"
    code = getattr(exc, "code", "http_error")  # body_limit.RequestTooLarge names its own
    return JSONResponse({"error": message, "code": code}, status_code=exc.status_code)


async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse({"error": describe_validation(exc), "code": "invalid"}, status_code=422)


def install(app: FastAPI) -> None:
    """The JSON error handlers (``lanner.web.site`` wraps the first three: a page a browser opened gets HTML)."""
    app.add_exception_handler(LannerError, lanner_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse({"error": "internal server error", "code": "internal"}, status_code=500)

    @app.exception_handler(DataError)
    async def _data(request: Request, exc: DataError) -> JSONResponse:
        # PostgreSQL cannot hold a NUL character in text (SQLite can): any string a request carries may reach a
        # query, so the refusal is made here, once, rather than in every schema and path parameter.
        if "NUL" in str(exc.orig):
            return JSONResponse({"error": "text must not contain the NUL character (\\u0000)", "code": "invalid"},
                                status_code=422)
        return await _unexpected(request, exc)
