"""The assistant's settings, what the dataset page shows of it, and "label next".

Only the dataset's owner sees or changes its assistant (it spends the owner's credit): anyone else gets the
404 a missing dataset gets."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.annotation import proposals
from lanner.assistant import rounds, training_data
from lanner.assistant.models import (
    DEFAULT_EPOCHS,
    DEFAULT_EVERY,
    DEFAULT_IMGSZ,
    DEFAULT_MIN_LABELS,
    FAILED,
    SCORING,
    TRAINING,
    Assistant,
    AssistantRound,
    AssistantScore,
)
from lanner.assistant.schemas import AssistantUpdate
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import iso, utcnow
from lanner.errors import Forbidden, Unprocessable
from lanner.gpus.catalogue import Catalogue

FIELDS = {"enabled": "enabled", "minLabels": "min_labels", "every": "every", "gpuType": "gpu_type",
          "epochs": "epochs", "imgsz": "imgsz"}


def find(session: Session, dataset: Dataset) -> Assistant | None:
    return session.scalar(select(Assistant).where(Assistant.dataset_id == dataset.id))


def payer_tier(session: Session, dataset: Dataset) -> str:
    """The plan the assistant's rounds run under: the dataset's workspace's (a team's rounds are the team's),
    whoever changes the settings."""
    owner = session.get(User, dataset.owner_id)
    return owner.tier if owner is not None else "free"


def update(session: Session, dataset: Dataset, body: AssistantUpdate, *, catalogue: Catalogue,
           tier: str) -> Assistant:
    """Save the fields sent; saving also lets a failed round be retried at once (``rounds.due``).

    A GPU type the owner's plan does not allow is refused as the train dialog refuses it (403 ``tier_required``):
    saved, it would only make every round fail at launch. The type already saved may stay (a plan that changed
    since), so that saving other fields does not force a choice."""
    if body.gpuType is not None and body.gpuType not in catalogue:
        raise Unprocessable(f"gpuType: unknown GPU type '{body.gpuType}'")
    assistant = find(session, dataset)
    saved = assistant.gpu_type if assistant is not None else None
    if body.gpuType is not None and body.gpuType != saved:
        gpu = catalogue.get(body.gpuType)
        if not gpu.allowed_for(tier):
            raise Forbidden(f"gpuType: {gpu.display_name} needs the {gpu.min_tier} tier or higher (your tier: "
                            f"{tier})", code="tier_required", extra={"requiredTier": gpu.min_tier})
    if assistant is None:
        assistant = Assistant(dataset_id=dataset.id)
        session.add(assistant)
    for field, column in FIELDS.items():
        value = getattr(body, field)
        if value is not None:
            setattr(assistant, column, value)
    assistant.updated_at = utcnow()
    session.flush()
    return assistant


def status(assistant: Assistant | None, last: AssistantRound | None, *, labelled: int,
           next_at: int | None) -> tuple[str, str | None]:
    """The state a person reads; ``starting`` when round 1 has its labels and the loop has yet to launch it, so
    "waiting for labels" never shows beside enough labels."""
    if assistant is None or not assistant.enabled:
        return "off", None
    if last is not None and last.status in (TRAINING, SCORING):
        return "training", None
    if last is not None and last.status == FAILED:
        return "failed", last.reason
    if last is not None:
        return "ready", None
    return ("starting" if next_at is not None and labelled >= next_at else "waiting"), None


def view(session: Session, dataset: Dataset, assistant: Assistant | None) -> dict[str, Any]:
    """``GET .../assistant``: settings, state, the newest model and every round."""
    defaults = assistant or Assistant(enabled=False, min_labels=DEFAULT_MIN_LABELS, every=DEFAULT_EVERY,
                                      gpu_type="cpu", epochs=DEFAULT_EPOCHS, imgsz=DEFAULT_IMGSZ)
    entries = list(session.scalars(select(AssistantRound).where(AssistantRound.assistant_id == assistant.id)
                                   .order_by(AssistantRound.round))) if assistant else []
    last = entries[-1] if entries else None
    labelled = training_data.labelled_count(session, dataset)
    images = datasets_service.dataset_counts(session, dataset)["images"]
    next_at = rounds.next_round_at(defaults, last, images)
    state, reason = status(assistant, last, labelled=labelled, next_at=next_at)
    newest = rounds.newest_model_round(session, assistant) if assistant else None
    refs = {e.model_id: rounds.model_ref(session, e.model_id) for e in entries if e.model_id}
    accepted = {model_id: proposals.acceptance(session, dataset.id, model_id) for model_id in refs}
    return {
        "enabled": bool(defaults.enabled), "status": state, "reason": reason, "minLabels": defaults.min_labels,
        "every": defaults.every, "gpuType": defaults.gpu_type, "epochs": defaults.epochs, "imgsz": defaults.imgsz,
        "labelled": labelled, "images": images, "nextRoundAt": next_at,
        "model": {"ref": refs.get(newest.model_id), "id": newest.model_id} if newest else None,
        "rounds": [{"round": e.round, "labelled": e.labelled, "modelRef": refs.get(e.model_id), "status": e.status,
                    "reason": e.reason, "startedAt": iso(e.started_at), "completedAt": iso(e.completed_at),
                    "mAP50": e.map50, "scored": e.scored,
                    **accepted.get(e.model_id or "", {"shown": 0, "acceptedUnchanged": 0})}
                   for e in entries],
    }


def label_next(session: Session, dataset: Dataset, assistant: Assistant | None, *, limit: int) -> dict[str, Any]:
    """Unlabelled images, the newest assistant's least sure first; images it has not scored (added since, or
    no assistant yet) follow in the dataset's name order."""
    unlabelled = [DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.labels.is_(None),
                  DatasetItem.class_id.is_(None)]
    basis = "no assistant yet"
    images: list[dict[str, Any]] = []
    if assistant is not None:
        scored = session.execute(
            select(DatasetItem.key, DatasetItem.name, AssistantScore.score, AssistantScore.round)
            .join(AssistantScore, (AssistantScore.item_key == DatasetItem.key)
                  & (AssistantScore.assistant_id == assistant.id))
            .where(*unlabelled).order_by(AssistantScore.score.desc(), DatasetItem.name, DatasetItem.key)
            .limit(limit)).all()
        images = [{"key": r.key, "name": r.name, "score": round(float(r.score), 6)} for r in scored]
        if scored:
            basis = f"assistant round {max(r.round for r in scored)}"
    if len(images) < limit:
        seen = select(AssistantScore.item_key).where(AssistantScore.assistant_id == assistant.id) \
            if assistant is not None else None
        query = select(DatasetItem.key, DatasetItem.name).where(*unlabelled)
        if seen is not None:
            query = query.where(DatasetItem.key.not_in(seen))
        rest = session.execute(query.order_by(DatasetItem.name, DatasetItem.key).limit(limit - len(images)))
        images += [{"key": r.key, "name": r.name, "score": None} for r in rest]
    return {"images": images, "basis": basis}
