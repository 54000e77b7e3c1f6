"""What every request may depend on for the life of the app: settings, database, blob store, signer, the API
key cache, the rate limits and the background job queue. It knows no domain: engines built on top of it
(training's runtime) are composed by ``lanner.app.create_app``."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lanner.config import Settings
from lanner.db import Database
from lanner.ratelimit import RateLimits
from lanner.storage.blobs import BlobStore, LocalBlobStore
from lanner.storage.signing import URLSigner


@dataclass
class AppContext:
    settings: Settings
    db: Database
    blobs: BlobStore
    signer: URLSigner
    limits: RateLimits
    key_cache: dict[str, tuple[float, object]] = field(default_factory=dict)
    _jobs: ThreadPoolExecutor | None = None

    def submit_job(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Background work (dataset imports) on one worker thread: imports run one at a time, in order."""
        if self._jobs is None:
            self._jobs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lanner-job")
        return self._jobs.submit(fn, *args)

    def shutdown_jobs(self) -> None:
        if self._jobs is not None:
            self._jobs.shutdown(wait=True)
            self._jobs = None

    @classmethod
    def from_settings(cls, settings: Settings) -> AppContext:
        home = settings.resolved_home
        home.mkdir(parents=True, exist_ok=True)
        return cls(
            settings=settings,
            db=Database(settings.resolved_database_url),
            blobs=LocalBlobStore(settings.blob_root),
            signer=URLSigner(settings.load_secret_key(), settings.public_url, settings.signed_url_ttl_seconds),
            limits=RateLimits(settings),
        )
