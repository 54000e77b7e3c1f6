"""Everything a request needs that lives for the life of the app: settings, database, blobs, signer."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lanner.config import Settings
from lanner.db import Database
from lanner.storage.blobs import BlobStore, LocalBlobStore
from lanner.storage.signing import URLSigner
from lanner.training.ingest import IngestWriter


@dataclass
class AppContext:
    settings: Settings
    db: Database
    blobs: BlobStore
    signer: URLSigner
    ingest: IngestWriter
    key_cache: dict[str, tuple[float, object]] = field(default_factory=dict)
    _jobs: ThreadPoolExecutor | None = None
    _executor: Any = None
    _supervisor: Any = None

    @property
    def executor(self) -> Any:
        """Where runs execute (``LANNER_EXECUTOR``), built on first use."""
        if self._executor is None:
            from lanner.training.executors import make_executor

            self._executor = make_executor(self.settings)
        return self._executor

    @property
    def supervisor(self) -> Any:
        if self._supervisor is None:
            from lanner.training.supervisor import Supervisor

            self._supervisor = Supervisor(self, self.executor)
        return self._supervisor

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
        db = Database(settings.resolved_database_url)
        return cls(
            settings=settings,
            db=db,
            ingest=IngestWriter(db, settings.public_url),
            blobs=LocalBlobStore(settings.blob_root),
            signer=URLSigner(settings.resolved_secret_key, settings.public_url, settings.signed_url_ttl_seconds),
        )
