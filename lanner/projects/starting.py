"""Where a new model starts: pretrained weights whenever this server has some for the task, never random ones by
default.

A model trained from a YAML (random weights) on a few dozen images learns next to nothing: the first hour's
5-epoch run on 40 images scored mAP 0.000. Fine-tuning pretrained weights is what Roboflow and the hosted
platform do by default, so the train dialog, ``training.start`` without a model and the labelling assistant all
ask ``best`` here. The candidates, best first:

1. the operator's official weights for the task (``lanner.projects.official``): the newest family first
   (YOLO26, YOLO11, YOLOv8, YOLOv5), the smallest size first (n, s, m, l, x), since a first run should be quick;
2. models the operator offers as starting points (``StartingPoint`` rows): the demo's own, trained on this machine
   at ``lanner demo`` so a server with no internet still has one. Readable like their project.

A starting point still training is listed (``ready`` false, so the dialog can say it is on its way) but never
chosen."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.projects import official
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord, Project, StartingPoint

SIZES = "nsmlx"


@dataclass(frozen=True)
class Start:
    uri: str  # what trainArgs.model takes: ul://owner/project/model
    name: str  # what a person reads: "yolo11n", "shapes-base"
    source: str  # "official" | "server"
    task: str
    ready: bool  # weights there and its run complete
    note: str
    status: str  # the model's status (a starting point may still be training)
    model_id: str


def _family_rank(slug: str) -> tuple[int, int, str]:
    family = official.family_of(slug)
    families = list(official.FAMILIES)
    size = slug[len(family):len(family) + 1] if family else ""
    return (families.index(family) if family else len(families),
            SIZES.index(size) if size and size in SIZES else len(SIZES), slug)


def _official(session: Session, task: str) -> list[Start]:
    rows = session.execute(select(ModelRecord, Project.slug).join(Project, Project.id == ModelRecord.project_id)
                           .join(User, User.id == ModelRecord.owner_id)
                           .where(User.username == official.OWNER, ModelRecord.task == task,
                                  ModelRecord.weights_sha256.is_not(None))).all()
    starts = [Start(uri=official.uri(family, model.slug), name=model.slug, source="official", task=task, ready=True,
                    note="Official weights, pretrained on COCO" if task == "detect" else "Official weights",
                    status=model.status, model_id=model.id) for model, family in rows]
    return sorted(starts, key=lambda start: _family_rank(start.name))


def _offered(session: Session, principal: Principal, task: str) -> list[Start]:
    rows = session.execute(select(ModelRecord, Project, User.username, StartingPoint.note)
                           .join(StartingPoint, StartingPoint.model_id == ModelRecord.id)
                           .join(Project, Project.id == ModelRecord.project_id)
                           .join(User, User.id == ModelRecord.owner_id)
                           .where(ModelRecord.task == task)
                           .order_by(StartingPoint.created_at.desc())).all()
    return [Start(uri=f"ul://{owner}/{project.slug}/{model.slug}", name=model.slug, source="server", task=task,
                  ready=model.weights_sha256 is not None and model.status == "completed", note=note,
                  status=model.status, model_id=model.id)
            for model, project, owner, note in rows
            if projects_service.can_read(session, principal, owner_id=model.owner_id, visibility=project.visibility)]


def choices(session: Session, principal: Principal, task: str) -> list[Start]:
    """Every pretrained start the caller may use for ``task``, the best first; those still training last."""
    starts = _official(session, task) + _offered(session, principal, task)
    return [s for s in starts if s.ready] + [s for s in starts if not s.ready]


def best(session: Session, principal: Principal, task: str) -> Start | None:
    """The start a new model of ``task`` gets when nobody names one; None when the server has none ready."""
    return next((start for start in choices(session, principal, task) if start.ready), None)


def offer(session: Session, model: ModelRecord, *, note: str) -> StartingPoint:
    """Offer ``model`` as a starting point of its task (again: the note is updated)."""
    point = session.get(StartingPoint, model.id)
    if point is None:
        point = StartingPoint(model_id=model.id, note=note)
        session.add(point)
    point.note = note
    session.flush()
    return point
