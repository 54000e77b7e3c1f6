"""The collect template at work: a deployment's uncertain predictions, sampled and capped per day, become
unlabelled images of the workflow's dataset (what "Label next" opens first when no assistant ranks them), with
the model's boxes kept as the editor's proposals (``annotation.LabelProposal``), never as labels.

Off the prediction's path: ``consider`` runs on the event loop after the endpoint answered, and costs a dict
lookup for a deployment nobody collects from (the active workflows are read at most once a second per process,
and at once after a save here). For an uncertain answer that the sampling keeps, it hands back a task that
Starlette runs after the response is sent; at most ``MAX_IN_FLIGHT`` run at once per process, and a capture
beyond that is dropped (a sample anyway). The capture itself (``capture``, on a worker thread):

1. the image is probed and stored as an import stores it: content-addressed blobs through the ``BlobStore``
   (the image and its thumbnail), an ``ImageBlob`` row;
2. one transaction claims a place under the daily cap with a conditional UPDATE of the workflow's counters
   (safe across threads and processes), and adds the image to the dataset's manifest (copy-on-write), unless
   the dataset already holds these bytes; it re-checks that the deployment's workspace may still write the
   dataset.

``clock`` and ``random`` are the collector's, so tests fix the day and the sampling."""

from __future__ import annotations

import logging
import random as random_module
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import case, or_, select, update
from sqlalchemy.orm import Session
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from lanner.accounts.models import User
from lanner.annotation.models import LabelProposal
from lanner.context import AppContext
from lanner.datasets import service as datasets_service
from lanner.datasets import state as datasets_state
from lanner.datasets.images import probe_image
from lanner.datasets.models import Dataset, DatasetItem
from lanner.datasets.records import CorruptImage, ImageInfo
from lanner.db import utcnow
from lanner.deployments.models import Deployment
from lanner.scratch import scratch_folder
from lanner.teams import permissions
from lanner.workflows import service
from lanner.workflows.models import Workflow

log = logging.getLogger(__name__)
CACHE_SECONDS = 1.0
MAX_IN_FLIGHT = 4
EXTENSIONS = {"jpeg": "jpg", "tiff": "tif"}


@dataclass(frozen=True)
class Plan:
    """What the hot path needs of one active workflow."""

    workflow_id: str
    low: float
    high: float
    include_empty: bool
    rate: float


def uncertain(rows: list[dict[str, Any]], plan: Plan) -> bool:
    """Some row's confidence is within the band, or (when the workflow says so) there is no row at all."""
    if not rows:
        return plan.include_empty
    return any(plan.low <= float(row.get("confidence", -1.0)) <= plan.high for row in rows)


class Collector:
    def __init__(self, ctx: AppContext, *, clock: Callable[[], datetime] = utcnow,
                 random: Callable[[], float] = random_module.random) -> None:
        self.ctx, self.clock, self.random = ctx, clock, random
        self._plans: dict[str, list[Plan]] = {}
        self._read_at = -CACHE_SECONDS
        self._lock = threading.Lock()
        self._in_flight = 0

    def forget(self) -> None:
        """A workflow changed here: the next prediction reads the active ones again."""
        self._read_at = -CACHE_SECONDS

    def _read(self) -> dict[str, list[Plan]]:
        plans: dict[str, list[Plan]] = {}
        with self.ctx.db.session() as session:
            for w in service.active_for(session):
                plans.setdefault(w.deployment_id or "", []).append(
                    Plan(w.id, w.conf_low, w.conf_high, w.include_empty, w.rate))
        return plans

    async def plans(self, deployment_id: str) -> list[Plan]:
        if time.monotonic() - self._read_at > CACHE_SECONDS:
            self._read_at = time.monotonic()
            self._plans = await run_in_threadpool(self._read)
        return self._plans.get(deployment_id, [])

    async def consider(self, deployment_id: str, status: int, body: bytes, data: bytes, *,
                       normalized: bool) -> BackgroundTask | None:
        """The capture to run after the response, when a workflow collects from this deployment, the answer is
        uncertain for it and the sampling keeps it; else None (and nothing was parsed)."""
        if status != 200:
            return None
        plans = await self.plans(deployment_id)
        if not plans:
            return None
        try:
            answer = orjson.loads(body)
            image = (answer.get("images") or [{}])[0]
            rows = [r for r in image.get("results") or [] if isinstance(r, dict)]
        except (ValueError, AttributeError, IndexError):
            return None
        chosen = [p for p in plans if uncertain(rows, p) and self.random() < p.rate]
        if not chosen:
            return None
        shape = image.get("shape") or []
        return BackgroundTask(self._run, [p.workflow_id for p in chosen], data, rows, shape, normalized)

    async def _run(self, workflow_ids: list[str], data: bytes, rows: list[dict[str, Any]], shape: list[Any],
                   normalized: bool) -> None:
        """Counted here, not when the task is made: a response whose sending fails never runs its task."""
        if self._in_flight >= MAX_IN_FLIGHT:
            log.info("capture dropped: %d already running", self._in_flight)
            return
        self._in_flight += 1
        try:
            for workflow_id in workflow_ids:
                await run_in_threadpool(self.capture, workflow_id, data, rows, shape, normalized)
        except Exception:  # noqa: BLE001 -- a capture never fails the endpoint; why is logged
            log.exception("capturing a prediction failed")
        finally:
            self._in_flight -= 1

    # --- on a worker thread --------------------------------------------------------------------------

    def capture(self, workflow_id: str, data: bytes, rows: list[dict[str, Any]], shape: list[Any],
                normalized: bool) -> str:
        """Store the image and add it to the workflow's dataset; returns what happened: ``captured``,
        ``duplicate``, ``capped``, ``inactive``, ``busy`` (the dataset is importing) or ``not_an_image``."""
        stored = self._store(data)
        if stored is None:
            return "not_an_image"
        info, thumb = stored
        with self.ctx.db.session() as session:
            outcome = self._add(session, workflow_id, info, thumb, rows, shape, normalized)
            if outcome != "captured":
                session.rollback()
            return outcome

    def _store(self, data: bytes) -> tuple[ImageInfo, str] | None:
        with scratch_folder(self.ctx.settings.resolved_home, "capture-") as folder:
            path = Path(folder) / "image"
            path.write_bytes(data)
            try:
                info, thumbnail = probe_image(path, thumbnail=True)
            except CorruptImage as error:
                log.info("capture skipped: %s", error)
                return None
            self.ctx.blobs.put_path(path, info.sha256, move=True)
        return info, self.ctx.blobs.put_bytes(thumbnail).sha256

    def _add(self, session: Session, workflow_id: str, info: ImageInfo, thumb: str, rows: list[dict[str, Any]],
             shape: list[Any], normalized: bool) -> str:
        workflow = session.get(Workflow, workflow_id)
        if workflow is None or not workflow.active or workflow.deleted_at is not None or not workflow.dataset_id:
            return "inactive"
        dataset = session.get(Dataset, workflow.dataset_id)
        deployment = session.get(Deployment, workflow.deployment_id) if workflow.deployment_id else None
        if dataset is None or dataset.deleted_at is not None or deployment is None or not permissions.can(
                session, user_id=workflow.owner_id, owner_id=dataset.owner_id, action="write"):
            return "inactive"
        if session.scalar(select(DatasetItem.id).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                       DatasetItem.sha256 == info.sha256).limit(1)) is not None:
            return "duplicate"
        if dataset.status == datasets_state.PROCESSING:
            return "busy"  # an import is swapping its manifest in: this sample is skipped, not waited for
        now = self.clock()
        if not claim(session, workflow, now):
            return "capped"
        datasets_service.insert_image_blob(session, info, thumb)
        manifest = datasets_service.writable_manifest(session, dataset)
        owner = session.scalar(select(User.username).where(User.id == deployment.owner_id)) or ""
        name = f"{deployment.slug}-{now:%Y%m%d-%H%M%S}-{info.sha256[:8]}.{EXTENSIONS.get(info.format, info.format)}"
        key = datasets_service.new_key()
        session.add(DatasetItem(
            manifest_id=manifest, key=key, name=name, split=workflow.split, sha256=info.sha256, labels=None,
            class_id=None, issues=",", updated_at=utcnow(), **datasets_service.label_fields(None, None),
            metadata_={"capturedFrom": f"{owner}/{deployment.slug}", "workflow": workflow.id,
                       "confidences": [round(float(r.get("confidence", 0.0)), 4) for r in rows][:50]}))
        datasets_service.touch(dataset)
        suggestions = proposals(rows, shape, normalized, dataset)
        if suggestions and deployment.model_id:
            ref = f"{owner}/{deployment.project_slug}/{deployment.model_slug}"
            session.add(LabelProposal(dataset_id=dataset.id, item_key=key, model_id=deployment.model_id,
                                      model_ref=ref[:300], labels=suggestions, shown=len(suggestions)))
        session.flush()
        return "captured"


def claim(session: Session, workflow: Workflow, now: datetime) -> bool:
    """Count one capture under the daily cap (a new UTC day starts at 0): one conditional UPDATE, so two
    captures racing for the last place cannot both get it."""
    day = now.date().isoformat()
    result = session.execute(
        update(Workflow).where(
            Workflow.id == workflow.id, Workflow.daily_cap > 0,
            or_(Workflow.captured_day.is_(None), Workflow.captured_day != day,
                Workflow.captured_today < Workflow.daily_cap))
        .values(captured_today=case((Workflow.captured_day == day, Workflow.captured_today + 1), else_=1),
                captured_day=day, captured_total=Workflow.captured_total + 1, last_captured_at=now,
                updated_at=Workflow.updated_at)
        .execution_options(synchronize_session=False))
    return bool(getattr(result, "rowcount", 0) == 1)


def proposals(rows: list[dict[str, Any]], shape: list[Any], normalized: bool,
              dataset: Dataset) -> list[dict[str, Any]]:
    """The answer's boxes as dataset labels (0-1 ``bbox`` cx, cy, w, h; classes mapped by name, dropped when
    the dataset names classes and not this one) with their ``confidence``: the editor's proposals for the
    image (the editor drops the confidence when one is accepted). Detection datasets only."""
    if dataset.task != "detect" or len(shape) < 2:
        return []
    height, width = (1.0, 1.0) if normalized else (float(shape[0] or 0), float(shape[1] or 0))
    if width <= 0 or height <= 0:
        return []
    names = {str(n).strip().lower(): i for i, n in enumerate(dataset.class_names or [])}
    labels = []
    for row in rows:
        box = row.get("box")
        if not isinstance(box, dict) or not all(k in box for k in ("x1", "y1", "x2", "y2")):
            continue
        target = names.get(str(row.get("name", "")).strip().lower()) if names else row.get("class")
        if not isinstance(target, int):
            continue
        x1, x2 = (min(max(float(box[k]) / width, 0.0), 1.0) for k in ("x1", "x2"))
        y1, y2 = (min(max(float(box[k]) / height, 0.0), 1.0) for k in ("y1", "y2"))
        if x2 > x1 and y2 > y1:
            labels.append({"classId": target, "bbox": [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1],
                           "confidence": float(row.get("confidence", 0.0))})
    return labels


