"""HMAC-signed, expiring URLs served by Lanner itself (stand-in for cloud storage signed URLs)."""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import quote, urlencode


class URLSigner:
    def __init__(self, key: bytes, public_url: str, ttl_seconds: int) -> None:
        self._key = key
        self.public_url = public_url.rstrip("/")
        self.ttl_seconds = ttl_seconds

    def _signature(self, method: str, path: str, expires: int) -> str:
        message = f"{method.upper()}\n{path}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, method: str, path: str, ttl_seconds: int | None = None) -> str:
        """Return an absolute URL for ``path`` (already URL-safe) usable with ``method`` until it expires."""
        expires = int(time.time()) + (ttl_seconds or self.ttl_seconds)
        query = urlencode({"expires": expires, "signature": self._signature(method, path, expires)})
        return f"{self.public_url}{path}?{query}"

    def verify(self, method: str, path: str, expires: str | None, signature: str | None) -> bool:
        if not expires or not signature or not expires.isdigit():
            return False
        if int(expires) < time.time():
            return False
        expected = self._signature(method, path, int(expires))
        return hmac.compare_digest(expected, signature)


def blob_path(sha256: str, filename: str) -> str:
    return f"/api/storage/blobs/{sha256}/{quote(filename, safe='')}"


def upload_path(key: str) -> str:
    return f"/api/storage/uploads/{quote(key, safe='/')}"
