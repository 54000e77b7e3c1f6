"""The endpoint supervisor: one background loop per server process that makes every deployment's process match
its status (every ``LANNER_ENDPOINT_POLL_SECONDS``, or at once when a request changed one). Per deployment:

- ``creating``/``deploying`` without a process, once its backoff is over: launch one (a compare-and-set claims
  it first, so several server processes can share the database) -> ``deploying``;
- ``deploying``: up (answering its health check) -> ``ready``; not ready within
  ``LANNER_ENDPOINT_START_TIMEOUT_SECONDS`` -> stopped, counted as a crash;
- ``ready``: gone (killed, crashed, its Ray application deleted) or not answering three checks in a row -> a
  crash: ``deploying`` with the reason, launched again after 1, 2, 4... s (at most 60 s); after
  ``LANNER_ENDPOINT_MAX_RESTARTS`` crashes in a row -> ``failed``. A minute of being ready forgives them;
- a process that cannot serve the model (weights that do not load) -> ``failed`` at once, with its reason;
- ``stopping``, ``stopped``, ``failed`` or deleted: its process is stopped; once gone -> ``stopped`` (a deleted
  deployment's row goes, its bill settled);
- a retired process (a replace or resize rolls out a new one) is stopped before its successor is launched.

Slow calls (launching, health checks, Ray's API) happen outside any transaction; what they found is applied
in a short one, guarded by the status and process it was found for. Metering (``metering``), a resource sample
a minute, and the pruning of old logs ride along."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update

from lanner.accounts.models import User
from lanner.billing.metering import elapsed_seconds
from lanner.context import AppContext
from lanner.db import utcnow
from lanner.deployments import metering, state
from lanner.deployments.backends import Launch, LocalBackend, Observation, RayBackend, Seen
from lanner.deployments.models import Deployment, DeploymentLog, DeploymentSample
from lanner.deployments.service import RETIRING
from lanner.periodic import BackgroundLoop
from lanner.training.refs import SCHEME

log = logging.getLogger("lanner.deployments")
LAUNCHING = "launching:"
STALE_LAUNCH_SECONDS = 300.0
UNHEALTHY_CHECKS = 3
# ...and unanswered for at least this long: a process busy with a large batch on a loaded machine misses a few
# two-second checks in a row without being hung, and a restart would drop the requests it is answering.
UNHEALTHY_SECONDS = 15.0
FORGIVE_AFTER_SECONDS = 60.0  # ready this long: earlier crashes no longer count towards failing
MAX_BACKOFF_SECONDS = 60.0
SAMPLE_SECONDS = 60.0
PRUNE_SECONDS = 3600.0
RUNTIMES = {"onnx": "ONNX Runtime", "pytorch": "PyTorch"}


@dataclass(frozen=True)
class Snapshot:
    """A deployment as one pass found it (read in a short transaction)."""

    id: str
    status: str
    backend: str
    external_id: str | None
    url: str | None
    deleted: bool
    retry_at: datetime | None
    launched_at: datetime | None
    ready_at: datetime | None
    crashes: int
    cpu: int
    memory_gi: int


def backoff(crashes: int) -> float:
    return min(MAX_BACKOFF_SECONDS, 2.0 ** max(0, crashes - 1))


class Supervisor(BackgroundLoop):
    def __init__(self, ctx: AppContext, backends: dict[str, Any] | None = None,
                 on_change: Any = None) -> None:
        super().__init__("lanner-deployments", lambda: ctx.settings.endpoint_poll_seconds, log,
                         lease=ctx.lease("lanner-deployments"))
        self.ctx = ctx
        self._backends: dict[str, Any] = dict(backends or {})
        self._on_change = on_change or (lambda _id: None)
        self._unhealthy: dict[str, tuple[int, float]] = {}  # deployment -> (checks missed, monotonic first miss)
        self._metered: dict[str, float] = {}
        self._sampled: dict[str, float] = {}
        self._pruned = 0.0

    def backend(self, name: str) -> Any:
        if name not in self._backends:
            self._backends[name] = RayBackend(self.ctx.settings) if name == "ray" else LocalBackend(self.ctx.settings)
        return self._backends[name]

    def use_backend(self, name: str, backend: Any) -> None:
        """Serve ``name`` regions through ``backend`` (tests; an operator's own backend)."""
        self._backends[name] = backend

    def one_pass(self) -> None:
        with self.ctx.db.session() as session:
            ids = list(session.scalars(select(Deployment.id).where(or_(
                Deployment.status.in_([*state.RUNNING, state.STOPPING]), Deployment.external_id.is_not(None),
                Deployment.deleted_at.is_not(None), Deployment.billing_since.is_not(None)))))
        for deployment_id in ids:
            try:
                self._visit(deployment_id)
            except Exception:
                log.exception("deployment %s: this pass failed; the next one retries", deployment_id)
        self._prune()

    # --- one deployment ----------------------------------------------------------------------------------

    def _snapshot(self, deployment_id: str) -> Snapshot | None:
        with self.ctx.db.session() as session:
            d = session.get(Deployment, deployment_id)
            if d is None:
                return None
            return Snapshot(d.id, d.status, d.backend, d.external_id, d.url, d.deleted_at is not None, d.retry_at,
                         d.launched_at, d.ready_at, d.crashes, d.cpu, d.memory_gi)

    def _apply(self, snap: Snapshot, change: Any) -> None:
        """``change(session, deployment)`` if the deployment is still as ``snap`` found it."""
        with self.ctx.db.session() as session:
            d = session.get(Deployment, snap.id)
            if d is None or d.status != snap.status or d.external_id != snap.external_id:
                return
            change(session, d)
        self._on_change(snap.id)

    def _visit(self, deployment_id: str) -> None:
        snap = self._snapshot(deployment_id)
        if snap is None:
            return
        external = snap.external_id
        if external and external.startswith(LAUNCHING):
            claimed = datetime.fromisoformat(external.removeprefix(LAUNCHING))
            if elapsed_seconds(claimed, utcnow()) > STALE_LAUNCH_SECONDS:  # a pass died between claim and launch
                self._apply(snap, lambda s, d: setattr(d, "external_id", None))
            return
        backend = self.backend(snap.backend)
        if external and external.startswith(RETIRING):
            old = external.removeprefix(RETIRING)
            backend.stop(old)
            if backend.gone(old):
                self._apply(snap, lambda s, d: setattr(d, "external_id", None))
            return
        if snap.deleted or snap.status in (state.STOPPING, state.STOPPED, state.FAILED):
            self._wind_down(snap, backend)
            return
        if external is None:
            if snap.retry_at is None or snap.retry_at <= utcnow():
                self._launch(snap, backend)
            return
        self._watch(snap, backend, backend.observe(external, snap.url, cpu=snap.cpu, deployment=snap.id))

    def _wind_down(self, snap: Snapshot, backend: Any) -> None:
        if snap.external_id:
            backend.stop(snap.external_id)
            if not backend.gone(snap.external_id):
                return

        def settle(session: Any, d: Deployment) -> None:
            metering.meter(session, d, stop_clock=True)
            d.external_id, d.url, d.ready_at = None, None, None
            if d.status == state.STOPPING:
                state.transition(session, d, state.STOPPED, reason="its process is gone")
            if d.deleted_at is not None:
                session.delete(d)

        self._apply(snap, settle)
        self._forget(snap.id)
        if snap.deleted:
            backend.forget(snap.id)

    def _launch(self, snap: Snapshot, backend: Any) -> None:
        token = f"{LAUNCHING}{utcnow().isoformat()}"
        with self.ctx.db.session() as session:
            claimed = session.execute(update(Deployment).where(
                Deployment.id == snap.id, Deployment.external_id.is_(None), Deployment.status == snap.status,
                Deployment.deleted_at.is_(None)).values(external_id=token)
                .execution_options(synchronize_session=False)).rowcount
            d = session.get(Deployment, snap.id)
            if claimed != 1 or d is None:
                return
            session.refresh(d)
            owner = session.get(User, d.owner_id)
            spec = self._spec(d, owner.username if owner is not None else "")
            used = {int(url.rsplit(":", 1)[1]) for url in session.scalars(select(Deployment.url).where(
                Deployment.backend == "local", Deployment.url.is_not(None), Deployment.id != d.id))}
        snap = Snapshot(**{**snap.__dict__, "external_id": token})
        try:
            launched = backend.launch(spec, used_ports=used)
        except Exception as error:
            log.exception("deployment %s: launch failed", snap.id)
            why = f"could not launch its process ({error})"[:400]
            self._apply(snap, lambda s, d: self._crash(s, d, why))
            return

        def record(session: Any, d: Deployment) -> None:
            d.external_id, d.url, d.launched_at = launched.external_id, launched.url, utcnow()
            metering.start_clock(d)
            where = f"on {backend.name}" if backend.name != "local" else f"at {launched.url}"
            if d.status == state.CREATING:
                state.transition(session, d, state.DEPLOYING, reason=f"launched {where}")
            else:
                state.log(session, d.id, f"launched {where}")

        self._apply(snap, record)

    def _spec(self, d: Deployment, owner: str) -> Launch:
        settings, suffix = self.ctx.settings, ".onnx" if d.runtime == "onnx" else ".pt"
        digest = d.artefact_sha256
        return Launch(deployment_id=d.id, model_uri=f"{SCHEME}{owner}/{d.project_slug}/{d.model_slug}",
                      suffix=suffix, digest=digest, cpu=d.cpu,
                      memory_gi=d.memory_gi, min_instances=d.min_instances, max_instances=d.max_instances,
                      write_to=lambda path: self.ctx.blobs.copy_to(digest, path),
                      artefact_url=self.ctx.signer.download_url(digest, f"model{suffix}", 3600),
                      max_pixels=settings.inference_max_pixels, max_batch=settings.inference_max_batch,
                      window_ms=settings.inference_batch_window_ms,
                      cpu_batch_pixels=settings.inference_cpu_batch_pixels)

    def _watch(self, snap: Snapshot, backend: Any, seen: Observation) -> None:
        now = utcnow()
        if seen.seen is Seen.UP:
            self._unhealthy.pop(snap.id, None)
            self._apply(snap, lambda s, d: self._up(s, d, seen, now))
            return
        if seen.seen is Seen.FAILED:
            backend.stop(snap.external_id)

            def fail(session: Any, d: Deployment) -> None:
                metering.meter(session, d, stop_clock=True)
                state.transition(session, d, state.FAILED, reason=f"cannot be served: {seen.message}"[:500],
                                 external_id=None, url=None, ready_at=None)

            self._apply(snap, fail)
            return
        if seen.seen is Seen.DOWN:
            self._apply(snap, lambda s, d: self._crash(s, d, seen.message or "its process is gone"))
            return
        # starting: not answering (yet)
        if snap.status == state.DEPLOYING:
            limit = self.ctx.settings.endpoint_start_timeout_seconds
            if snap.launched_at and elapsed_seconds(snap.launched_at, now) > limit:
                backend.stop(snap.external_id)
                self._apply(snap, lambda s, d: self._crash(s, d, f"not ready {limit:.0f} s after its launch",
                                                           retire=True))
            elif seen.message:
                self._apply(snap, lambda s, d: setattr(d, "status_message", seen.message[:500]))
            return
        missed, since = self._unhealthy.get(snap.id, (0, time.monotonic()))
        self._unhealthy[snap.id] = (missed + 1, since)
        if missed + 1 < UNHEALTHY_CHECKS or time.monotonic() - since < UNHEALTHY_SECONDS:
            return
        self._unhealthy.pop(snap.id, None)
        if backend.name == "ray":  # Serve replaces unhealthy replicas itself: show it, relaunch nothing
            self._apply(snap, lambda s, d: state.transition(s, d, state.DEPLOYING, severity="WARNING", reason=(
                seen.message or "Ray Serve is restoring its replicas"), launched_at=now, ready_at=None))
            return
        backend.stop(snap.external_id)
        self._apply(snap, lambda s, d: self._crash(s, d, "its process stopped answering health checks",
                                                   retire=True))

    def _up(self, session: Any, d: Deployment, seen: Observation, now: datetime) -> None:
        d.instances = max(1, seen.instances)
        if d.status == state.DEPLOYING:
            detail = f" (export {d.export_id})" if d.export_id else ""
            state.transition(session, d, state.READY, reason=f"serving with {RUNTIMES[d.runtime]}{detail}",
                             ready_at=now, deployed_at=d.deployed_at or now)
        elif d.crashes and d.ready_at and elapsed_seconds(d.ready_at, now) > FORGIVE_AFTER_SECONDS:
            d.crashes = 0
        last = self._metered.get(d.id)
        if last is None or time.monotonic() - last >= self.ctx.settings.meter_interval_seconds:
            self._metered[d.id] = time.monotonic()
            metering.meter(session, d)
        sampled = self._sampled.get(d.id)
        if sampled is None or time.monotonic() - sampled >= SAMPLE_SECONDS:
            self._sampled[d.id] = time.monotonic()
            memory = None if seen.memory_bytes is None else 100.0 * seen.memory_bytes / (d.memory_gi * 1024**3)
            session.add(DeploymentSample(deployment_id=d.id, cpu_percent=seen.cpu_percent, memory_percent=memory,
                                         instances=d.instances))

    def _crash(self, session: Any, d: Deployment, reason: str, *, retire: bool = False) -> None:
        """The process is gone (or, ``retire``, being stopped): launch another after a backoff, or give up."""
        crashes, restarts = d.crashes + 1, d.restarts + 1
        external = f"{RETIRING}{d.external_id}" if retire and d.external_id else None
        limit = self.ctx.settings.endpoint_max_restarts
        if crashes > limit:
            metering.meter(session, d, stop_clock=True)
            state.transition(session, d, state.FAILED, reason=f"{reason}; it crashed {crashes} times in a row "
                             f"(LANNER_ENDPOINT_MAX_RESTARTS={limit})", crashes=crashes, external_id=external,
                             url=None, ready_at=None)
            return
        delay = backoff(crashes)
        message = f"{reason}; restarting in {delay:g} s (restart {restarts})"
        values = {"crashes": crashes, "restarts": restarts, "external_id": external, "url": None, "ready_at": None,
                  "retry_at": utcnow() + timedelta(seconds=delay)}
        if d.status == state.READY:
            state.transition(session, d, state.DEPLOYING, reason=message, severity="ERROR", **values)
        else:
            for key, value in values.items():
                setattr(d, key, value)
            d.status_message = message[:500]
            state.log(session, d.id, message, severity="ERROR")

    def _forget(self, deployment_id: str) -> None:
        for memory in (self._unhealthy, self._metered, self._sampled):
            memory.pop(deployment_id, None)

    def _prune(self) -> None:
        if time.monotonic() - self._pruned < PRUNE_SECONDS:
            return
        self._pruned = time.monotonic()
        cutoff = utcnow() - timedelta(days=self.ctx.settings.endpoint_log_retention_days)
        with self.ctx.db.session() as session:
            session.execute(delete(DeploymentLog).where(DeploymentLog.created_at < cutoff))
            session.execute(delete(DeploymentSample).where(DeploymentSample.created_at < cutoff))
