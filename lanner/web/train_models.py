"""What the train dialog starts a model from, and the settings that follow from it.

The model field offers the pretrained starts this server has for the dataset's task (``projects.starting``:
official weights, then offered starting points such as the demo's), the best one pre-selected, as
``training.start`` picks it when a request names none; a start still training is shown, not offered. Picking
random weights (a YAML) on a small dataset brings a warning with what to expect and what to pick instead. The image
size starts at what the dataset's images need: a 160-pixel image trained at 640 costs 16 times the compute for
nothing it can learn."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets.models import Dataset, DatasetItem, ImageBlob
from lanner.projects import starting
from lanner.training import inputs

# Below this many training images, random weights learn next to nothing in a run of a sensible length (the first
# hour's 40-image dataset: mAP 0.000 after 5 epochs, mAP50-95 0.062 after 60); fine-tuning is the norm there.
SMALL_FOR_SCRATCH = 5000
DEFAULT_IMGSZ = 640


def starts(session: Session, user: Principal, task: str) -> list[dict[str, Any]]:
    """The pretrained starts for ``task``, the best first; those still training last (``ready`` false)."""
    return [{"uri": s.uri, "name": s.name, "source": s.source, "note": s.note, "ready": s.ready, "status": s.status}
            for s in starting.choices(session, user, task)]


def default_model(offered: list[dict[str, Any]], task: str) -> str:
    """The model a dialog opened without one starts from: the best ready start, else random weights."""
    return next((s["uri"] for s in offered if s["ready"]), inputs.scratch_yaml(task))


def scratch_warning(model: str, train_images: int | None, offered: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What to tell someone about to train ``model`` from random weights on ``train_images`` images; None when it
    starts from weights or the dataset is large enough to learn from scratch."""
    if not model.endswith(".yaml") or train_images is None or train_images >= SMALL_FOR_SCRATCH:
        return None
    ready = [s for s in offered if s["ready"]]
    training = [s for s in offered if not s["ready"] and s["status"] not in ("failed", "cancelled")]
    return {"images": train_images, "model": model, "pretrained": ready[0] if ready else None,
            "training": training[0] if training else None, "command": "lanner models add-official yolo11n.pt"}


def default_imgsz(session: Session, dataset: Dataset | None) -> int:
    """The trainer's 640, or less when every image of the dataset is smaller: its longest side, rounded up to the
    trainer's stride of 32."""
    if dataset is None:
        return DEFAULT_IMGSZ
    widest, tallest = session.execute(select(func.max(ImageBlob.width), func.max(ImageBlob.height))
                                      .join(DatasetItem, DatasetItem.sha256 == ImageBlob.sha256)
                                      .where(DatasetItem.manifest_id == dataset.manifest_id)).one()
    if not widest or not tallest:
        return DEFAULT_IMGSZ
    return min(DEFAULT_IMGSZ, max(32, math.ceil(max(widest, tallest) / 32) * 32))
