"""Wire shapes for projects and models: camelCase, as ``ultralytics_platform/types.py`` declares them."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import TEXT_MAX_CHARS, Count, FiniteFloat, JsonObject
from lanner.db import iso
from lanner.projects.models import ModelRecord, Project
from lanner.resources import OwnedResourceCreate, OwnedResourceUpdate

REGION = "us"


def numeric_metrics(metrics: dict[str, Any] | None) -> dict[str, float]:
    """The SDK types metrics as ``dict[str, float]``: drop anything that is not a finite number."""
    out: dict[str, float] = {}
    for key, value in (metrics or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[str(key)] = float(value)
    return out


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def project_item(project: Project, *, owner: str, model_count: int, model_names: list[str] | None = None,
                 star_count: int = 0, starred: bool = False) -> dict[str, Any]:
    return _drop_none({
        "id": project.id,
        "owner": owner,
        "project": project.slug,
        "name": project.name,
        "description": project.description or "",
        "visibility": project.visibility,
        "tags": list(project.tags or []),
        "license": project.license,
        "iconColor": project.icon_color,
        "modelCount": model_count,
        "modelNames": model_names,
        "starCount": star_count,
        "isStarred": starred,
        "archived": project.archived,
        "region": REGION,
        "createdAt": iso(project.created_at),
        "updatedAt": iso(project.updated_at),
    })


def model_summary(record: ModelRecord, *, epoch_count: int) -> dict[str, Any]:
    """The per-model entry of ``projects.retrieve``."""
    return _drop_none({
        "id": record.id,
        "model": record.slug,
        "name": record.name,
        "task": record.task,
        "status": record.status,
        "epochs": record.epochs,
        "bestEpoch": record.best_epoch,
        "bestFitness": record.best_fitness,
        "metrics": numeric_metrics(record.metrics) if record.metrics else None,
        "epochCount": epoch_count,
        "startedAt": iso(record.started_at),
        "file": {"size": float(record.weights_size)} if record.weights_sha256 else None,
        "hasWeights": record.weights_sha256 is not None,
        "trainArgs": record.train_args,
        "createdAt": iso(record.created_at),
        "updatedAt": iso(record.updated_at),
    })


def model_item(record: ModelRecord, *, owner: str, project: Project, extra: dict[str, Any] | None = None,
               star_count: int = 0, starred: bool = False) -> dict[str, Any]:
    """A full model as ``models.list`` and ``models.retrieve`` return it."""
    body = {
        "id": record.id,
        "owner": owner,
        "project": project.slug,
        "projectName": project.name,
        "model": record.slug,
        "visibility": project.visibility,
        "name": record.name,
        "description": record.description or "",
        "status": record.status,
        "task": record.task,
        "baseModel": record.base_model,
        "epochs": record.epochs,
        "bestEpoch": record.best_epoch,
        "bestFitness": record.best_fitness,
        "trainArgs": record.train_args,
        "metrics": numeric_metrics(record.metrics) if record.metrics else None,
        "hasWeights": record.weights_sha256 is not None,
        "file": {"size": float(record.weights_size)} if record.weights_sha256 else None,
        "startedAt": iso(record.started_at),
        "completedAt": iso(record.completed_at),
        "classNames": [str(n) for n in record.class_names] if record.class_names else None,
        "plots": record.plots,
        "trainingError": record.training_error,
        "starCount": star_count,
        "isStarred": starred,
        "environment": record.environment,
        "createdAt": iso(record.created_at),
        "updatedAt": iso(record.updated_at),
    }
    body.update(extra or {})
    return _drop_none(body)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ProjectCreate(OwnedResourceCreate):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    project: str | None = Field(default=None, max_length=128)


class ModelCreate(_Body):
    project: str = Field(min_length=1, max_length=128)
    owner: str | None = Field(default=None, max_length=64)
    model: str | None = Field(default=None, max_length=128)
    name: str | None = Field(default=None, max_length=200)
    description: str = Field(default="", max_length=TEXT_MAX_CHARS)
    task: str | None = Field(default=None, max_length=20)
    metadata: JsonObject | None = None
    trainArgs: JsonObject | None = None
    epochs: Count | None = None


class ModelClone(_Body):
    """``models.clone``: where the copy goes. ``owner`` may only be the caller; ``project`` is created if missing."""

    project: str = Field(min_length=1, max_length=128)
    owner: str | None = Field(default=None, max_length=64)
    model: str | None = Field(default=None, min_length=1, max_length=128)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=TEXT_MAX_CHARS)


class ProjectClone(_Body):
    """``projects.clone``: the new project (``project`` is its slug) and which models it takes (default: every
    completed model with weights)."""

    project: str | None = Field(default=None, min_length=1, max_length=128)
    owner: str | None = Field(default=None, max_length=64)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=TEXT_MAX_CHARS)
    visibility: str | None = Field(default=None, max_length=10)
    license: str | None = Field(default=None, max_length=40)
    models: list[Annotated[str, Field(max_length=128)]] | None = Field(default=None, max_length=1000)


class ProjectUpdate(OwnedResourceUpdate):
    archived: bool | None = None
    iconColor: str | None = Field(default=None, max_length=20)


class ModelUpdate(_Body):
    """What ``models.update`` may change (``service.update_model``); a null or absent field is left alone."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    status: str | None = Field(default=None, max_length=20)
    description: str | None = Field(default=None, max_length=TEXT_MAX_CHARS)
    metadata: JsonObject | None = None
    trainArgs: JsonObject | None = None
    epochs: Count | None = None
    bestEpoch: Count | None = None
    bestFitness: FiniteFloat | None = None
    trainingError: JsonObject | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)
