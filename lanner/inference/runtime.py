"""A model loaded for inference, and a batch run through it: the only module of ``lanner.inference`` that imports
torch and Ultralytics (seconds of start-up), so the server imports it when the first model is loaded.

Loading never unpickles arbitrary code. A checkpoint is a user's upload, and a plain ``torch.load`` of it would
run whatever its pickle says inside the server. Weights are read with ``weights_only=True`` against
Ultralytics' allow-list of its own and torch's model classes (``torch_safe_load(safe_only=True)``); anything
else in the file refuses the load (``UnloadableWeights``), and nothing of it runs.

A batch runs through the model's own Ultralytics predictor (``DetectionPredictor`` and its siblings):
``preprocess`` (letterbox), the forward pass, ``postprocess`` (NMS, masks, keypoints, scaling back to the
image). Images of the same size share one forward pass, so each is letterboxed exactly as ``YOLO.predict``
would letterbox it alone, and batching never changes an answer; requests with their own ``conf`` and ``iou``
share the forward pass and get their own NMS.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchvision  # noqa: F401  (Ultralytics runs torchvision's compiled NMS only once it is imported)
import ultralytics
from ultralytics.models import yolo
from ultralytics.nn.backends.base import BaseBackend
from ultralytics.nn.tasks import guess_model_task, torch_safe_load

PREDICTORS: dict[str, Any] = {
    "detect": yolo.detect.DetectionPredictor, "segment": yolo.segment.SegmentationPredictor,
    "pose": yolo.pose.PosePredictor, "obb": yolo.obb.OBBPredictor, "classify": yolo.classify.ClassificationPredictor,
    "semantic": yolo.semantic.SemanticSegmentationPredictor, "depth": yolo.depth.DepthPredictor,
}
MAX_DET = 300  # detections per image, as YOLO.predict and the hosted platform
_threads_lock = threading.Lock()
_threads_set = False


class UnloadableWeights(Exception):
    """The file is not an Ultralytics checkpoint this server will load (the message says why)."""


def configure_threads(threads: int) -> int:
    """Size torch's intra-op pool once per process: ``threads``, or every CPU this process may use (0)."""
    global _threads_set
    with _threads_lock:
        if not _threads_set:
            available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            count = threads or available
            torch.set_num_threads(max(1, int(count or 1)))
            _threads_set = True
        return torch.get_num_threads()


def versions() -> dict[str, str]:
    return {"ultralytics": ultralytics.__version__, "torch": torch.__version__.split("+")[0]}


@dataclass(frozen=True)
class Job:
    """One image of a batch and its own thresholds."""

    image: np.ndarray  # BGR uint8 (h, w, 3)
    conf: float
    iou: float


def read_checkpoint(path: Path) -> torch.nn.Module:
    """The FP32 model in the checkpoint at ``path``, loaded with the allow-list only."""
    try:
        checkpoint, _ = torch_safe_load(path, safe_only=True)
    except Exception as error:  # a pickle outside the allow-list, a torchscript or zip of something else
        raise UnloadableWeights(f"the weights are not a loadable Ultralytics checkpoint ({_first_line(error)})") \
            from None
    candidate = (checkpoint.get("ema") or checkpoint.get("model")) if isinstance(checkpoint, dict) else None
    if not isinstance(candidate, torch.nn.Module):
        raise UnloadableWeights("the weights hold no model (an Ultralytics checkpoint has 'model' or 'ema')")
    model = candidate.float().eval()
    model.task = getattr(model, "task", None) or guess_model_task(model)
    if not hasattr(model, "stride"):
        model.stride = torch.tensor([32.0])
    for module in model.modules():  # what Ultralytics' own loader updates on an older checkpoint
        if hasattr(module, "inplace"):
            module.inplace = True
        elif isinstance(module, torch.nn.Upsample) and not hasattr(module, "recompute_scale_factor"):
            module.recompute_scale_factor = None
    return model


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


class LoadedModel:
    """A model ready to run batches; ``run`` may be called from several threads (one batch at a time).
    ``module`` is a checkpoint's network (PyTorch) or the path of an ONNX export (ONNX Runtime, through
    Ultralytics' own backend: the same pre- and post-processing)."""

    def __init__(self, module: torch.nn.Module | str, *, digest: str, task: str | None = None) -> None:
        self.digest = digest
        self.task = str(task or getattr(module, "task", None))
        if self.task not in PREDICTORS:
            raise UnloadableWeights(f"the model's task '{self.task}' cannot be served")
        overrides = {"task": self.task, "mode": "predict", "conf": 0.25, "iou": 0.7, "max_det": MAX_DET,
                     "rect": True, "save": False, "verbose": False, "batch": 1}
        self._predictor = PREDICTORS[self.task](overrides=overrides)
        self._predictor.setup_model(module, verbose=False)
        backend = self._predictor.model
        self.runtime = "onnx" if backend.format == "onnx" else "pytorch"
        self.device = str(getattr(backend, "device", "cpu")).split(":")[0]
        names = backend.names if isinstance(backend.names, dict) else dict(enumerate(backend.names))
        self.names = {int(k): str(v) for k, v in names.items()}
        self.class_names = [self.names.get(i, str(i)) for i in range(max(self.names, default=-1) + 1)]
        network = backend.model if isinstance(getattr(backend, "model", None), torch.nn.Module) else backend
        self.nbytes = sum(t.numel() * t.element_size() for t in (*network.parameters(), *network.buffers()))
        self.loaded_at = time.time()
        self._lock = threading.Lock()
        self._imgsz: int | None = None

    def run(self, jobs: Sequence[Job], imgsz: int) -> list[tuple[Any, dict[str, float]]]:
        """One ``(Results, speed in ms)`` per job, in order."""
        predictor = self._predictor
        out: list[tuple[Any, dict[str, float]] | None] = [None] * len(jobs)
        with self._lock, torch.inference_mode():
            if self._imgsz != imgsz:
                predictor.args.imgsz = imgsz
                predictor.setup_source(jobs[0].image)  # the stride-checked size, classify's transforms
                self._imgsz = imgsz
            for group in _same_shape(jobs, any_shape=self.task == "classify"):
                images = [jobs[i].image for i in group]
                start = time.perf_counter()
                tensor = predictor.preprocess(images)
                mid = time.perf_counter()
                preds = predictor.inference(tensor)
                after = time.perf_counter()
                for positions in _same_thresholds(group, jobs):
                    first = jobs[group[positions[0]]]
                    predictor.args.conf, predictor.args.iou = first.conf, first.iou
                    whole = len(positions) == len(group)
                    part = preds if whole else _take(preds, positions, len(group))
                    predictor.batch = ([""] * len(positions), [images[p] for p in positions], [""] * len(positions))
                    results = predictor.postprocess(part, tensor if whole else tensor[positions],
                                                    [images[p] for p in positions])
                    for position, result in zip(positions, results, strict=True):
                        out[group[position]] = (result, {})
                end = time.perf_counter()
                speed = {"preprocess": (mid - start) * 1e3 / len(group), "inference": (after - mid) * 1e3 / len(group),
                         "postprocess": (end - after) * 1e3 / len(group)}
                for index in group:
                    out[index][1].update(speed)  # type: ignore[index]
        return out  # type: ignore[return-value]


def _same_shape(jobs: Sequence[Job], *, any_shape: bool) -> list[list[int]]:
    groups: dict[Any, list[int]] = {}
    for index, job in enumerate(jobs):
        groups.setdefault(None if any_shape else job.image.shape, []).append(index)
    return list(groups.values())


def _same_thresholds(group: list[int], jobs: Sequence[Job]) -> list[list[int]]:
    """Positions within ``group`` sharing (conf, iou)."""
    subsets: dict[tuple[float, float], list[int]] = {}
    for position, index in enumerate(group):
        subsets.setdefault((jobs[index].conf, jobs[index].iou), []).append(position)
    return list(subsets.values())


def _take(value: Any, positions: list[int], size: int) -> Any:
    """The batch rows ``positions`` of a model's raw output (tensors batch-first, nested in tuples/lists/dicts)."""
    if isinstance(value, torch.Tensor):
        return value[positions] if value.ndim and value.shape[0] == size else value
    if isinstance(value, tuple | list):
        return type(value)(_take(v, positions, size) for v in value)
    if isinstance(value, dict):
        return {k: _take(v, positions, size) for k, v in value.items()}
    return value


def load(path: Path, *, digest: str, threads: int = 0) -> LoadedModel:
    if path.suffix == ".onnx":
        return load_onnx(path, digest=digest, threads=threads)
    return LoadedModel(read_checkpoint(path), digest=digest)


def load_onnx(path: Path, *, digest: str, threads: int = 0) -> LoadedModel:
    """An ONNX export (its task and classes are in the file's metadata), on ONNX Runtime's CPU provider with
    ``threads`` intra-op threads (0: every CPU this process may use) and no idle spinning, so several serving
    processes on one host do not burn each other's cores."""
    import onnxruntime  # optional: only servers that serve ONNX exports need it

    try:
        task = BaseBackend.read_metadata(path).get("task")  # Ultralytics writes it into the export
        loaded = LoadedModel(str(path), digest=digest, task=task)
    except UnloadableWeights:
        raise
    except Exception as error:  # not an ONNX file, or not an Ultralytics export
        raise UnloadableWeights(f"the ONNX export cannot be loaded ({_first_line(error)})") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    backend = loaded._predictor.model.backend
    backend.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    loaded.nbytes = path.stat().st_size
    return loaded
