"""A tiny trained detector for tests that need real weights (exports, inference, deployments), and a way to put
weights on a model in a test's server without training there.

``tiny_detector(cache)`` trains ``yolo11n.yaml`` for 2 epochs at 64 px on the synthetic shapes (nothing is
downloaded) in a clean subprocess, once per test session, and returns ``best.pt`` (about 5 MB). Its boxes are
poor but deterministic: compare predictions at a low ``conf`` (e.g. 0.001) so there are some.
``shape_localizer(cache)`` is a well-trained one-class detector: the labelling assistant's pretrained base.

``attach_weights(app, account, weights, project=, model=)`` stores the file in the app's blob store and creates
(or updates) ``account``'s project and model with those weights, the task and class names read from the
checkpoint, exactly as a finished run leaves them."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lanner.synthetic import CLASSES, make_detection_dataset
from tests.servers import VENV_BIN

EPOCHS = 2
IMGSZ = 64

_SCRIPT = """
import sys
from ultralytics import YOLO
model = YOLO("yolo11n.yaml")
model.train(data=sys.argv[1], epochs=int(sys.argv[3]), imgsz=int(sys.argv[4]), batch=int(sys.argv[5]), workers=0,
            device="cpu", plots=False, project=sys.argv[2], name="run", exist_ok=True, seed=0, deterministic=True,
            val=True, amp=False)
"""


def _train(cache: Path, data: Path, *, epochs: int, imgsz: int, batch: int) -> Path:
    """``best.pt`` of yolo11n.yaml trained on ``data`` in a clean subprocess (no pytest marker, no Platform
    callbacks, nothing downloaded), into ``cache`` on first use."""
    weights = cache / "run" / "weights" / "best.pt"
    if weights.exists():
        return weights
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(cache), "YOLO_CONFIG_DIR": str(cache / "config"),
           "OMP_NUM_THREADS": "2", "MPLBACKEND": "Agg", "YOLO_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", _SCRIPT, str(data), str(cache), str(epochs), str(imgsz),
                             str(batch)], cwd=cache, env=env, capture_output=True, text=True, timeout=1200,
                            check=False)
    if result.returncode != 0 or not weights.exists():
        raise RuntimeError(f"training {data} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return weights


def tiny_detector(cache: Path) -> Path:
    """``best.pt`` of the tiny detector, trained into ``cache`` on first use."""
    data = make_detection_dataset(cache / "shapes", train=16, val=8, size=IMGSZ)
    return _train(cache, data, epochs=EPOCHS, imgsz=IMGSZ, batch=8)


def shape_localizer(cache: Path) -> Path:
    """A detector that finds shapes but cannot tell them apart: one class, ``shape``, 40 epochs on 200 other
    synthetic images (about 2 minutes on two cores; mAP50 about 0.9). It stands in for the operator's official
    weights, pretrained on other data, that the labelling assistant's first round fine-tunes: the classes a person
    labels (circle, square) it must learn from those labels."""
    data = make_detection_dataset(cache / "shapes", train=200, val=30, size=96, seed=7)
    for labels in (cache / "shapes" / "labels").rglob("*.txt"):
        rows = [line.split(maxsplit=1) for line in labels.read_text().splitlines() if line.strip()]
        labels.write_text("".join(f"0 {rest}\n" for _, rest in rows))
    data.write_text(f"path: {cache / 'shapes'}\ntrain: images/train\nval: images/val\nnames:\n  0: shape\n")
    return _train(cache, data, epochs=40, imgsz=64, batch=16)


def _shared(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]) -> Path:
    """``make(cache)`` once for the whole run: with pytest-xdist every worker asks, the first trains under a lock
    in the run's shared temporary folder and the others find its weights there."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # popen-gw0, popen-gw1, ... share their parent
    cache = root / name
    cache.mkdir(exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return make(cache)


@pytest.fixture(scope="session")
def tiny_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's tiny detector (see ``tiny_detector``); copy it before changing it."""
    return _shared(tmp_path_factory, "tiny-detector", tiny_detector)


@pytest.fixture(scope="session")
def localizer_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's one-class shape detector (see ``shape_localizer``); copy it before changing it."""
    return _shared(tmp_path_factory, "shape-localizer", shape_localizer)


def attach_weights(app: Any, account: Any, weights: Path, *, project: str = "shapes", model: str = "tiny") -> str:
    """Give ``account`` a model ``project/model`` whose weights are ``weights``; returns the model's id."""
    from lanner.accounts.principal import Principal
    from lanner.accounts.service import get_user_by_username
    from lanner.errors import NotFound
    from lanner.projects import service as projects_service

    ctx = app.state.lanner
    with weights.open("rb") as handle:
        stored = ctx.blobs.put_file(handle)
    with ctx.db.session() as session:
        principal = Principal.of(get_user_by_username(session, username=account.username))
        try:
            proj = projects_service.get_project(session, principal, owner=account.username, slug=project, write=True)
        except NotFound:
            proj = projects_service.create_project(session, principal, slug=project, name=project)
        try:
            record = projects_service.get_model(session, principal, owner=account.username, project=project,
                                                model=model, write=True)
        except NotFound:
            record = projects_service.create_model(session, proj, name=model)
        record.weights_sha256 = stored.sha256
        record.weights_size = stored.size
        record.weights_name = "best.pt"
        record.task = "detect"
        record.class_names = list(CLASSES)
        record.status = "completed"
        session.commit()
        return record.id


def copy_weights(weights: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, dest)
    return dest

