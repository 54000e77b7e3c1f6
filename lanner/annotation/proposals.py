"""Model-proposed labels: which models may propose for a dataset, running one on dataset images through shared
inference (its model cache, runtime and conversion to dataset labels), and counting how many proposals the
person kept unchanged.

Model classes map onto the dataset's by name, case-insensitive (``inference.service.class_map``); a model class
the dataset does not name is dropped and listed. Every answer is recorded (``LabelProposal``, one open record
per image and model), so the saves of the image can count what was accepted unchanged: the same class and
geometry within ``TOLERANCE``, each saved label matching at most one proposal.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.annotation.models import LabelProposal
from lanner.context import AppContext
from lanner.datasets.models import Dataset, DatasetItem
from lanner.db import utcnow
from lanner.errors import NotFound, Unprocessable
from lanner.inference import service as inference_service
from lanner.inference.images import decode_image
from lanner.inference.predictor import Predictor, Weights
from lanner.integrations import pixels as bucket_pixels
from lanner.projects.models import ModelRecord, Project
from lanner.teams import permissions
from lanner.training import refs

TOLERANCE = 1e-4
GEOMETRY = ("bbox", "segments", "obb", "keypoints")
MAX_MODELS = 200
DEFAULT_IMGSZ = 640


# --- which models --------------------------------------------------------------------------------

def _mapping(model_names: Sequence[str], dataset_names: Sequence[str]) -> dict[str, int | None]:
    targets = inference_service.class_map(None, model_names=model_names, dataset_names=dataset_names)
    if targets is None:  # the dataset names no classes: model classes keep their numbers
        return {str(name): index for index, name in enumerate(model_names)}
    return {str(name): target for name, target in zip(model_names, targets, strict=True)}


def _readable_models(session: Session, principal: Principal) -> Any:
    return (select(ModelRecord, Project.slug, User.username)
            .join(Project, Project.id == ModelRecord.project_id).join(User, User.id == Project.owner_id)
            .where(ModelRecord.weights_sha256.is_not(None),
                   or_(Project.owner_id == principal.user_id, Project.visibility == "public",
                       Project.owner_id.in_(permissions.team_ids(principal.user_id)))))


def model_view(record: ModelRecord, ref: str, dataset: Dataset, names: Sequence[str] | None = None
               ) -> dict[str, Any]:
    names = [str(n) for n in (names if names is not None else record.class_names or [])]
    mapping = _mapping(names, [str(n) for n in dataset.class_names or []])
    return {"id": record.id, "ref": ref, "name": record.name, "task": record.task, "classNames": names,
            "matched": sum(1 for v in mapping.values() if v is not None),
            "unmatched": [k for k, v in mapping.items() if v is None]}


def proposal_models(session: Session, principal: Principal, dataset: Dataset) -> list[dict[str, Any]]:
    """Models with weights the caller may read whose task is the dataset's: the caller's own first, newest
    first."""
    rows = session.execute(_readable_models(session, principal).where(ModelRecord.task == dataset.task)
                           .order_by((Project.owner_id == principal.user_id).desc(), ModelRecord.updated_at.desc())
                           .limit(MAX_MODELS)).all()
    return [model_view(record, f"{owner}/{project}/{record.slug}", dataset) for record, project, owner in rows]


def resolve_model(session: Session, principal: Principal, value: str) -> tuple[ModelRecord, str]:
    """A model by ``owner/project/model`` (``ul://`` optional) or by id, if the caller may read it (404 as if
    missing otherwise); returns it with its ``owner/project/model``."""
    text = value.strip().removeprefix(refs.SCHEME)
    query = _readable_models(session, principal)
    parts = text.split("/")
    if len(parts) == 3 and all(parts):
        query = query.where(User.username == parts[0].lower(), Project.slug == parts[1], ModelRecord.slug == parts[2])
    elif len(parts) == 1:
        query = query.where(ModelRecord.id == text)
    else:
        raise Unprocessable("model must be owner/project/model or a model id")
    row = session.execute(query.limit(1)).first()
    if row is None:
        raise NotFound(f"model '{value[:200]}' not found, or it has no weights yet")
    record, project, owner = row
    return record, f"{owner}/{project}/{record.slug}"


def model_ref(session: Session, record: ModelRecord) -> str:
    project = session.get(Project, record.project_id)
    assert project is not None
    owner = session.scalar(select(User.username).where(User.id == project.owner_id))
    return f"{owner}/{project.slug}/{record.slug}"


# --- running a model on dataset images -----------------------------------------------------------

def propose(session: Session, ctx: AppContext, dataset: Dataset, model_record: ModelRecord, keys: Sequence[str],
            conf: float, *, predictor: Predictor) -> dict[str, Any]:
    """Run ``model_record`` on the images ``keys`` of ``dataset`` (on the calling thread: never call it on the
    event loop) and record what was proposed. The caller has checked that it may read the model."""
    keys = list(dict.fromkeys(keys))
    bucket_pixels.require_processing(session, dataset, "smart annotation")  # the bucket integration's AI switch
    if model_record.task and model_record.task != dataset.task:
        raise Unprocessable(f"a {model_record.task} model cannot propose labels for a {dataset.task} dataset")
    digest = model_record.weights_sha256
    if not digest or not ctx.blobs.exists(digest):
        raise Unprocessable("this model has no weights on this server", code="no_weights")
    rows = {key: sha256 for key, sha256 in session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
        DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.key.in_(keys)))}
    missing = [k for k in keys if k not in rows]
    if missing:
        raise NotFound(f"image '{missing[0][:40]}' not found")
    weights = Weights(digest, partial(ctx.blobs.copy_to, digest))
    info = predictor.info_now(weights)
    if info.task != dataset.task:
        raise Unprocessable(f"a {info.task} model cannot propose labels for a {dataset.task} dataset")
    dataset_names = [str(n) for n in dataset.class_names or []]
    mapping = _mapping(info.class_names, dataset_names)
    targets = inference_service.class_map(None, model_names=info.class_names, dataset_names=dataset_names)
    limit = ctx.settings.inference_max_bytes
    pixels = inference_service.DatasetPixels(session, ctx.settings, ctx.blobs, dataset.owner_id)
    images = [decode_image(pixels.read(rows[k], max_bytes=limit), max_pixels=ctx.settings.inference_max_pixels,
                           field=f"image {k}") for k in keys]
    imgsz = int((model_record.train_args or {}).get("imgsz") or DEFAULT_IMGSZ)
    answers = predictor.annotate_now(weights, images, conf=conf, iou=0.7, imgsz=imgsz, class_map=targets)
    ref = model_ref(session, model_record)
    proposed: dict[str, list[dict[str, Any]]] = {}
    for key, answer in zip(keys, answers, strict=True):
        labels = answer["predictions"]
        proposed[key] = [{**label, "confidence": c} for label, c in zip(labels, answer["confidences"], strict=True)]
        _record(session, dataset, key, model_record.id, ref, labels)
    session.flush()
    return {"model": model_view(model_record, ref, dataset, info.class_names), "mapping": mapping,
            "unmatched": [k for k, v in mapping.items() if v is None], "images": proposed}


def _record(session: Session, dataset: Dataset, key: str, model_id: str, ref: str, labels: list[dict]) -> None:
    """One open record per image and model: proposing again (the editor pre-fills each time it opens an image)
    replaces the proposals instead of counting them twice."""
    record = session.scalar(select(LabelProposal).where(
        LabelProposal.dataset_id == dataset.id, LabelProposal.item_key == key, LabelProposal.model_id == model_id,
        LabelProposal.resolved_at.is_(None)))
    if record is None:
        record = LabelProposal(dataset_id=dataset.id, item_key=key, model_id=model_id, model_ref=ref[:300])
        session.add(record)
    record.labels, record.shown, record.created_at = labels, len(labels), utcnow()


# --- acceptance ----------------------------------------------------------------------------------

def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.get("classId") != b.get("classId"):
        return False
    for name in GEOMETRY:
        x, y = a.get(name), b.get(name)
        if (x is None) != (y is None):
            return False
        if x is not None and (len(x) != len(y) or any(abs(float(p) - float(q)) > TOLERANCE
                                                      for p, q in zip(x, y, strict=True))):
            return False
    return True


def accepted_unchanged(proposed: Sequence[dict[str, Any]], saved: Sequence[dict[str, Any]]) -> int:
    """How many proposals are among the saved labels as they were (each saved label counts once)."""
    free = list(saved)
    count = 0
    for proposal in proposed:
        match = next((i for i, label in enumerate(free) if _same(proposal, label)), None)
        if match is not None:
            free.pop(match)
            count += 1
    return count


def resolve(session: Session, dataset: Dataset, key: str, saved: list[dict[str, Any]]) -> str | None:
    """Count each model's latest proposals for the image against the labels saved; returns the model whose
    whole proposal set was saved unchanged (nothing added, nothing removed), if one was.

    A record is counted again by every later save of the image, not only by the first one after it: the editor
    saves each change, so accepting proposals one at a time is one save per proposal, and only the newest save
    says which were kept. A record stops counting once the same model proposes for the image again (a new
    record, see ``_record``)."""
    records = session.scalars(select(LabelProposal).where(
        LabelProposal.dataset_id == dataset.id, LabelProposal.item_key == key)
        .order_by(LabelProposal.created_at.desc(), LabelProposal.id.desc()))
    latest: dict[str, LabelProposal] = {}
    for record in records:
        latest.setdefault(record.model_id, record)
    whole: str | None = None
    now = utcnow()
    for record in latest.values():
        kept = accepted_unchanged(record.labels or [], saved)
        record.accepted_unchanged, record.resolved_at = kept, now
        if whole is None and record.labels and kept == len(record.labels) == len(saved):
            whole = record.model_ref
    return whole


def acceptance(session: Session, dataset_id: str, model_id: str | None = None) -> dict[str, int]:
    """Proposals shown and accepted unchanged over the dataset's saved images (of one model, if given)."""
    query = select(func.coalesce(func.sum(LabelProposal.shown), 0),
                   func.coalesce(func.sum(LabelProposal.accepted_unchanged), 0)).where(
        LabelProposal.dataset_id == dataset_id, LabelProposal.resolved_at.is_not(None))
    if model_id is not None:
        query = query.where(LabelProposal.model_id == model_id)
    shown, accepted = session.execute(query).one()
    return {"shown": int(shown), "acceptedUnchanged": int(accepted)}
