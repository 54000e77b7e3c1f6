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
  a source of images and fetches, and nothing else of it.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_NO_FRAMING = "frame-ancestors 'none'; base-uri 'self'; form-action 'self'; object-src 'none'"
PAGE_POLICY = f"default-src 'self'; {_NO_FRAMING}"
API_EXPLORER_POLICY = f"default-src 'self'; img-src 'self' data:; {_NO_FRAMING}"
API_EXPLORER_PATHS = ("/docs",)
_ALWAYS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"))


def page_policy(media_origin: str | None) -> str:
    if not media_origin:
        return PAGE_POLICY
    return f"default-src 'self'; img-src 'self' {media_origin}; connect-src 'self' {media_origin}; {_NO_FRAMING}"


class SecurityHeaders:
    def __init__(self, app: ASGIApp, media_origin: str | None = None) -> None:
        self.app = app
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
                    added = added + ((b"content-security-policy", policy.encode()), (b"x-frame-options", b"DENY"))
                for header in added:
                    if header[0] not in present:
                        raw.append(header)
            await send(message)

        await self.app(scope, receive, send_with_headers)
