"""What every request may depend on for the life of the app: settings, database, blob store, signer, the API
key cache and the rate limits. It knows no domain: engines built on top of it (training's runtime, the import
queue) are composed by ``lanner.app.create_app``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lanner.config import Settings
from lanner.db import Database
from lanner.db.leases import Lease
from lanner.http.ratelimit import RateLimits
from lanner.storage.backends import open_blob_store
from lanner.storage.blobs import BlobStore
from lanner.storage.signing import URLSigner


@dataclass
class AppContext:
    settings: Settings
    db: Database
    blobs: BlobStore
    signer: URLSigner
    limits: RateLimits
    key_cache: dict[str, tuple[float, object]] = field(default_factory=dict)
    # Where the blob route finds bytes Lanner references but does not hold (a bucket dataset's pixels): each
    # locator takes a session, a sha256 and a lifetime in seconds and answers a URL to redirect to, None when the
    # bytes are not its, or raises (a changed object: 409). Registered by the composition root, so the storage
    # layer names no domain.
    pixel_locators: list[Callable[..., str | None]] = field(default_factory=list)

    @classmethod
    def from_settings(cls, settings: Settings) -> AppContext:
        home = settings.resolved_home
        home.mkdir(parents=True, exist_ok=True)
        blobs = open_blob_store(settings)
        return cls(
            settings=settings,
            db=Database(settings.resolved_database_url),
            blobs=blobs,
            signer=URLSigner(settings.load_secret_key(), settings.public_url, settings.signed_url_ttl_seconds,
                             blobs=blobs),
            limits=RateLimits(settings),
        )

    def lease(self, name: str) -> Lease:
        """The lease of the background loop ``name`` among every process on this database (``lanner.periodic``)."""
        return Lease(self.db, name, lambda: self.settings.lease_seconds)
