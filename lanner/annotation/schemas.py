"""Wire shapes of the annotate API: the bodies it takes (bounded) and the state of one image's labels."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import Count
from lanner.datasets.models import DatasetItem
from lanner.db import iso

MAX_LABELS = 10_000   # objects on one image; the body limit bounds their size too
MAX_PROPOSAL_KEYS = 50
CONF_MIN, CONF_MAX, CONF_DEFAULT = 0.01, 1.0, 0.25  # the hosted inference range (lanner.inference.schemas)


class SaveLabels(BaseModel):
    """``PUT .../annotate/{key}``: the image's whole label list, the revision it was edited from, and an id the
    client keeps for this edit across retries."""

    model_config = ConfigDict(extra="ignore")

    labels: list[dict[str, Any]] = Field(max_length=MAX_LABELS)
    revision: Count
    editId: str = Field(min_length=1, max_length=64)
    classId: Count | None = Field(default=None, description="classify datasets: the image's class (null: none)")


class ProposalsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1, max_length=400, description="owner/project/model (or ul://...), or a model id")
    keys: list[str] = Field(min_length=1, max_length=MAX_PROPOSAL_KEYS)
    conf: float = Field(default=CONF_DEFAULT, ge=CONF_MIN, le=CONF_MAX, allow_inf_nan=False)


def label_state(item: DatasetItem) -> dict[str, Any]:
    """What a save answers and a conflict carries as ``current``."""
    return {"labels": list(item.labels or []), "classId": item.class_id, "revision": int(item.label_rev or 0),
            "labelledBy": item.labelled_by, "labelledAt": iso(item.labelled_at)}
