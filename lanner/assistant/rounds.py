"""A round's life: when one is due, its start through the ordinary training path, its end (the run's mAP50, or
the reason it failed) and the scoring of the unlabelled images by its model.

    (due) -> training -> scoring -> completed
             training -> failed     (the run failed or was cancelled; or it could not start: no credit...)

Every change goes through ``lanner.status`` (``_change``), like every other row with a status: guarded by the
statuses it may come from (``ALLOWED``), so a stale writer changes nothing, and recorded as a ``StatusEvent``.
Only one round of an assistant is ever training or scoring (``due``), and the round number is unique per
assistant, so two server processes that both find a round due start it once: the second insert fails and its
transaction, run and credit hold included, rolls back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.assistant import training_data
from lanner.assistant.models import COMPLETED, FAILED, SCORING, TRAINING, Assistant, AssistantRound, AssistantScore
from lanner.datasets.models import Dataset
from lanner.db import utcnow
from lanner.errors import LannerError
from lanner.gpus.catalogue import Catalogue
from lanner.integrations import pixels as bucket_pixels
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project
from lanner.status import record_created, try_change_status
from lanner.training import inputs, launch
from lanner.training.executors import Executor
from lanner.training.models import Run
from lanner.training.schemas import StartRequest
from lanner.training.state import RunStatus

ALLOWED = {SCORING: (TRAINING,), FAILED: (TRAINING,), COMPLETED: (SCORING,)}


def latest_round(session: Session, assistant: Assistant) -> AssistantRound | None:
    return session.scalar(select(AssistantRound).where(AssistantRound.assistant_id == assistant.id)
                          .order_by(AssistantRound.round.desc()).limit(1))


def newest_model_round(session: Session, assistant: Assistant) -> AssistantRound | None:
    """The newest completed round whose model still exists: the assistant that proposes and is fine-tuned."""
    return session.scalar(select(AssistantRound).where(
        AssistantRound.assistant_id == assistant.id, AssistantRound.status == COMPLETED,
        AssistantRound.model_id.is_not(None)).order_by(AssistantRound.round.desc()).limit(1))


def first_round_at(assistant: Assistant, images: int) -> int:
    return max(1, min(assistant.min_labels, images))


def next_round_at(assistant: Assistant, last: AssistantRound | None, images: int) -> int | None:
    """How many labelled images start the next round, fitted to a dataset of ``images`` images: the first round
    at ``min_labels`` (every image of a smaller dataset), then every ``every`` more, and a last one once every
    image is labelled (so a 40-image dataset never waits for 64); None when every image was labelled at the last
    round, since no new label can then come (adding images starts the count again)."""
    if last is None:
        return first_round_at(assistant, images)
    if last.labelled >= images:
        return None
    return min(last.labelled + assistant.every, images)


def due(assistant: Assistant, labelled: int, last: AssistantRound | None, images: int) -> bool:
    """Enabled, enough labels, none training; then the first round, or the next one at ``next_round_at``. A
    failed round is retried at once once the person saved the settings after it failed."""
    if not assistant.enabled or labelled < first_round_at(assistant, images):
        return False
    if last is None:
        return True
    if last.status in (TRAINING, SCORING):
        return False
    if last.status == FAILED and last.completed_at is not None and assistant.updated_at > last.completed_at:
        return True
    threshold = next_round_at(assistant, last, images)
    return threshold is not None and labelled >= threshold


def model_ref(session: Session, model_id: str | None) -> str | None:
    """``owner/project/model`` of a model (what the proposals API takes)."""
    if model_id is None:
        return None
    row = session.execute(select(User.username, Project.slug, ModelRecord.slug)
                          .join(Project, Project.id == ModelRecord.project_id)
                          .join(User, User.id == ModelRecord.owner_id).where(ModelRecord.id == model_id)).first()
    return f"{row[0]}/{row[1]}/{row[2]}" if row else None


def base_model(session: Session, assistant: Assistant, principal: Principal, task: str) -> str:
    """The previous round's model; round 1 starts from the best pretrained start the server has for the task
    (``projects.starting``: official weights, or the demo's own), else the architecture (random weights)."""
    previous = newest_model_round(session, assistant)
    ref = model_ref(session, previous.model_id) if previous else None
    if ref:
        return f"ul://{ref}"
    return inputs.default_base_model(session, principal, task)


def small_data_args(labelled: int) -> dict[str, Any]:
    """A round learns from a few dozen images: batches of a fifth of them (2 to 16), so an epoch is several
    steps; no warm-up (the trainer's lasts at least 100 steps, longer than a whole early round, which would then
    never reach its learning rate); no mosaic (it shrinks each image to a quarter: small images lose their
    objects)."""
    return {"batch": max(2, min(16, labelled // 5)), "warmup_epochs": 0, "mosaic": 0.0}


def start(session: Session, assistant: Assistant, dataset: Dataset, labelled: int, *, catalogue: Catalogue,
          executor: Executor, executor_name: str) -> AssistantRound:
    """Record round N+1 and start its run; a run that cannot start fails the round with the reason."""
    last = latest_round(session, assistant)
    number = (last.round if last else 0) + 1
    entry = AssistantRound(assistant_id=assistant.id, round=number, labelled=labelled, status=TRAINING,
                           started_at=utcnow())
    session.add(entry)
    record_created(session, entry, reason=f"{labelled} labelled images")
    owner = session.get(User, dataset.owner_id)
    assert owner is not None
    principal = Principal.of(owner)
    try:
        bucket_pixels.require_processing(session, dataset, "auto-annotation")  # the bucket integration's AI switch
        with session.begin_nested():
            derived = training_data.refresh(session, principal, dataset, session.get(
                Dataset, assistant.training_dataset_id) if assistant.training_dataset_id else None)
            assistant.training_dataset_id = derived.id
            project = projects_service.get_or_create_project(session, owner_id=owner.id, purpose="assistant",
                                                             slug=f"{dataset.slug}-assistant"[:128])
            model = projects_service.create_model(
                session, project, name=f"round-{number}", unique=True, task=dataset.task,
                description=f"Labelling assistant of {dataset.slug}, round {number} ({labelled} labelled images)")
            args: dict[str, Any] = {"model": base_model(session, assistant, principal, dataset.task),
                                    "data": f"ul://{owner.username}/datasets/{derived.slug}",
                                    "epochs": assistant.epochs, "imgsz": assistant.imgsz, "plots": False,
                                    **small_data_args(labelled)}
            started = launch.start(session, principal, StartRequest(
                modelId=model.id, gpuType=assistant.gpu_type, captureDatasetVersion=True, trainArgs=args),
                catalogue=catalogue, executor=executor, executor_name=executor_name)
    except LannerError as error:
        _fail(session, entry, f"the round could not start: {error.message}")
        return entry
    entry.model_id, entry.run_id = model.id, int(started["runId"])
    return entry


def watch(session: Session, entry: AssistantRound) -> None:
    """A training round follows its run: completed with weights -> scoring (its mAP50 kept); failed or cancelled
    -> failed with the run's reason."""
    run = session.get(Run, entry.run_id) if entry.run_id is not None else None
    model = session.get(ModelRecord, entry.model_id) if entry.model_id else None
    if run is None or model is None:
        _fail(session, entry, "its model or run was deleted")
        return
    status = RunStatus(run.status)
    if status is RunStatus.COMPLETED and model.weights_sha256:
        _change(session, entry, SCORING, reason=f"run {run.id} completed", map50=map50(model.metrics or {}))
    elif status is RunStatus.COMPLETED and run.settled_at is not None:
        _fail(session, entry, "the run completed without weights")
    elif status in (RunStatus.FAILED, RunStatus.CANCELLED):
        error = run.error or model.training_error
        detail = error.get("message") if isinstance(error, dict) else None
        _fail(session, entry, f"the run {status.value}: {detail or run.termination_reason or status.value}")


def _change(session: Session, entry: AssistantRound, to: str, *, reason: str, **values: Any) -> bool:
    """The one way a round's status changes; False (and nothing changed) when it was no longer in a status
    ``to`` may come from."""
    return try_change_status(session, entry, to, allowed_from=ALLOWED[to], reason=reason[:300], **values)


def _fail(session: Session, entry: AssistantRound, reason: str) -> None:
    if _change(session, entry, FAILED, reason=reason, completed_at=utcnow()):
        entry.reason = reason[:500]  # the round's own column (``reason=`` above is the event's)


def map50(metrics: dict[str, Any]) -> float | None:
    """The run's own final mAP50 on its validation images (boxes first; masks, keypoints otherwise)."""
    for key in ("metrics/mAP50(B)", "metrics/mAP50(M)", "metrics/mAP50(P)"):
        value = metrics.get(key)
        if isinstance(value, int | float):
            return float(value)
    return None


def store_scores(session: Session, assistant: Assistant, entry: AssistantRound, scores: dict[str, float]) -> bool:
    """The round is complete and its scores replace the previous round's; False (nothing stored) when the round
    was no longer scoring."""
    if not _change(session, entry, COMPLETED, reason=f"unlabelled images scored: {len(scores)}", scored=len(scores),
                   completed_at=utcnow()):
        return False
    session.execute(delete(AssistantScore).where(AssistantScore.assistant_id == assistant.id))
    session.add_all(AssistantScore(assistant_id=assistant.id, item_key=key, round=entry.round, score=score)
                    for key, score in scores.items())
    return True
