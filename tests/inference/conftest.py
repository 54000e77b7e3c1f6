"""Fixtures of the shared-inference tests: real weights for every task, built here (nothing is downloaded), and a
test image.

- ``tiny_weights`` (``tests/trained.py``): a yolo11n detector trained for 2 epochs on the synthetic shapes.
- ``task_weights``: random-init ``yolo11n{,-seg,-pose,-obb,-cls}`` models with 3 classes, one checkpoint per
  task, saved by ``YOLO.save`` like any trained model. Their predictions are noise, but deterministic: at a low
  ``conf`` (0.01) and a small image size there are rows to compare.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.trained import attach_weights, tiny_weights  # noqa: F401  (a fixture, used by the tests here)

NAMES = {0: "circle", 1: "square", 2: "triangle"}
TASK_YAMLS = {"detect": "yolo11n.yaml", "segment": "yolo11n-seg.yaml", "pose": "yolo11n-pose.yaml",
              "obb": "yolo11n-obb.yaml", "classify": "yolo11n-cls.yaml"}


def build_task_model(task: str, path: Path) -> Path:
    """A random-init 3-class model of ``task`` saved at ``path``. Random init alone answers a constant for every
    image (activations shrink layer by layer until the head sees zeros), so its batch norms are calibrated on a
    few synthetic images and the class logits' bias lowered to about 5%: scores then differ per box."""
    # torch and Ultralytics cost seconds to import: only the tests that build models pay it
    import torch
    from ultralytics import YOLO
    from ultralytics.nn import tasks

    kinds = {"detect": tasks.DetectionModel, "segment": tasks.SegmentationModel, "pose": tasks.PoseModel,
             "obb": tasks.OBBModel, "classify": tasks.ClassificationModel}
    torch.manual_seed(0)
    network = kinds[task](TASK_YAMLS[task], nc=len(NAMES), verbose=False)
    for module in network.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = None  # a plain average over the calibration batch
            module.reset_running_stats()
    images = [torch.from_numpy(shapes_image(128, 128, seed=s)).permute(2, 0, 1).float() / 255 for s in range(8)]
    network.train()
    with torch.no_grad():
        network(torch.stack(images))
    if task != "classify":
        for branch in network.model[-1].cv3:
            torch.nn.init.constant_(branch[-1].bias, -3.0)
    model = YOLO(TASK_YAMLS[task])
    network.args, network.task, network.names = model.model.args, model.model.task, dict(NAMES)
    model.model = network
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(str(path))
    return path


@pytest.fixture(scope="session")
def task_weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("task-models")
    return {task: build_task_model(task, folder / f"{task}.pt") for task in TASK_YAMLS}


def shapes_image(width: int = 128, height: int = 96, seed: int = 0) -> np.ndarray:
    """A BGR image of a few filled circles and squares on white, like the synthetic training set."""
    rng = np.random.default_rng(seed)
    image = np.full((height, width, 3), 255, np.uint8)
    for _ in range(3):
        side = int(rng.integers(min(width, height) // 6, min(width, height) // 3))
        x, y = int(rng.integers(0, width - side)), int(rng.integers(0, height - side))
        color = tuple(int(c) for c in rng.integers(0, 200, 3))
        if rng.random() < 0.5:
            cv2.circle(image, (x + side // 2, y + side // 2), side // 2, color, -1)
        else:
            cv2.rectangle(image, (x, y), (x + side, y + side), color, -1)
    return image


def encoded(image: np.ndarray, ext: str = ".jpg") -> bytes:
    ok, data = cv2.imencode(ext, image)
    assert ok
    return data.tobytes()


@pytest.fixture(scope="session")
def shapes_detector(tiny_weights: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """The tiny trained detector with its class logits lifted by +3. Two epochs at 64 px leave it scoring every
    box about 0.006, under the hosted minimum ``conf`` of 0.01, so through the API it would find nothing; the
    lift keeps its trained boxes and brings their scores to about 0.11."""
    # torch and Ultralytics cost seconds to import: only the tests that build models pay it
    import torch
    from ultralytics import YOLO

    model = YOLO(tiny_weights)
    with torch.no_grad():
        for branch in model.model.model[-1].cv3:
            branch[-1].bias += 3.0
    path = tmp_path_factory.mktemp("shapes-detector") / "best.pt"
    model.save(str(path))
    return path


@pytest.fixture
def image_file(tmp_path: Path) -> Path:
    path = tmp_path / "shapes.jpg"
    path.write_bytes(encoded(shapes_image()))
    return path


def attach(app: Any, account: Any, weights: Path, *, project: str = "shapes", model: str = "tiny",
           task: str = "detect", visibility: str = "private") -> str:
    """``attach_weights`` (which records a detector of the shapes), then the task and the project's visibility."""
    from sqlalchemy import select  # tests of the pure modules never touch the database

    from lanner.projects.models import ModelRecord, Project

    model_id = attach_weights(app, account, weights, project=project, model=model)
    with app.state.lanner.db.session() as session:
        record = session.get(ModelRecord, model_id)
        record.task = task
        session.scalar(select(Project).where(Project.id == record.project_id)).visibility = visibility
        session.commit()
    return model_id
