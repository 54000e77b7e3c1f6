"""Security headers on every response, as a plain ASGI middleware (no per-request task or body buffering, so the
webhook hot path pays only a few header appends).

- every response: ``X-Content-Type-Options: nosniff`` (a blob is never run as a script or page because it
  looks like one) and ``Referrer-Policy: same-origin`` (signed URLs carry their credential in the query string,
  which must not leak to another site through ``Referer``);
- HTML: a Content-Security-Policy that allows only this origin's scripts and styles (the templates keep none
  inline) and no framing, plus ``X-Frame-Options: DENY`` for browsers without CSP frame-ancestors, so the
  sign-in page cannot be framed for clickjacking. The API reference (``/docs``, Swagger UI vendored) gets the
  same policy plus ``data:`` images: the icons Swagger UI's stylesheet embeds. With the blobs in a bucket the
  pages' image links are the bucket's presigned URLs: ``media_origin`` (its scheme, host and port) is allowed as
  a source of images and fetches, and nothing else of it. A page may add the origins of the links it hands out
  itself (``allow_media``: a bucket dataset's pixels, redirected to the user's bucket), for that response only.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_NO_FRAMING = "frame-ancestors 'none'; base-uri 'self'; form-action 'self'; object-src 'none'"
PAGE_POLICY = f"default-src 'self'; {_NO_FRAMING}"
API_EXPLORER_POLICY = f"default-src 'self'; img-src 'self' data:; {_NO_FRAMING}"
API_EXPLORER_PATHS = ("/docs",)
_ALWAYS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"))


MEDIA_ORIGINS = "lanner_media_origins"  # the key ``allow_media`` sets in the request's state


def page_policy(media_origin: str | None, *more: str) -> str:
    origins = " ".join(dict.fromkeys(o for o in (media_origin, *more) if o))
    if not origins:
        return PAGE_POLICY
    return f"default-src 'self'; img-src 'self' {origins}; connect-src 'self' {origins}; {_NO_FRAMING}"


def allow_media(request: Request, origins: Iterable[str]) -> None:
    """Let this response's page show images from ``origins`` too (scheme, host and port each): the origins of
    the links the page hands out, and no other."""
    request.state.lanner_media_origins = tuple(origins)


class SecurityHeaders:
    def __init__(self, app: ASGIApp, media_origin: str | None = None) -> None:
        self.app = app
        self.media_origin = media_origin
        self.page_policy = page_policy(media_origin)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = API_EXPLORER_POLICY if scope["path"].startswith(API_EXPLORER_PATHS) else self.page_policy

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # On the raw list, names lower-case as ASGI has them, in one pass: MutableHeaders scanned it once
                # per call, and a scan per question (present? HTML?) was most of this middleware's cost.
                raw = message["headers"] = list(message.get("headers", ()))
                present, html = set(), False
                for name, value in raw:
                    present.add(name.lower())
                    html = html or (name == b"content-type" and value.startswith(b"text/html"))
                added = _ALWAYS
                if html:
                    extra = (scope.get("state") or {}).get(MEDIA_ORIGINS)
                    chosen = page_policy(self.media_origin, *extra) if extra and policy is self.page_policy \
                        else policy
                    added = added + ((b"content-security-policy", chosen.encode()), (b"x-frame-options", b"DENY"))
                for header in added:
                    if header[0] not in present:
                        raw.append(header)
            await send(message)

        await self.app(scope, receive, send_with_headers)
