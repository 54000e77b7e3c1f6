"""Model facts for the GPU advisor: parameters and forward FLOPs, from the architecture alone.

Models are built on the CPU from Ultralytics' own YAMLs (``yolo11n.yaml``) or from the ``yaml`` a local ``.pt``
checkpoint carries; nothing is ever downloaded. Building takes ~0.1-1 s, so results are cached per (model, nc).
The built module is then moved to PyTorch's ``meta`` device (shapes only, no storage) and kept for ``memory.py``,
which measures activations on it without computing anything.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lanner.gpus import profile_cache

if TYPE_CHECKING:
    from torch import nn

TASKS = ("detect", "segment", "pose", "obb", "classify")
CLASSIFY_IMGSZ = 224  # classification models are profiled at their training default
_LOCK = threading.RLock()  # one build at a time: they are CPU-bound, and _quiet() swaps a global log level


@dataclass(frozen=True)
class ModelProfile:
    """What the time and memory models need to know about one architecture."""

    name: str          # e.g. "yolo11n.yaml"
    family: str        # e.g. "yolo11"
    scale: str | None  # n/s/m/l/x
    task: str          # detect/segment/pose/obb/classify
    params: int
    gflops_640: float  # forward GFLOPs at imgsz 640 (for classify: at 224)
    nc: int = 80       # number of classes the head was built for
    strides: tuple[int, ...] = ()  # detection-head strides (8, 16, 32); empty for classify
    key: tuple = field(default=(), compare=False, repr=False)  # cache key: rebuilds the same model (memory.py)

    @property
    def base_imgsz(self) -> int:
        return CLASSIFY_IMGSZ if self.task == "classify" else 640

    def gflops(self, imgsz: int) -> float:
        """Forward GFLOPs at imgsz: convolutions scale with the pixel count."""
        return self.gflops_640 * (imgsz / self.base_imgsz) ** 2

    def anchors(self, imgsz: int) -> int:
        """Prediction cells of a dense head at imgsz (8400 at 640 for strides 8/16/32); 0 for classify."""
        return sum((imgsz // s) * (imgsz // s) for s in self.strides)


def model_profile(model: str | Path, *, nc: int | None = None) -> ModelProfile:
    """Profile a model given as a YAML name (``yolo11n.yaml``), an official weights name or a local ``.pt``.

    An official weights name that is not a local file (``yolo11s.pt``) is profiled from its YAML (same
    architecture); unknown names raise ValueError.
    """
    key = _cache_key(model, nc)
    try:
        return _profile(*key)
    except ValueError as exc:
        text = str(model).strip()
        raise ValueError(str(exc).replace(f"'{key[0]}'", f"'{text}'", 1)) from None


def meta_model(profile: ModelProfile) -> nn.Module:
    """The profiled model on the ``meta`` device in training mode (shared and storage-free: do not modify)."""
    return _built(*profile.key)[1]


def _cache_key(model: str | Path, nc: int | None) -> tuple[str, int | None, float]:
    """Normalise the name so equal models share one cache entry; a local file's mtime invalidates it."""
    if nc is not None and nc < 1:
        raise ValueError(f"nc must be a positive number of classes, not {nc}")
    text = str(model).strip()
    if "://" in text:
        raise ValueError(f"unknown model '{text}': give a YAML name like yolo11n.yaml or a local .pt file")
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml", ".pt") and path.is_file():
        return str(path.resolve()), nc, path.stat().st_mtime
    if path.suffix == ".pt":  # an official weights name: its architecture is the YAML of the same stem
        text = path.with_suffix(".yaml").name
    elif not path.suffix:
        text = f"{text}.yaml"
    return text, nc, 0.0


@functools.lru_cache(maxsize=256)
def _profile(name: str, nc: int | None, mtime: float) -> ModelProfile:
    """From the disk cache (``profile_cache``: no torch, no build) when profiled before, else built."""
    key = (name, nc, mtime)
    stored = profile_cache.profile_fields(key)
    if stored is not None:
        try:
            return ModelProfile(**{**stored, "strides": tuple(stored["strides"]), "key": key})
        except (TypeError, KeyError):
            pass  # written by another layout: profile again
    profile = _built(name, nc, mtime)[0]
    profile_cache.store_profile(key, {k: v for k, v in asdict(profile).items() if k != "key"})
    return profile


@functools.lru_cache(maxsize=64)
def _built(name: str, nc: int | None, mtime: float) -> tuple[ModelProfile, nn.Module]:
    """Build once on the CPU, count, profile FLOPs, then keep only the storage-free meta copy."""
    from ultralytics.utils.torch_utils import get_flops  # start-up cost: ultralytics loads on first profile

    cfg, label = _load_cfg(name)
    task = _task(cfg, label)
    model_class = _model_class(cfg, task, label)
    with _quiet():
        try:
            module = model_class(cfg, nc=nc, verbose=False)
        except Exception as exc:  # a YAML that exists but does not build
            raise ValueError(f"unknown model '{label}': its YAML does not build ({exc})") from None
        base = CLASSIFY_IMGSZ if task == "classify" else 640
        gflops = get_flops(module, base) or _flop_counter(module, base)
    strides = () if task == "classify" else tuple(int(s) for s in module.stride.tolist())
    stem = Path(str(cfg.get("yaml_file") or label)).stem  # a checkpoint's family is its YAML's, not best.pt's
    profile = ModelProfile(
        name=label, family=_family(stem), scale=cfg.get("scale") or None, task=task,
        params=sum(p.numel() for p in module.parameters()), gflops_640=round(float(gflops), 4),
        nc=int(module.yaml.get("nc", nc or 0)), strides=strides, key=(name, nc, mtime))
    return profile, module.to("meta").train()


def _load_cfg(name: str) -> tuple[dict, str]:
    """The model dict and a display name; weights are read for their ``yaml`` only."""
    import torch  # start-up cost: torch loads on the first profile not found in the disk cache
    from ultralytics.nn.tasks import yaml_model_load  # start-up cost: ultralytics loads on first profile

    path = Path(name)
    if path.suffix == ".pt":
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
            net = (ckpt.get("model") or ckpt.get("ema")) if isinstance(ckpt, dict) else ckpt
            cfg = dict(net.yaml)
        except Exception as exc:
            raise ValueError(f"unknown model '{path.name}': not an Ultralytics checkpoint ({exc})") from None
        cfg.setdefault("scale", _scale_from_stem(str(cfg.get("yaml_file", "")) or path.stem))
        return cfg, path.name
    try:
        with _quiet():
            cfg = yaml_model_load(path)
    except Exception as exc:  # FileNotFoundError for unknown names; YAML errors for broken files
        raise ValueError(f"unknown model '{path.name}': no such Ultralytics YAML or local file "
                         f"(try yolo11n.yaml, yolov8s.yaml, yolo26m-seg.yaml; {type(exc).__name__})") from None
    # Ultralytics resolves a name by searching its folders (a glob: '*' finds a dataset or tracker YAML)
    if not isinstance(cfg.get("backbone"), list) or not isinstance(cfg.get("head"), list) or not cfg["head"]:
        raise ValueError(f"unknown model '{path.name}': not a model YAML (no backbone and head)")
    return cfg, path.name


def _task(cfg: dict, label: str) -> str:
    from ultralytics.nn.tasks import guess_model_task  # start-up cost: ultralytics loads on first profile

    if "rtdetr" in label.lower():
        return "detect"
    with _quiet():
        task = guess_model_task(cfg)
    if task not in TASKS:
        raise ValueError(f"unknown model '{label}': task {task!r} is not one of {', '.join(TASKS)}")
    return task


def _model_class(cfg: dict, task: str, label: str) -> type[nn.Module]:
    from ultralytics.nn import tasks  # start-up cost: ultralytics loads on first profile

    head = str(cfg["head"][-1][-2])
    if head == "RTDETRDecoder":
        return tasks.RTDETRDetectionModel
    if "World" in head or "YOLOE" in head:
        raise ValueError(f"unsupported model '{label}': open-vocabulary heads ({head}) need text embeddings")
    return {"detect": tasks.DetectionModel, "segment": tasks.SegmentationModel, "pose": tasks.PoseModel,
            "obb": tasks.OBBModel, "classify": tasks.ClassificationModel}[task]


def _flop_counter(module: nn.Module, imgsz: int) -> float:
    """Fallback when thop is missing: PyTorch's own counter (2 FLOPs per multiply-add, like get_flops)."""
    import torch  # start-up cost: torch loads on the first profile not found in the disk cache
    from torch.utils.flop_counter import FlopCounterMode  # only on this fallback path

    module.eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.zeros(1, 3, imgsz, imgsz))
    module.train()
    return counter.get_total_flops() / 1e9


def _family(stem: str) -> str:
    """yolo11n-seg -> yolo11, yolov5su -> yolov5, rtdetr-l -> rtdetr, yoloe-11s-seg -> yoloe-11."""
    unified = re.sub(r"(\d+)([nslmxbc])(u?)(?=-|$)", r"\1", stem)
    match = re.match(r"^(.*?\d+)", unified)
    return match.group(1) if match else unified.split("-")[0]


def _scale_from_stem(stem: str) -> str | None:
    match = re.search(r"\d+([nslmx])", Path(stem).stem)
    return match.group(1) if match else None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Model builds log summaries and scale warnings; the advisor is not the place for them."""
    logger = logging.getLogger("ultralytics")
    with _LOCK:
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logger.setLevel(level)
