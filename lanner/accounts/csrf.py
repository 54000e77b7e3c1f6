"""Cross-site request forgery: a write that a browser sends with the session cookie must prove it came from one
of our pages. Another site can make the browser send the cookie but can read neither the cookie nor our pages.

Double-submit, with ``starlette-csrf``'s signed tokens: the token is in an HttpOnly cookie (``lanner_csrf``) and
the page carries a copy, which a write sends back as

- the ``X-CSRFToken`` header: htmx and ``fetch`` (``web/static/lanner.js`` reads ``<meta name="csrf-token">``);
- or the ``csrf_token`` field of an urlencoded form, so pages work without JavaScript. A multipart form (a file
  input) must go through htmx or ``fetch``: its body is not read here.

The check applies to unsafe methods that carry the session cookie (or post the sign-in form) and no API key:
the SDK, the trainer and ``curl`` authenticate with ``Authorization: Bearer`` (which another site cannot make a
browser send) and never need a token, and a request with neither cookie nor key has no one's authority to
misuse. A refusal is the API's error shape, 403 ``csrf_failed``.

The cookie is set lazily: only a response whose page asked for the token (``csrf_token``) carries it, so API
responses set no cookie and cost nothing."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from itsdangerous import BadSignature
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette_csrf import CSRFMiddleware

from lanner.accounts.sessions import SESSION_COOKIE, SESSION_SECONDS

CSRF_COOKIE = "lanner_csrf"
CSRF_HEADER = "x-csrftoken"
CSRF_FIELD = "csrf_token"
MAX_FORM_BYTES = 1 << 20  # an urlencoded page form is small; a larger body is not read for a token
_SCOPE_KEY = "lanner.csrf"
# Checked even without a session cookie: the sign-in form, so another site cannot sign a visitor in to an
# account of its choosing (login CSRF) and watch what they upload.
ALWAYS_CHECKED = ("/login",)
# Never checked: the API's sign-in needs no authority, and takes only a JSON body, which another site cannot make
# a browser send without a CORS preflight that Lanner never allows (a script signing in with a stale cookie
# must not be refused).
NEVER_CHECKED = ("/api/auth/login",)


class _Token:
    """The request's token: the cookie's if it is one of ours, else a new one that the response will set."""

    def __init__(self, guard: CsrfProtection, cookie: str | None) -> None:
        self._guard, self._value, self.issued = guard, cookie if guard.valid(cookie) else None, False

    def value(self) -> str:
        if self._value is None:
            self._value, self.issued = self._guard.new_token(), True
        return self._value


def csrf_token(request: HTTPConnection) -> str:
    """The token a page embeds (a meta tag, a hidden field); asking for it makes the response set the cookie."""
    token: _Token | None = request.scope.get(_SCOPE_KEY)
    if token is None:
        raise RuntimeError("CsrfProtection is not installed: create_app adds it")
    return token.value()


def _bearer(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credential = value.decode("latin-1").partition(" ")
            return scheme.lower() == "bearer" and bool(credential.strip())
    return False


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it is larger than ``MAX_FORM_BYTES`` or the client went away."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the endpoint the body this middleware already read, then the real stream."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class CsrfProtection(CSRFMiddleware):
    """``starlette-csrf``'s middleware with what it lacks here: the token from a form field, an exemption for
    API keys, the cookie only where a page asked for it (and as long-lived as the session), a JSON refusal."""

    # A request with a bearer key and no cookie passes untouched (``__call__``): the app's fast lane
    # (``lanner.http.direct_route.FastLane``) leaves this middleware out for such requests.
    passes_api_clients = True

    def __init__(self, app: ASGIApp, *, secret: str | bytes, secure: bool) -> None:
        super().__init__(app, secret=secret, sensitive_cookies={SESSION_COOKIE}, cookie_name=CSRF_COOKIE,
                         cookie_secure=secure, cookie_httponly=True, cookie_samesite="lax", header_name=CSRF_HEADER,
                         required_urls=[re.compile(f"^{re.escape(path)}$") for path in ALWAYS_CHECKED],
                         exempt_urls=[re.compile(f"^{re.escape(path)}$") for path in NEVER_CHECKED])

    def new_token(self) -> str:
        return self._generate_csrf_token()

    def valid(self, token: str | None) -> bool:
        if not token:
            return False
        try:
            self.serializer.loads(token)
        except BadSignature:
            return False
        return True

    def _must_check(self, connection: HTTPConnection, scope: Scope) -> bool:
        if scope["method"] in self.safe_methods or _bearer(scope) or self._url_is_exempt(connection.url):
            return False
        return self._url_is_required(connection.url) or self._has_sensitive_cookies(connection.cookies)

    async def _submitted(self, scope: Scope, receive: Receive) -> tuple[str | None, Receive]:
        """The token the request sent back (header, else form field) and the ``receive`` the endpoint must use."""
        connection = HTTPConnection(scope)
        header = connection.headers.get(self.header_name)
        if header:
            return header, receive
        if connection.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return None, receive
        body = await _read_body(receive)
        if body is None:
            return None, receive
        fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        return (fields.get(CSRF_FIELD) or [None])[0], _replay(body, receive)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _bearer(scope) and not any(name == b"cookie" for name, _ in scope["headers"]):
            cookie = None  # an API client (the trainer, the SDK): a key and no cookie, never checked (_must_check)
        else:
            connection = HTTPConnection(scope)
            cookie = connection.cookies.get(self.cookie_name)
            if self._must_check(connection, scope):
                submitted, receive = await self._submitted(scope, receive)
                if not (cookie and submitted and self._csrf_tokens_match(cookie, submitted)):
                    refusal = JSONResponse({"error": "this form has expired or did not come from Lanner: reload the "
                                                     "page and try again", "code": "csrf_failed"}, status_code=403)
                    await refusal(scope, receive, send)
                    return
        token = _Token(self, cookie)
        scope[_SCOPE_KEY] = token

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and token.issued:
                MutableHeaders(scope=message).append("set-cookie", self._cookie(token.value()))
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _cookie(self, value: str) -> str:
        parts = [f"{self.cookie_name}={value}", f"Path={self.cookie_path}", f"Max-Age={SESSION_SECONDS}",
                            "HttpOnly", f"SameSite={self.cookie_samesite.capitalize()}"]
        if self.cookie_secure:
            parts.append("Secure")
        return "; ".join(parts)
