"""What a training request names, read one way: ``ul://`` URIs of datasets and models, model names, and the
architecture a trained model was built from. ``training.inputs`` resolves a request through these for both the
estimate and ``training.start``."""

from __future__ import annotations

import math
import re
from typing import Any

from lanner.errors import BadRequest

SCHEME = "ul://"
# Parameter counts of the YOLO11 detection sizes, for a checkpoint whose architecture is not recorded.
_SIZES_BY_PARAMS = (("n", 2.6e6), ("s", 9.4e6), ("m", 20.1e6), ("l", 25.3e6), ("x", 56.9e6))
_NAMED_ARCH = re.compile(r"(yolo(?:v?\d+))([nsmlx])", re.IGNORECASE)
_OFFICIAL_ARCH = re.compile(r"^yolo(?:v?\d+)[nsmlx](?:-(?:seg|pose|obb|cls))?\.yaml$", re.IGNORECASE)


def dataset_parts(uri: str) -> tuple[str, str] | None:
    """(owner, slug) of ``ul://owner/datasets/slug``; None for anything else. Parts may be empty."""
    parts = uri.removeprefix(SCHEME).split("/")
    if not uri.startswith(SCHEME) or len(parts) != 3 or parts[1] != "datasets":
        return None
    return parts[0], parts[2]


def model_parts(uri: str) -> tuple[str, str, str] | None:
    """(owner, project, model) of ``ul://owner/project/model``; None for another shape. Parts may be empty."""
    parts = uri.removeprefix(SCHEME).split("/")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def is_model_uri(name: str) -> bool:
    return name.startswith(SCHEME)


def is_plain_name(name: str) -> bool:
    """A model *name* (yolo11n.yaml, yolo11n.pt), never a path: only names reach the profiler and the trainer,
    or the server could be made to unpickle a file of the caller's choosing."""
    return bool(name) and not ("/" in name or "\\" in name or name.startswith(".") or "\x00" in name)


def yaml_name(name: str) -> str:
    """Weights are profiled through their architecture's YAML: the server never opens a checkpoint file, even one
    that happens to sit in its working directory under that name."""
    return name[:-3] + ".yaml" if name.endswith(".pt") else name


def profiled_name(name: str) -> str:
    """The name the profiler may load for ``name``: its YAML; a 400 for anything but a plain name."""
    if not is_plain_name(name):
        raise BadRequest("model must be a name such as yolo11s.yaml or yolo11s.pt, or ul://owner/project/model")
    return yaml_name(name)


def architecture_of(record: Any) -> str:
    """The architecture a model was trained from, by name only (the server never unpickles a checkpoint):
    its recorded base, else a YOLO name in its own names (``yolo11n-scratch``), else the nearest YOLO11 size
    by checkpoint bytes (the trainer saves FP16 weights: about 2 bytes a parameter)."""
    base = (record.train_args or {}).get("model") or record.base_model
    if base and not is_model_uri(str(base)):
        name = profiled_name(str(base).replace("\\", "/").rsplit("/", 1)[-1])
        if _OFFICIAL_ARCH.match(name) or not _NAMED_ARCH.search(name):
            return name
    for text in (base, record.weights_name, record.slug, record.name):
        match = _NAMED_ARCH.search(str(text or "").rsplit("/", 1)[-1])
        if match:
            return f"{match.group(1).lower()}{match.group(2).lower()}.yaml"
    if record.weights_size:
        params = record.weights_size / 2.0
        size = min(_SIZES_BY_PARAMS, key=lambda item: abs(math.log(item[1] / max(params, 1.0))))[0]
        return f"yolo11{size}.yaml"
    raise BadRequest(f"model: cannot tell the architecture of '{record.slug}'")
