"""Measured priors: what ``benchmarks/gpu_calibrate.py`` recorded on a real GPU, loaded as calibration points.

A calibration file is one GPU's measurements (epoch and step time, peak reserved memory, AutoBatch's choice) with
its provenance (GPU name, driver, torch, date). The operator names such files in ``LANNER_GPU_CATALOGUE``
(``"calibration": ["h100.json"]``); the advisor then fits that GPU type to them before any run here has been
measured, and says so in the estimate's ``calibration.measured``. Pure parsing: no torch, no database.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "lanner-gpu-calibration/1"
_POINT_NUMBERS = {"imgsz": int, "batch": int, "trainImages": int, "valImages": int, "workers": int,
                  "hostCpus": float, "gflops": float, "epochSeconds": float}


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured configuration; the attribute names are ``CalibrationPoint``'s, so the fit reads either."""

    gpu_type: str
    model_name: str
    family: str
    gflops: float
    imgsz: int
    batch: int
    train_images: int
    val_images: int
    workers: int
    host_cpus: float
    epoch_seconds: float
    step_seconds: float | None = None
    peak_memory_gb: float | None = None
    cache: bool = False
    source: str = "calibration"
    startup_seconds: float | None = None


@dataclass(frozen=True)
class MeasuredSet:
    gpu_type: str
    gpu_name: str
    driver: str
    torch: str
    date: str
    points: tuple[MeasuredPoint, ...]
    autobatch: Mapping[str, Any] | None = None

    @property
    def provenance(self) -> str:
        return (f"measured on {self.gpu_name} (driver {self.driver}, torch {self.torch}, {self.date}; "
                f"benchmarks/gpu_calibrate.py)")


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}.{key}: must be a non-empty string")
    return value.strip()


def _positive(value: Any, where: str, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: must be a positive number, got {value!r}")
    if kind is int and value != int(value):
        raise ValueError(f"{where}: must be a whole number, got {value!r}")
    return kind(value)


def parse(data: Any, *, known: set[str] | frozenset[str], where: str = "calibration") -> MeasuredSet:
    """Validate a calibration document; ``known`` are the catalogue's type ids (the file's type must be one)."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ValueError(f"{where}: not a calibration file (expected \"format\": \"{FORMAT}\")")
    gpu = data.get("gpu")
    if not isinstance(gpu, Mapping):
        raise ValueError(f"{where}.gpu: must be an object (name, gpuType, driver, torch, date)")
    gpu_type = _text(gpu, "gpuType", f"{where}.gpu")
    if gpu_type not in known:
        raise ValueError(f"{where}.gpu.gpuType: unknown GPU type '{gpu_type}'")
    points = []
    for index, item in enumerate(data.get("points") or []):
        at = f"{where}.points[{index}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{at}: must be an object")
        if item.get("status", "ok") != "ok":
            continue  # skipped or out of memory: nothing timed
        values = {key: _positive(item.get(key), f"{at}.{key}", kind) for key, kind in _POINT_NUMBERS.items()}
        optional = {key: (None if item.get(key) is None else _positive(item[key], f"{at}.{key}", float))
                    for key in ("stepSeconds", "peakMemoryGb")}
        points.append(MeasuredPoint(
            gpu_type=gpu_type, model_name=_text(item, "model", at), family=_text(item, "family", at),
            gflops=values["gflops"], imgsz=values["imgsz"], batch=values["batch"],
            train_images=values["trainImages"], val_images=values["valImages"], workers=values["workers"],
            host_cpus=values["hostCpus"], epoch_seconds=values["epochSeconds"],
            step_seconds=optional["stepSeconds"], peak_memory_gb=optional["peakMemoryGb"]))
    autobatch = data.get("autobatch")
    return MeasuredSet(gpu_type=gpu_type, gpu_name=_text(gpu, "name", f"{where}.gpu"),
                       driver=str(gpu.get("driver") or "unknown"), torch=str(gpu.get("torch") or "unknown"),
                       date=_text(data, "date", where), points=tuple(points),
                       autobatch=autobatch if isinstance(autobatch, Mapping) else None)


def load(path: Path, *, known: set[str] | frozenset[str]) -> MeasuredSet:
    if not path.is_file():
        raise ValueError(f"calibration: no such file '{path}'")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"calibration: '{path}' is not valid JSON: {exc}") from None
    return parse(data, known=known, where=f"calibration '{path.name}'")
