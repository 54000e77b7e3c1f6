"""The request body limit (``LANNER_MAX_BODY_BYTES``): a larger body is answered 413 before it is parsed.

Why a middleware and not a check in each route: every JSON body is read whole into memory and parsed before a
route sees it, so the limit must act while it is read. A declared ``Content-Length`` over the limit is refused
before a byte is read; a chunked body (no length) is counted as it streams and refused once it passes the
limit. Paths under an exempt prefix (the signed upload PUT, which streams files to disk under its own limit)
are passed through untouched. Ground floor: it knows no domain.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The signed upload PUT (``lanner.uploads.router``) streams files of up to LANNER_MAX_UPLOAD_BYTES to disk.
SIGNED_UPLOAD_PREFIX = "/api/storage/uploads/"


def install(app: FastAPI, *, max_bytes: int) -> None:
    app.add_middleware(BodyLimit, max_bytes=max_bytes, exempt_prefixes=(SIGNED_UPLOAD_PREFIX,))


class RequestTooLarge(HTTPException):
    """Raised while the body streams in; FastAPI passes an ``HTTPException`` from its body reader on as it is,
    and ``handlers`` renders it with this ``code``."""

    code = "body_too_large"

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body is larger than {max_bytes} bytes (LANNER_MAX_BODY_BYTES)")


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, exempt_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.exempt_prefixes = exempt_prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt_prefixes):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            error = RequestTooLarge(self.max_bytes)
            response = JSONResponse({"error": error.detail, "code": error.code}, status_code=413,
                                    headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise RequestTooLarge(self.max_bytes)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length; counting still applies
    return None
