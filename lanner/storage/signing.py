"""One HMAC signer for everything Lanner hands out and later trusts: signed blob/upload URLs (a stand-in for
cloud storage signed URLs), the web pages' one-time messages and the key of their CSRF tokens. Each use has its
own purpose string inside the MAC, so a signature made for one can never be replayed as another. (Web sessions
are not signed values: they are rows, so they can be ended.)"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from urllib.parse import quote, urlencode

from lanner.errors import Forbidden
from lanner.storage.blobs import BlobStore


class URLSigner:
    """``blobs``: the store whose bytes the blob links point at. A store that presigns its own URLs (a bucket)
    gets its links from there, so clients fetch bytes straight from it; otherwise Lanner's blob route serves them
    behind this signer's links.

    ``elsewhere``: which of some digests name bytes kept outside the store (a bucket dataset's pixels, in the
    user's bucket). Their links are always Lanner's signed route, whose locator (``AppContext.pixel_locators``)
    checks the object and redirects to it: a store's presigned URL would point at its own key for the digest,
    where those bytes are not. Set by the composition root, so this layer names no domain; asked only when the
    store presigns (otherwise every link is the route's anyway)."""

    def __init__(self, key: bytes, public_url: str, ttl_seconds: int, *, blobs: BlobStore | None = None) -> None:
        self._key = key
        self.public_url = public_url.rstrip("/")
        self.ttl_seconds = ttl_seconds
        self.blobs = blobs
        self.elsewhere: Callable[[Collection[str]], Collection[str]] = lambda digests: ()

    def _mac(self, purpose: str, message: str) -> str:
        return hmac.new(self._key, f"{purpose}\n{message}".encode(), hashlib.sha256).hexdigest()

    def _signature(self, method: str, path: str, expires: int) -> str:
        # Purpose = the HTTP method: URLs signed before the purpose prefix existed keep verifying.
        return self._mac(method.upper(), f"{path}\n{expires}")

    def sign(self, method: str, path: str, ttl_seconds: int | None = None, *, expires_at: float | None = None) -> str:
        """Return an absolute URL for ``path`` (already URL-safe) usable with ``method`` until it expires:
        ``expires_at`` (a Unix time the caller also shows, so the two agree), else ``ttl_seconds`` from now."""
        expires = int(expires_at) if expires_at is not None else int(time.time()) + (ttl_seconds or self.ttl_seconds)
        query = urlencode({"expires": expires, "signature": self._signature(method, path, expires)})
        return f"{self.public_url}{path}?{query}"

    def verify(self, method: str, path: str, expires: str | None, signature: str | None) -> bool:
        if not expires or not signature or not expires.isdigit():
            return False
        if int(expires) < time.time():
            return False
        expected = self._signature(method, path, int(expires))
        return hmac.compare_digest(expected, signature)

    def require(self, method: str, path: str, query: Mapping[str, str]) -> None:
        """Refuse (403) a request to ``path`` whose query does not carry a valid, unexpired signature for it."""
        if not self.verify(method, path, query.get("expires"), query.get("signature")):
            raise Forbidden("invalid or expired signature")

    def derive_key(self, purpose: str) -> bytes:
        """A key of its own for a library that signs by itself (the CSRF tokens), derived from this one."""
        return hmac.new(self._key, f"key\n{purpose}".encode(), hashlib.sha256).digest()

    def sign_value(self, purpose: str, value: str) -> str:
        """``value`` and its MAC, to hand to a client that gives it back (a cookie); see ``unsign_value``."""
        return f"{value}.{self._mac(f'value:{purpose}', value)}"

    def unsign_value(self, purpose: str, signed: str | None) -> str | None:
        """The value ``sign_value`` signed for ``purpose``, or None for anything else."""
        value, _, mac = (signed or "").rpartition(".")
        if not mac or not hmac.compare_digest(mac, self._mac(f"value:{purpose}", value)):
            return None
        return value

    def download_url(self, sha256: str, filename: str, ttl_seconds: int | None = None) -> str:
        """The one way to hand out a blob: the store's presigned GET where it has one, else a signed GET on
        Lanner's blob route, named ``filename`` (always the route for bytes kept ``elsewhere``)."""
        if self.blobs is not None and self.blobs.presigns and not self.elsewhere((sha256,)):
            direct = self.blobs.presigned_get(sha256, filename, ttl_seconds or self.ttl_seconds)
            if direct is not None:
                return direct
        return self.sign("GET", blob_path(sha256, filename), ttl_seconds)

    def blob_links(self, ttl_seconds: int | None = None, *, digests: Iterable[str] = ()
                   ) -> Callable[[str, str], str]:
        """``download_url`` for many blobs at once (a page of thumbnails): one expiry for all of them and the
        key's HMAC state prepared once, each link the same as ``download_url`` would make in that second.
        ``digests``: those the page will link, asked about ``elsewhere`` in one go (any other is asked alone)."""
        routed = self._route_links(ttl_seconds)
        if self.blobs is not None and self.blobs.presigns:
            store, ttl = self.blobs, ttl_seconds or self.ttl_seconds
            asked = set(digests)
            away = set(self.elsewhere(asked)) if asked else set()

            def direct(sha256: str, filename: str) -> str:
                if sha256 in away or (sha256 not in asked and self.elsewhere((sha256,))):
                    return routed(sha256, filename)
                return store.presigned_get(sha256, filename, ttl) or routed(sha256, filename)

            return direct
        return routed

    def _route_links(self, ttl_seconds: int | None) -> Callable[[str, str], str]:
        expires = int(time.time()) + (ttl_seconds or self.ttl_seconds)
        keyed = hmac.new(self._key, digestmod=hashlib.sha256)
        base = self.public_url

        def link(sha256: str, filename: str) -> str:
            path = blob_path(sha256, filename)
            mac = keyed.copy()
            mac.update(f"GET\n{path}\n{expires}".encode())
            return f"{base}{path}?expires={expires}&signature={mac.hexdigest()}"

        return link

    def upload_url(self, key: str, ttl_seconds: int | None = None, *, expires_at: float | None = None) -> str:
        """A signed PUT for the upload slot ``key`` (see ``lanner.storage.router.put_upload``)."""
        return self.sign("PUT", upload_path(key), ttl_seconds, expires_at=expires_at)

    def worker_upload_url(self, key: str, ttl_seconds: int | None = None) -> tuple[str, bool]:
        """Where a worker PUTs what it made for the upload slot ``key`` (an export's artefact, a run's resume
        checkpoint), and whether the server must settle it: the store's presigned PUT into its staging area where
        it has one (the bytes go straight to the bucket, never through an API host; the caller then settles the
        slot with ``BlobStore.settle_staged`` once the worker says, or shows, it is done), else Lanner's signed
        PUT route, which stores and records the bytes as they arrive."""
        ttl = ttl_seconds or self.ttl_seconds
        if self.blobs is not None and self.blobs.presigns:
            direct = self.blobs.presigned_put(key, time.time() + ttl)
            if direct is not None:
                return direct, True
        return self.upload_url(key, ttl), False


def blob_path(sha256: str, filename: str) -> str:
    return f"/api/storage/blobs/{sha256}/{quote(filename, safe='')}"


def upload_path(key: str) -> str:
    return f"/api/storage/uploads/{quote(key, safe='/')}"
