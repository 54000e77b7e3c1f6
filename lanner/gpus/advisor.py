"""The GPU advisor: turns a request (model, data, trainer arguments) into estimates for every GPU type, learning
from calibration points. The estimate itself is ``estimator.py``; this module gathers its inputs."""

from __future__ import annotations

import dataclasses
import functools
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.errors import BadRequest, Unprocessable
from lanner.gpus import priors
from lanner.gpus.catalogue import Catalogue, GpuType
from lanner.gpus.estimator import (
    DeviceSpeed,
    FixedCosts,
    LoaderSpeed,
    Option,
    Workload,
    cost_range_cents,
    estimate_time,
    recommend,
    seed_guidance,
)
from lanner.gpus.models import CalibrationPoint

MAX_EPOCHS = 100_000
MAX_IMGSZ = 8192
DEFAULT_ARGS = {"epochs": 100, "imgsz": 640, "batch": 16, "workers": 8, "fraction": 1.0, "cache": False,
                "patience": 100, "optimizer": "auto", "amp": True, "val": True}
PRIOR_SPREAD = (0.7, 1.45)     # before any calibration the band is wide, and says so
MIN_SPREAD = (0.85, 1.15)      # calibration never claims better than +/-15 %
DATACENTER = ("a100", "h100", "h200", "b200", "b300", "l40", "l4", "a40", "rtx-pro-6000")


@dataclass
class Calibration:
    speed: DeviceSpeed
    spread: tuple[float, float]
    points: int
    loader: LoaderSpeed = priors.LOADER_640


def loader_prior(gpu: GpuType) -> LoaderSpeed:
    """The local machine's loader until probed; rented GPU hosts have more and faster cores."""
    return priors.LOADER_640 if gpu.id == "cpu" else priors.CLOUD_LOADER_640


@dataclass
class Request:
    model: str
    train_images: int
    val_images: int
    train_args: dict[str, Any]
    gpu_types: list[str] | None = None
    deadline_minutes: float | None = None
    budget_cents: float | None = None
    tier: str = "free"
    nc: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    source_image_size: tuple[int, int] | None = None  # (width, height) of a typical source image


def normalise_args(train_args: dict[str, Any] | None) -> dict[str, Any]:
    """The trainer's own argument names and defaults; invalid values are refused naming the argument."""
    from ultralytics.cfg import DEFAULT_CFG_DICT

    args = dict(DEFAULT_ARGS)
    for key, value in (train_args or {}).items():
        if key not in DEFAULT_CFG_DICT:
            raise Unprocessable(f"trainArgs.{key}: not an argument of yolo train")
        args[key] = value

    def number(key: str, kind: type, low: float | None = None, high: float | None = None) -> Any:
        value = args[key]
        if isinstance(value, bool):
            raise BadRequest(f"trainArgs.{key} must be a number")
        try:
            value = kind(value)
        except (TypeError, ValueError, OverflowError):
            raise BadRequest(f"trainArgs.{key} must be a number") from None
        if low is not None and value < low:
            raise BadRequest(f"trainArgs.{key} must be at least {low}")
        if high is not None and value > high:
            raise BadRequest(f"trainArgs.{key} must be at most {high}")
        return value

    # Upper bounds keep a typo (imgsz=64000) from becoming a nonsense estimate or a hold nobody meant.
    args["epochs"] = number("epochs", int, 1, MAX_EPOCHS)
    args["imgsz"] = number("imgsz", int, 1, MAX_IMGSZ)
    try:
        from lanner.gpus.memory import resolve_optimizer

        resolve_optimizer(str(args["optimizer"]))
    except ValueError as exc:
        raise BadRequest(f"trainArgs.optimizer: {exc}") from None
    args["workers"] = number("workers", int, 0)
    args["patience"] = number("patience", int, 0)
    fraction = number("fraction", float)
    if not 0 < fraction <= 1:
        raise BadRequest("trainArgs.fraction must be in (0, 1]")
    args["fraction"] = fraction
    batch = number("batch", float)
    if batch <= 0 and batch != -1 or (batch > 1 and batch != int(batch)):
        raise BadRequest("trainArgs.batch must be a positive integer, -1 (AutoBatch) or a memory fraction in (0, 1)")
    args["batch"] = int(batch) if batch >= 1 or batch == -1 else batch
    cache = args["cache"]
    args["cache"] = cache in (True, "ram", "disk", "True", "true")
    return args


def host_cpus(gpu: GpuType) -> float:
    if gpu.id == "cpu":
        return float(os.cpu_count() or 1)
    return priors.DATACENTER_HOST_CPUS if gpu.id.startswith(DATACENTER) else priors.CONSUMER_HOST_CPUS


def _workload(point: CalibrationPoint) -> Workload:
    activation_bytes, task = (0.0, "detect") if point.gpu_type == "cpu" else _activations(point.model_name,
                                                                                         point.imgsz, True)
    return Workload(gflops=point.gflops, train_images=point.train_images, val_images=point.val_images, epochs=1,
                    batch=point.batch, workers=point.workers, host_cpus=point.host_cpus, imgsz=point.imgsz,
                    cache=point.cache, activation_bytes=activation_bytes, task=task)


@functools.lru_cache(maxsize=256)
def _activations(model: Any, imgsz: int, amp: bool, nc: int | None = None) -> tuple[float, str]:
    """(bytes autograd saves per training image as trained, task) for the GPU time model; (0, detect) when the
    model cannot be profiled (the estimate then falls back to the FLOP model)."""
    from lanner.gpus import memory, profile

    try:
        prof = model if isinstance(model, profile.ModelProfile) else profile.model_profile(str(model), nc=nc)
        saved = memory.activation_bytes_per_image(prof, imgsz)
    except Exception:  # a calibration point of a model that no longer builds here
        return 0.0, "detect"
    return saved * (memory.AMP_FACTOR if amp else 1.0), prof.task


def prior_speed(catalogue: Catalogue, gpu: GpuType) -> DeviceSpeed:
    if gpu.id == "cpu":
        return priors.cpu_prior()
    specs = priors.catalogue_specs(catalogue.all())
    if gpu.id not in specs or priors.REFERENCE_GPU not in specs:
        return priors.gpu_prior(0.5, "prior (no specifications)", gpu.fp16_tflops)
    return priors.gpu_prior(priors.relative_speeds(specs)[gpu.id], "prior", gpu.fp16_tflops, specs)


def _points(session: Session, gpu_type: str) -> list[CalibrationPoint]:
    return list(session.scalars(select(CalibrationPoint).where(CalibrationPoint.gpu_type == gpu_type)
                                .order_by(CalibrationPoint.id.desc()).limit(200)))


def calibrate(session: Session, catalogue: Catalogue, gpu: GpuType, family: str | None = None) -> Calibration:
    """Scale the device's throughput so that its recorded points are predicted without bias (median ratio 1),
    and take the uncertainty band from the spread of what is left (the residuals).

    The closest evidence wins: points of this GPU type and this model family, else of this GPU type, else the
    efficiency other GPU types of the same architecture showed against their priors, else the prior."""
    prior = prior_speed(catalogue, gpu)
    points = _points(session, gpu.id)
    loader = loader_prior(gpu)
    same_family = [p for p in points if family and p.family == family]
    if same_family:
        points = same_family
    if not points:
        borrowed = _architecture_speed(session, catalogue, gpu, prior)
        if borrowed is None:
            return Calibration(prior, PRIOR_SPREAD, 0, loader)
        return Calibration(borrowed, PRIOR_SPREAD, 0, loader)
    speed = _fit_speed(prior, points, loader)
    if same_family:
        speed = dataclasses.replace(speed, source=f"{speed.source} of {family}")
    residuals = [p.epoch_seconds / _predicted_epoch(p, speed, loader) for p in points]
    if len(residuals) >= 3:
        ordered = sorted(residuals)
        low = min(MIN_SPREAD[0], ordered[max(0, int(0.1 * len(ordered)) - 1)] * 0.95)
        high = max(MIN_SPREAD[1], ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1.05)
    else:
        low, high = 0.8, 1.25
    return Calibration(speed, (low, high), len(points), loader)


ACCURACY_POINTS = 50  # per GPU type: leave-one-out refits are quadratic, and recent runs matter most


def accuracy(session: Session, catalogue: Catalogue) -> dict[str, Any]:
    """How well the current model predicts recorded runs: each run predicted from the other points of its device
    (leave-one-out), so a point never grades the fit it took part in."""
    errors = []
    for gpu in catalogue.all():
        points = list(session.scalars(select(CalibrationPoint).where(CalibrationPoint.gpu_type == gpu.id)
                                      .order_by(CalibrationPoint.id.desc()).limit(ACCURACY_POINTS)))
        if len(points) < 2:
            continue
        prior, loader = prior_speed(catalogue, gpu), loader_prior(gpu)
        for point in points:
            if point.source == "probe":
                continue
            speed = _fit_speed(prior, [p for p in points if p.id != point.id], loader)
            predicted = _predicted_epoch(point, speed, loader)
            errors.append(abs(predicted - point.epoch_seconds) / point.epoch_seconds)
    if not errors:
        return {"runs": 0, "medianAbsErrorPct": None, "worstAbsErrorPct": None,
                "note": "no finished runs measured yet: bands are the wide prior ones"}
    return {"runs": len(errors), "medianAbsErrorPct": round(100 * statistics.median(errors), 1),
            "worstAbsErrorPct": round(100 * max(errors), 1)}


def _predicted_epoch(point: CalibrationPoint, speed: DeviceSpeed, loader: LoaderSpeed) -> float:
    return estimate_time(_workload(point), speed, loader, priors.LOCAL_FIXED).epoch_seconds.value


def _fit_speed(prior: DeviceSpeed, points: list[CalibrationPoint], loader: LoaderSpeed) -> DeviceSpeed:
    """Scale the device's compute (FLOP rate and per-step cost together) until its points are predicted without
    bias: the median of measured/predicted is 1. The loader part is not scaled, so this is iterated."""
    speed = prior
    for _ in range(30):
        scale = statistics.median(p.epoch_seconds / _predicted_epoch(p, speed, loader) for p in points)
        speed = _scaled_speed(speed, scale, f"calibrated on {len(points)} measurement(s)")
        if abs(scale - 1) < 1e-4:
            break
    return speed


def _measured_scale(session: Session, catalogue: Catalogue, gpu: GpuType) -> float | None:
    """How many times slower than its prior a measured type ran; remembered during one estimate (which asks it
    once per sibling of every unmeasured type, and a refit walks all of the type's points)."""
    memo = session.info.setdefault("lanner.measured_scales", {})
    if gpu.id not in memo:
        points = _points(session, gpu.id)
        if not points:
            memo[gpu.id] = None
        else:
            prior = prior_speed(catalogue, gpu)
            memo[gpu.id] = prior.train_tflops / _fit_speed(prior, points, loader_prior(gpu)).train_tflops
    return memo[gpu.id]


def _architecture_speed(session: Session, catalogue: Catalogue, gpu: GpuType,
                        prior: DeviceSpeed) -> DeviceSpeed | None:
    """A type never measured here learns from its siblings: how far measured cards of the same architecture ran
    from their own priors (median over types) scales this one's prior the same way."""
    if gpu.id == "cpu" or not gpu.architecture:
        return None
    scales = []
    for other in catalogue.all():
        if other.id in (gpu.id, "cpu") or other.architecture != gpu.architecture:
            continue
        scale = _measured_scale(session, catalogue, other)
        if scale is not None:
            scales.append(scale)
    if not scales:
        return None
    scale = statistics.median(scales)
    return _scaled_speed(prior, scale, f"prior scaled by {len(scales)} measured {gpu.architecture} type(s)")


def _scaled_speed(speed: DeviceSpeed, scale: float, source: str) -> DeviceSpeed:
    """The same device ``scale`` times slower (compute rates divided, per-step and per-image costs multiplied)."""
    return DeviceSpeed(train_tflops=speed.train_tflops / scale, step_overhead_s=speed.step_overhead_s * scale,
                       val_speedup=speed.val_speedup, overlaps_loader=speed.overlaps_loader, source=source,
                       activation_gbs=speed.activation_gbs / scale if speed.activation_gbs else None,
                       peak_tflops=speed.peak_tflops / scale if speed.peak_tflops else None,
                       segment_image_s=speed.segment_image_s * scale)


MEMORY_CORRECTION_BOUNDS = (0.67, 1.5)  # a reading outside is more likely a shared card than our model's error


def memory_correction(session: Session, gpu: GpuType) -> float:
    """Measured over predicted device memory (median) of the runs on this GPU type that reported it, bounded:
    the memory model's constants come from published profiles, a real card here has the last word."""
    from lanner.gpus import memory, profile

    ratios = []
    for point in _points(session, gpu.id)[:20]:
        if not point.peak_memory_gb:
            continue
        try:
            predicted = memory.training_memory(profile.model_profile(point.model_name), imgsz=point.imgsz,
                                               batch=point.batch, amp=True, vram_gb=gpu.vram_gb).device_gb
        except Exception:  # a model that no longer builds here
            continue
        if predicted > 0:
            ratios.append(point.peak_memory_gb / predicted)
    if not ratios:
        return 1.0
    low, high = MEMORY_CORRECTION_BOUNDS
    return min(high, max(low, statistics.median(ratios)))


def fixed_costs(session: Session | None, gpu: GpuType) -> FixedCosts:
    """The prior start-up, unless runs on this GPU type measured it: then the median of what they spent before
    their first epoch, less the dataset and model parts the prior models separately."""
    prior = priors.LOCAL_FIXED if gpu.id == "cpu" else priors.CLOUD_FIXED
    if session is None:
        return prior
    measured = [p.startup_seconds - prior.per_image_download_s * (p.train_images + p.val_images) - prior.model_build_s
                for p in _points(session, gpu.id) if p.source != "probe" and p.startup_seconds is not None]
    if not measured:
        return prior
    return dataclasses.replace(prior, provision_s=max(0.0, statistics.median(measured)))


def estimate(session: Session, catalogue: Catalogue, request: Request) -> dict[str, Any]:
    from lanner.gpus import memory, profile

    args = normalise_args(request.train_args)
    session.info.pop("lanner.measured_scales", None)  # remembered within this estimate only, never stale
    try:
        model = profile.model_profile(request.model, nc=request.nc)
    except ValueError as exc:
        raise BadRequest(f"model: {exc}") from None
    if request.gpu_types is not None and not request.gpu_types:
        raise BadRequest("gpuTypes: give at least one GPU type, or leave it out for all of them")
    if request.gpu_types:
        unknown = [g for g in request.gpu_types if g not in catalogue]
        if unknown:
            raise BadRequest(f"gpuTypes: unknown GPU type(s) {', '.join(unknown)}")
        gpus = [catalogue.get(g) for g in request.gpu_types]
    else:
        gpus = list(catalogue.offered())
    train_images = max(1, round(request.train_images * args["fraction"]))
    imgsz = args["imgsz"]
    gflops = model.gflops(imgsz)
    estimates, options = [], []
    for gpu in gpus:
        calibration = calibrate(session, catalogue, gpu, model.family)
        vram = gpu.vram_gb if gpu.id != "cpu" else _host_ram_gb()
        amp = bool(args["amp"]) and gpu.id != "cpu"
        if args["batch"] == -1 or (isinstance(args["batch"], float) and args["batch"] < 1):
            fraction = 0.60 if args["batch"] == -1 else float(args["batch"])
            batch = 16 if gpu.id == "cpu" else memory.autobatch_batch(vram, model, imgsz=imgsz, fraction=fraction,
                                                                      amp=amp, nc=request.nc)
        else:
            batch = int(args["batch"])
        mem = memory.training_memory(model, imgsz=imgsz, batch=batch, optimizer=str(args["optimizer"]), amp=amp,
                                     nc=request.nc)
        max_batch = memory.max_batch(vram, model, imgsz=imgsz, optimizer=str(args["optimizer"]), amp=amp,
                                     nc=request.nc)
        memory_scale = memory_correction(session, gpu) if gpu.id != "cpu" else 1.0
        mem = dataclasses.replace(mem, peak_gb=mem.peak_gb * memory_scale, device_gb=mem.device_gb * memory_scale)
        fits = mem.device_gb <= vram if gpu.id != "cpu" else mem.peak_gb <= vram
        workers = min(int(args["workers"]), int(host_cpus(gpu)), batch) if args["workers"] else 0
        # The CPU's time model is FLOPs only (its probe calibrates it); GPUs are timed by their activations.
        activation_bytes, _ = (0.0, model.task) if gpu.id == "cpu" else _activations(model, imgsz, amp)
        work = Workload(gflops=gflops, train_images=train_images, val_images=request.val_images,
                        epochs=args["epochs"], batch=batch, workers=workers, host_cpus=host_cpus(gpu), imgsz=imgsz,
                        cache=args["cache"], val_every_epoch=bool(args["val"]),
                        patience=args["patience"] if args["patience"] else None,
                        activation_bytes=activation_bytes, task=model.task,
                        source_pixels=(request.source_image_size[0] * request.source_image_size[1]
                                       if request.source_image_size else None))
        times = estimate_time(work, calibration.speed, calibration.loader, fixed_costs(session, gpu),
                              spread=calibration.spread)
        cost = cost_range_cents(times.total_seconds, gpu.price_per_hour)
        allowed = gpu.allowed_for(request.tier)
        options.append(Option(gpu.id, gpu.display_name, gpu.price_per_hour, fits, allowed, times.total_seconds,
                              cost))
        estimates.append({
            "gpuType": gpu.id, "displayName": gpu.display_name, "pricePerHour": gpu.price_per_hour,
            "vramGb": vram, "fits": fits, "memoryGb": round(mem.device_gb, 2), "maxBatch": max_batch,
            "batch": batch, "loaderBound": times.loader_bound, "allowed": allowed,
            "minTier": gpu.min_tier, "availability": "High",
            "epochSeconds": times.epoch_seconds.as_dict(), "totalSeconds": times.total_seconds.as_dict(),
            "costCents": cost.as_dict(0),
            "calibration": {"source": calibration.speed.source, "points": calibration.points},
            "breakdown": {k: round(v, 1) for k, v in times.breakdown.items()},
        })
    estimates.sort(key=lambda e: (e["costCents"]["value"], e["totalSeconds"]["value"]))
    deadline = request.deadline_minutes * 60 if request.deadline_minutes is not None else None
    recommendation = recommend(options, deadline_s=deadline, budget_cents=request.budget_cents)
    body: dict[str, Any] = {
        "model": {"name": model.name, "family": model.family, "task": model.task, "params": model.params,
                  "gflops": round(gflops, 2), "imgsz": imgsz},
        "images": {"train": train_images, "val": request.val_images,
                   **({"sourceSize": list(request.source_image_size)} if request.source_image_size else {})},
        "estimates": estimates, "recommendation": recommendation, "accuracy": accuracy(session, catalogue),
    }
    if deadline is None and request.budget_cents is None:
        body["guidance"] = _guidance(train_images, recommendation, catalogue)
    return body


def _guidance(train_images: int, recommendation: dict[str, Any], catalogue: Catalogue) -> dict[str, Any]:
    seed = seed_guidance(train_images)
    pick = (recommendation.get("balanced") or {}).get("gpuType")
    expected = {"small": ("rtx-2000-ada", "rtx-4000-ada", "rtx-a4500", "l4"),
                "medium": ("rtx-4090", "rtx-a6000", "rtx-a5000", "rtx-3090", "rtx-6000-ada", "l40s", "rtx-5090"),
                "large": ("h100-sxm", "h100-pcie", "h100-nvl", "a100-80gb-sxm", "a100-80gb-pcie")}[seed["band"]]
    agrees = pick in expected
    seed["agrees"] = agrees
    if not agrees and pick and pick in catalogue:
        seed["why"] = (f"the estimate prefers {catalogue.get(pick).display_name}: for this model, image size and "
                       f"data it gives a better time x price than the rule of thumb's {seed['gpuClass']}")
    return seed


def _host_ram_gb() -> float:
    try:
        import psutil

        return round(psutil.virtual_memory().total / 1024**3, 1)
    except Exception:  # pragma: no cover - psutil ships with ultralytics
        return 16.0
