"""The ``args`` of an export request: checked and normalised before a job exists, so every reason an export
cannot be made that is known at request time is a 422 naming the argument, never a job that fails later.

Normalised: only arguments that change the artefact, with one spelling each (``half=True`` and ``quantize='fp16'``
are ``quantize: 16``), values at their defaults dropped. The result is what the job stores, shows as ``args``
and hashes into its fingerprint, so asking twice for the same export in different words finds the first one."""

from __future__ import annotations

import math
from typing import Any

from lanner.errors import Unprocessable
from lanner.exports.formats import Format

MIN_IMGSZ, MAX_IMGSZ = 32, 4096
MAX_BATCH = 256
MIN_OPSET, MAX_OPSET = 7, 25
MAX_WORKSPACE_GIB = 1024.0

# Per format, the arguments Ultralytics' exporter takes besides imgsz and quantize (its export table).
FORMAT_ARGUMENTS: dict[str, frozenset[str]] = {
    "torchscript": frozenset({"batch", "nms", "dynamic"}),
    "onnx": frozenset({"batch", "dynamic", "opset", "simplify", "nms"}),
    "openvino": frozenset({"batch", "dynamic", "nms"}),
    "engine": frozenset({"batch", "dynamic", "opset", "simplify", "workspace", "nms"}),
    "coreml": frozenset({"batch", "dynamic", "nms"}),
    "coreai": frozenset({"batch"}),
    "saved_model": frozenset({"batch", "opset", "nms"}),
    "pb": frozenset({"batch", "opset"}),
    "litert": frozenset({"batch"}),
    "paddle": frozenset({"batch"}),
    "mnn": frozenset({"batch", "dynamic", "opset", "simplify", "nms"}),
    "ncnn": frozenset({"batch"}),
    "executorch": frozenset({"batch"}),
}
DEFAULTS: dict[str, Any] = {"batch": 1, "dynamic": False, "simplify": True, "nms": None, "opset": None,
                            "workspace": None, "quantize": None}
# Accepted and dropped: what the server decides (device, paths) or what changes nothing in the artefact.
IGNORED = frozenset({"device", "verbose", "save_dir", "project", "exist_ok", "mode", "task", "save", "plots",
                     "workers", "cache", "keras", "format", "model"})
QUANTIZE = {"8": 8, "16": 16, "32": None, "int8": 8, "fp16": 16, "fp32": None, "w8a8": 8, "w16a16": 16,
            "w32a32": None, "w8a16": "w8a16", "w8a32": "w8a32", "none": None}
CALIBRATION = ("INT8 exports need a calibration dataset (data=), which exports on this server do not take; "
               "export FP32 or quantize=16")


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise Unprocessable(f"args.{key}: must be true or false")


def _int(key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Unprocessable(f"args.{key}: must be a whole number from {low} to {high}")
    try:
        number = float(value)
    except ValueError:
        raise Unprocessable(f"args.{key}: must be a whole number from {low} to {high}") from None
    if not math.isfinite(number) or number != int(number) or not low <= number <= high:
        raise Unprocessable(f"args.{key}: must be a whole number from {low} to {high}")
    return int(number)


def _imgsz(value: Any) -> int | list[int]:
    if isinstance(value, list | tuple):
        if len(value) not in (1, 2):
            raise Unprocessable("args.imgsz: a size or [height, width]")
        sizes = [_int("imgsz", v, MIN_IMGSZ, MAX_IMGSZ) for v in value]
        return sizes[0] if len(set(sizes)) == 1 else sizes
    return _int("imgsz", value, MIN_IMGSZ, MAX_IMGSZ)


def _quantize(raw: dict[str, Any]) -> Any:
    """One precision from ``quantize``, or the deprecated ``half`` / ``int8`` flags (int8 wins, as in YOLO)."""
    if raw.get("quantize") is not None:
        value = raw["quantize"]
        if isinstance(value, bool) or str(value).strip().lower() not in QUANTIZE:
            raise Unprocessable("args.quantize: one of 8, 16, 32, 'int8', 'fp16', 'fp32', 'w8a16', 'w8a32'")
        return QUANTIZE[str(value).strip().lower()]
    if raw.get("int8") is not None and _bool("int8", raw["int8"]):
        return 8
    if raw.get("half") is not None and _bool("half", raw["half"]):
        return 16
    return None


def normalise(fmt: Format, raw: dict[str, Any] | None, *, task: str | None, gpu_type: str) -> dict[str, Any]:
    """The export's arguments as stored; 422 for anything this server would refuse or fail on."""
    raw = dict(raw or {})
    allowed = FORMAT_ARGUMENTS.get(fmt.name, frozenset({"batch"}))
    out: dict[str, Any] = {}
    for key in ("data", "fraction"):
        if raw.get(key) is not None:
            raise Unprocessable(f"args.{key}: {CALIBRATION}")
    quantize = _quantize(raw)
    if quantize == 8:
        raise Unprocessable(f"args.quantize: {CALIBRATION}")
    if quantize is not None:
        if quantize not in fmt.precisions:
            offered = ", ".join("32 (FP32)" if p == 32 else f"{p} (FP16)" for p in fmt.precisions)
            raise Unprocessable(f"args.quantize: format '{fmt.name}' takes quantize={offered} here")
        if fmt.name == "torchscript" and gpu_type == "cpu":
            raise Unprocessable("args.quantize: FP16 TorchScript is made on a GPU only; pass gpuType, or export FP32")
        out["quantize"] = quantize
    for key, value in raw.items():
        if value is None or key in IGNORED or key in ("quantize", "half", "int8"):
            continue
        if key == "imgsz":
            out["imgsz"] = _imgsz(value)
            continue
        if key not in DEFAULTS:
            raise Unprocessable(f"args.{key}: not an export argument this server takes (imgsz, batch, "
                                "quantize, half, dynamic, simplify, opset, nms, workspace)")
        if key in ("dynamic", "simplify", "nms"):
            value = _bool(key, value)
        elif key == "batch":
            value = _int(key, value, 1, MAX_BATCH)
        elif key == "opset":
            value = _int(key, value, MIN_OPSET, MAX_OPSET)
        elif key == "workspace":
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_WORKSPACE_GIB:
                raise Unprocessable(f"args.workspace: GiB, more than 0 and at most {MAX_WORKSPACE_GIB:.0f}")
            value = float(value)
        if value == DEFAULTS[key]:
            continue
        if key not in allowed:
            raise Unprocessable(f"args.{key}: not supported for format '{fmt.name}' (it takes "
                                f"{', '.join(sorted({'imgsz', 'quantize', *allowed}))})")
        out[key] = value
    if out.get("nms") and task == "classify":
        raise Unprocessable("args.nms: classification models have no NMS to embed")
    if fmt.name == "mnn" and out.get("nms") and out.get("dynamic"):
        raise Unprocessable("args.nms: MNN exports cannot combine dynamic=true with nms=true")
    if fmt.name == "mnn" and out.get("nms") and task not in (None, "detect", "pose"):
        raise Unprocessable("args.nms: MNN exports embed NMS for detect and pose models only")
    return dict(sorted(out.items()))
