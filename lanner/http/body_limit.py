"""The request body limit (``LANNER_MAX_BODY_BYTES``): a larger body is answered 413 before it is parsed.

Why a middleware and not a check in each route: every JSON body is read whole into memory and parsed before a
route sees it, so the limit must act while it is read. A declared ``Content-Length`` over the limit is refused
before a byte is read; a chunked body (no length) is counted as it streams and refused once it passes the
limit; a body with a declared length is read to that length by the server, so only chunked bodies are counted.
Paths under an exempt prefix (the signed upload PUT, which streams files to disk under its own limit)
are passed through untouched, and paths matching an override get that override's limit instead (shared inference
takes images under ``LANNER_INFERENCE_MAX_BYTES``). Ground floor: it knows no domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The signed upload PUT (``lanner.uploads.router``) streams files of up to LANNER_MAX_UPLOAD_BYTES to disk.
SIGNED_UPLOAD_PREFIX = "/api/storage/uploads/"


@dataclass(frozen=True)
class Override:
    """Paths matching ``pattern`` (a regular expression, from the start of the path) may send ``max_bytes``; the
    refusal names ``setting``."""

    pattern: str
    max_bytes: int
    setting: str


def install(app: FastAPI, *, max_bytes: int, overrides: tuple[Override, ...] = ()) -> None:
    app.add_middleware(BodyLimit, max_bytes=max_bytes, exempt_prefixes=(SIGNED_UPLOAD_PREFIX,), overrides=overrides)


class RequestTooLarge(HTTPException):
    """Raised while the body streams in; FastAPI passes an ``HTTPException`` from its body reader on as it is,
    and ``handlers`` renders it with this ``code``."""

    code = "body_too_large"

    def __init__(self, max_bytes: int, setting: str = "LANNER_MAX_BODY_BYTES") -> None:
        super().__init__(413, f"request body is larger than {max_bytes} bytes ({setting})")


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, exempt_prefixes: tuple[str, ...] = (),
                 overrides: tuple[Override, ...] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.exempt_prefixes = exempt_prefixes
        self.overrides = [(re.compile(o.pattern), o.max_bytes, o.setting) for o in overrides]
        self.smallest = min([max_bytes, *(o.max_bytes for o in overrides)])

    def _limit(self, path: str) -> tuple[int, str]:
        for pattern, max_bytes, setting in self.overrides:
            if pattern.match(path):
                return max_bytes, setting
        return self.max_bytes, "LANNER_MAX_BODY_BYTES"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt_prefixes):
            await self.app(scope, receive, send)
            return
        declared, chunked = _framing(scope)
        if declared is not None and not chunked and declared <= self.smallest:
            # Within every path's limit (a trainer's event, a page's form): no path to look up, nothing to count.
            await self.app(scope, receive, send)
            return
        max_bytes, setting = self._limit(scope["path"])
        if declared is not None and declared > max_bytes:
            error = RequestTooLarge(max_bytes, setting)
            response = JSONResponse({"error": error.detail, "code": error.code}, status_code=413,
                                    headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        if declared is not None and not chunked:
            # The server reads exactly the declared length (the rest would be the next request): nothing to count.
            await self.app(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise RequestTooLarge(max_bytes, setting)
            return message

        await self.app(scope, counted, send)


def _framing(scope: Scope) -> tuple[int | None, bool]:
    """The declared Content-Length (None when absent or malformed: the server refuses a malformed one, and
    counting still applies) and whether a Transfer-Encoding is sent too (then the length is not the framing)."""
    declared, chunked = None, False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = None
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked
