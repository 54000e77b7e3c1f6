"""An endpoint's request log: every predict answered through the server is one row (time, status, latency,
image size, detections), written in batches off the request path; lifecycle lines (``state.log``) share the
table. ``deployments.logs`` reads it back in the SDK's shape, newest first.

The writer keeps what requests report in memory and writes it once a second in one transaction (on SQLite
every transaction takes the write lock: one per request would serialise the endpoint behind the database),
adding to each deployment's ``request_count`` and ``error_count`` in the same transaction."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lanner.db import Database, iso, utcnow
from lanner.deployments.models import Deployment, DeploymentLog
from lanner.errors import Unprocessable
from lanner.periodic import BackgroundLoop

log = logging.getLogger("lanner.deployments")
FLUSH_SECONDS = 1.0
MAX_PENDING = 100_000  # rows kept while the database is unreachable; the oldest go first
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
LOGS_DEFAULT, LOGS_MAX = 50, 200  # the hosted API's page sizes


@dataclass
class Request:
    deployment_id: str
    path: str
    status: int
    latency_ms: float
    image_bytes: int
    width: int | None = None
    height: int | None = None
    detections: int | None = None
    user_agent: str | None = None
    error: str | None = None
    at: datetime = field(default_factory=utcnow)

    def row(self) -> DeploymentLog:
        size = f"{self.width}x{self.height}, " if self.width else ""
        outcome = f"{self.detections} results" if self.detections is not None else (self.error or "")[:300]
        message = f"POST /predict {self.status} in {self.latency_ms:.1f} ms ({size}{self.image_bytes} bytes)" + (
            f": {outcome}" if outcome else "")
        severity = "INFO" if self.status < 400 else "WARNING" if self.status < 500 else "ERROR"
        return DeploymentLog(deployment_id=self.deployment_id, created_at=self.at, severity=severity, message=message,
                             method="POST", path=self.path[:300], status=self.status,
                             latency_ms=round(self.latency_ms, 3), image_bytes=self.image_bytes, width=self.width,
                             height=self.height, detections=self.detections,
                             user_agent=(self.user_agent or None) and self.user_agent[:300])


class RequestLog(BackgroundLoop):
    """A ``BackgroundLoop`` whose pass writes what requests reported; ``stop`` writes what is still pending."""

    def __init__(self, db: Database) -> None:
        super().__init__("lanner-endpoint-log", lambda: FLUSH_SECONDS, log)
        self.db = db
        self._pending: list[Request] = []
        self._lock = threading.Lock()

    def stop(self, timeout: float = 30.0) -> None:
        super().stop(timeout)
        self.run_once()

    def record(self, request: Request) -> None:
        with self._lock:
            self._pending.append(request)
            if len(self._pending) > MAX_PENDING:
                del self._pending[: len(self._pending) - MAX_PENDING]

    def one_pass(self) -> int:
        """Write what requests reported; returns how many rows (those of deleted deployments are dropped). A
        failure keeps them for the next pass."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return 0
        try:
            with self.db.session() as session:
                ids = {r.deployment_id for r in pending}
                alive = set(session.scalars(select(Deployment.id).where(Deployment.id.in_(ids))))
                kept = [r for r in pending if r.deployment_id in alive]
                session.add_all([r.row() for r in kept])
                totals, errors = Counter(r.deployment_id for r in kept), Counter(
                    r.deployment_id for r in kept if r.status >= 400)
                for deployment_id, count in totals.items():
                    session.execute(update(Deployment).where(Deployment.id == deployment_id).values(
                        request_count=Deployment.request_count + count,
                        error_count=Deployment.error_count + errors.get(deployment_id, 0))
                        .execution_options(synchronize_session=False))
        except Exception:
            with self._lock:  # written next time
                self._pending[:0] = pending
            raise
        return len(kept)


def _entry(row: DeploymentLog) -> dict[str, Any]:
    entry: dict[str, Any] = {"timestamp": iso(row.created_at), "severity": row.severity, "message": row.message}
    if row.method is not None:
        request: dict[str, Any] = {"method": row.method, "url": row.path or "", "status": float(row.status or 0),
                                   "latencyMs": float(row.latency_ms or 0.0)}
        if row.user_agent:
            request["userAgent"] = row.user_agent
        entry["httpRequest"] = request
    return entry


def logs(session: Session, deployment: Deployment, *, severity: str | None, limit: int | None,
         page_token: str | None) -> dict[str, Any]:
    """``deployments.logs``: newest first, ``limit`` (50, at most 200) per page; ``severity`` a comma list."""
    query = select(DeploymentLog).where(DeploymentLog.deployment_id == deployment.id)
    if severity:
        wanted = [s.strip().upper() for s in severity.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in SEVERITIES]
        if unknown:
            raise Unprocessable(f"severity: unknown level(s) {', '.join(unknown)[:100]} "
                                f"(one of {', '.join(SEVERITIES)})")
        query = query.where(DeploymentLog.severity.in_(wanted))
    if page_token:
        if not page_token.isdigit() or len(page_token) > 18:
            raise Unprocessable("pageToken: must be the nextPageToken of an earlier page")
        query = query.where(DeploymentLog.id < int(page_token))
    size = min(limit or LOGS_DEFAULT, LOGS_MAX)
    rows = list(session.scalars(query.order_by(DeploymentLog.id.desc()).limit(size + 1)))
    answer: dict[str, Any] = {"entries": [_entry(row) for row in rows[:size]]}
    if len(rows) > size:
        answer["nextPageToken"] = str(rows[size - 1].id)
    return answer
