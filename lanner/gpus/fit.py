"""Fitting the time model to what was measured here: calibration points (probes, finished and running runs)
scale each GPU type's prior speed, give the uncertainty band, correct the memory model and the start-up time, and
grade the fit (leave-one-out accuracy). Pure reads of ``CalibrationPoint`` rows: recording them from runs is
training's business (``lanner.training.learn``)."""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.gpus import priors
from lanner.gpus.catalogue import Catalogue, GpuType
from lanner.gpus.estimator import DeviceSpeed, FixedCosts, LoaderSpeed, Workload, epoch_seconds, estimate_time
from lanner.gpus.measured import MeasuredPoint
from lanner.gpus.models import CalibrationPoint

PRIOR_SPREAD = (0.7, 1.45)     # before any calibration the band is wide, and says so
MIN_SPREAD = (0.85, 1.15)      # calibration never claims better than +/-15 %


@dataclass
class Calibration:
    """A GPU type's speed as fitted here, the band its residuals leave, and how many points it rests on."""

    speed: DeviceSpeed
    spread: tuple[float, float]
    points: int
    loader: LoaderSpeed = priors.LOADER_640
    measured: str | None = None  # provenance of the calibration file(s) the fit rests on, if any


def loader_prior(gpu: GpuType) -> LoaderSpeed:
    """The local machine's loader until probed; rented GPU hosts have more and faster cores."""
    return priors.LOADER_640 if gpu.id == "cpu" else priors.CLOUD_LOADER_640


Point = CalibrationPoint | MeasuredPoint  # a run or probe recorded here, or a calibration file's measurement


def _file_points(catalogue: Catalogue, gpu_id: str) -> tuple[list[MeasuredPoint], str | None]:
    """The calibration files' points for this type (measured on a real card of it) and their provenance."""
    sets = catalogue.measured(gpu_id)
    return [p for m in sets for p in m.points], "; ".join(m.provenance for m in sets) or None


def _workload(point: Point) -> Workload:
    activation_bytes, task = (0.0, "detect") if point.gpu_type == "cpu" else activations(point.model_name,
                                                                                         point.imgsz, True)
    return Workload(gflops=point.gflops, train_images=point.train_images, val_images=point.val_images, epochs=1,
                    batch=point.batch, workers=point.workers, host_cpus=point.host_cpus, imgsz=point.imgsz,
                    cache=point.cache, activation_bytes=activation_bytes, task=task)


@functools.lru_cache(maxsize=256)
def activations(model: Any, imgsz: int, amp: bool, nc: int | None = None) -> tuple[float, str]:
    """(bytes autograd saves per training image as trained, task) for the GPU time model; (0, detect) when the
    model cannot be profiled (the estimate then falls back to the FLOP model)."""
    from lanner.gpus import memory, profile  # torch: loaded on the first estimate, not at server start

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


POINTS_MEMO = "lanner.calibration_points"  # session.info key: each GPU type's points, during one estimate
Measured = tuple[tuple[Workload, float], ...]  # (workload, measured epoch seconds) of calibration points


def _points(session: Session, gpu_type: str) -> list[CalibrationPoint]:
    memo = session.info.get(POINTS_MEMO)
    if memo is not None and gpu_type in memo:
        return memo[gpu_type]
    points = list(session.scalars(select(CalibrationPoint).where(CalibrationPoint.gpu_type == gpu_type)
                                  .order_by(CalibrationPoint.id.desc()).limit(200)))
    if memo is not None:
        memo[gpu_type] = points
    return points


@contextmanager
def remembered_points(session: Session) -> Iterator[None]:
    """Within the block each GPU type's points are read once (an estimate asks for them to calibrate the type,
    correct its memory model and measure its start-up), never across blocks: a later estimate sees new runs."""
    session.info[POINTS_MEMO] = {}
    try:
        yield
    finally:
        session.info.pop(POINTS_MEMO, None)


def _measured(points: list[Point]) -> Measured:
    return tuple((_workload(p), p.epoch_seconds) for p in points)


def calibrate(session: Session, catalogue: Catalogue, gpu: GpuType, family: str | None = None) -> Calibration:
    """Scale the device's throughput so that its recorded points are predicted without bias (median ratio 1),
    and take the uncertainty band from the spread of what is left (the residuals).

    The closest evidence wins: points of this GPU type and this model family, else of this GPU type, else the
    efficiency other GPU types of the same architecture showed against their priors, else the prior. Points are
    the runs and probes recorded here plus the calibration files measured on this type (``measured.py``)."""
    prior = prior_speed(catalogue, gpu)
    file_points, provenance = _file_points(catalogue, gpu.id)
    points: list[Point] = [*_points(session, gpu.id), *file_points]
    loader = loader_prior(gpu)
    same_family = [p for p in points if family and p.family == family]
    if same_family:
        points = same_family
    if not points:
        borrowed = _architecture_speed(session, catalogue, gpu, prior)
        if borrowed is None:
            return Calibration(prior, PRIOR_SPREAD, 0, loader)
        return Calibration(borrowed, PRIOR_SPREAD, 0, loader)
    measured = _measured(points)
    speed = _fit_measured(prior, measured, loader)
    if same_family:
        speed = dataclasses.replace(speed, source=f"{speed.source} of {family}")
    used = provenance if any(isinstance(p, MeasuredPoint) for p in points) else None
    if used:
        speed = dataclasses.replace(speed, source=f"{speed.source}; {used}")
    residuals = [seconds / epoch_seconds(work, speed, loader) for work, seconds in measured]
    if len(residuals) >= 3:
        ordered = sorted(residuals)
        low = min(MIN_SPREAD[0], ordered[max(0, int(0.1 * len(ordered)) - 1)] * 0.95)
        high = max(MIN_SPREAD[1], ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1.05)
    else:
        low, high = 0.8, 1.25
    return Calibration(speed, (low, high), len(points), loader, used)


ACCURACY_POINTS = 50  # per GPU type: leave-one-out refits are quadratic, and recent runs matter most


def accuracy(session: Session, catalogue: Catalogue) -> dict[str, Any]:
    """How well the current model predicts recorded runs: each run predicted from the other points of its device
    (leave-one-out), so a point never grades the fit it took part in."""
    errors: list[float] = []
    for gpu in catalogue.all():
        points = list(session.scalars(select(CalibrationPoint).where(CalibrationPoint.gpu_type == gpu.id)
                                      .order_by(CalibrationPoint.id.desc()).limit(ACCURACY_POINTS)))
        if len(points) < 2:
            continue
        graded = tuple((p.id, p.source == "probe", work, seconds) for p, (work, seconds) in zip(
            points, _measured(points), strict=True))
        errors += _leave_one_out(prior_speed(catalogue, gpu), loader_prior(gpu), graded)
    learned = session.scalar(select(func.count()).select_from(CalibrationPoint)
                             .where(CalibrationPoint.source != "probe")) or 0
    if not errors:
        note = ("no finished runs measured yet: bands are the wide prior ones" if not learned else
                f"learned from {learned} finished run{'s' if learned != 1 else ''}; the error is graded once a GPU "
                "type has two")
        return {"runs": 0, "learnedFrom": learned, "medianAbsErrorPct": None, "worstAbsErrorPct": None,
                "note": note}
    return {"runs": len(errors), "learnedFrom": learned, "medianAbsErrorPct": round(100 * statistics.median(errors), 1),
            "worstAbsErrorPct": round(100 * max(errors), 1),
            "note": f"learned from {learned} finished run{'s' if learned != 1 else ''}"}


@functools.lru_cache(maxsize=64)
def _leave_one_out(prior: DeviceSpeed, loader: LoaderSpeed,
                   graded: tuple[tuple[int, bool, Workload, float], ...]) -> tuple[float, ...]:
    """The relative error of each point but probes, (id, probe, workload, seconds), predicted by a fit of the
    others. A pure function of its arguments, remembered: a grade refits every point's others up to 30 times
    (some 70,000 epoch predictions for 50 points), and the points change only when a run reports."""
    errors = []
    for point_id, probe, work, seconds in graded:
        if probe:
            continue
        speed = _fit(prior, tuple((w, s) for i, _, w, s in graded if i != point_id), loader)
        errors.append(abs(epoch_seconds(work, speed, loader) - seconds) / seconds)
    return tuple(errors)


def _predicted_epoch(point: CalibrationPoint, speed: DeviceSpeed, loader: LoaderSpeed) -> float:
    return estimate_time(_workload(point), speed, loader, priors.LOCAL_FIXED).epoch_seconds.value


def _fit_speed(prior: DeviceSpeed, points: list[Point], loader: LoaderSpeed) -> DeviceSpeed:
    """Scale the device's compute (FLOP rate and per-step cost together) until its points are predicted without
    bias: the median of measured/predicted is 1. The loader part is not scaled, so this is iterated."""
    return _fit_measured(prior, _measured(points), loader)


def _fit(prior: DeviceSpeed, measured: Measured, loader: LoaderSpeed) -> DeviceSpeed:
    speed = prior
    for _ in range(30):
        scale = statistics.median(seconds / epoch_seconds(work, speed, loader) for work, seconds in measured)
        speed = _scaled_speed(speed, scale, f"calibrated on {len(measured)} measurement(s)")
        if abs(scale - 1) < 1e-4:
            break
    return speed


# ``_fit`` is a pure function of its arguments, and every estimate refits each measured GPU type (and the types
# of its architecture) on the same points until a run reports: remembered.
_fit_measured = functools.lru_cache(maxsize=128)(_fit)


def _measured_scale(session: Session, catalogue: Catalogue, gpu: GpuType) -> float | None:
    """How many times slower than its prior a measured type ran; remembered during one estimate (which asks it
    once per sibling of every unmeasured type, and a refit walks all of the type's points)."""
    memo = session.info.setdefault("lanner.measured_scales", {})
    if gpu.id not in memo:
        points: list[Point] = [*_points(session, gpu.id), *_file_points(catalogue, gpu.id)[0]]
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
    from lanner.gpus import memory, profile  # torch: loaded on the first estimate, not at server start

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
