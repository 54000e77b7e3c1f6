"""The GPU advisor: turns a request (model, data, trainer arguments) into estimates for every GPU type. The time
model is ``estimator.py``, its calibration ``fit.py``; this module gathers their inputs and prices the result
with the caller's price rule (billing's, so an estimate costs what the run will be charged)."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from lanner.errors import BadRequest, Unprocessable
from lanner.gpus import fit
from lanner.gpus.catalogue import Catalogue, GpuType
from lanner.gpus.estimator import Option, PriceRule, Workload, cost_range_cents, estimate_time, recommend, seed_guidance

MAX_EPOCHS = 100_000
MAX_IMGSZ = 8192
DEFAULT_ARGS = {"epochs": 100, "imgsz": 640, "batch": 16, "workers": 8, "fraction": 1.0, "cache": False,
                "patience": 100, "optimizer": "auto", "amp": True, "val": True}
LOADER_WORKERS = 8  # the trainer's default ``workers``; ultralytics uses min(os.cpu_count(), workers, batches)


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
    gpu_count: int = 1  # GPUs of each type on one node (DDP): the batch is split between them


@functools.cache
def trainer_arguments() -> frozenset[str]:
    """The names ``yolo train`` accepts: the keys of ultralytics' ``cfg/default.yaml`` (its ``DEFAULT_CFG_DICT``),
    read from the file, since importing ``ultralytics.cfg`` imports torch (seconds)."""
    import yaml  # PyYAML comes with ultralytics

    spec = importlib.util.find_spec("ultralytics")  # finds the package without running it
    if spec is None or spec.origin is None:
        raise RuntimeError("the ultralytics package is not installed")
    text = (Path(spec.origin).parent / "cfg" / "default.yaml").read_text()
    # libyaml's safe loader where PyYAML was built with it: 1 ms for this file against 8 ms in pure Python
    return frozenset(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


def normalise_args(train_args: dict[str, Any] | None) -> dict[str, Any]:
    """The trainer's own argument names and defaults; invalid values are refused naming the argument."""
    args = dict(DEFAULT_ARGS)
    accepted = trainer_arguments()
    for key, value in (train_args or {}).items():
        if key not in accepted:
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
        from lanner.gpus.memory import resolve_optimizer  # the memory model: loaded on first use, not at server start

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
    """The vCPUs the data loader runs on: this machine's for ``cpu``, else what the catalogue says the host gives
    with one GPU of the type (``LANNER_GPU_CATALOGUE`` can change it)."""
    if gpu.id == "cpu":
        return float(os.cpu_count() or 1)
    return float(gpu.host_vcpus)


def loader_workers(requested: int, vcpus: float, train_images: int, batch: int) -> int:
    """Loader worker processes the trainer will start: ultralytics' ``build_dataloader`` takes
    min(os.cpu_count(), workers, batches), and none when there is a single batch."""
    batches = -(-train_images // max(1, batch))
    return 0 if not requested or batches <= 1 else min(int(requested), int(vcpus), batches)


def memory_margin(planned_gb: float, usable_gb: float, largest_batch: int, *, expected_gb: float, card_gb: float,
                  device: str = "GPU") -> dict[str, Any]:
    """The chosen batch's memory against what the device can give, as the fit is decided: the pessimistic
    planning figure (``memory.PLANNING_MARGIN``) against the usable part of the card (``memory.usable_gb``; on
    ``cpu``, the host's RAM), with the expected figure beside it and the largest batch that fits: what a user reads
    before paying for a run that might run out of memory."""
    free = usable_gb - planned_gb
    free_pct = max(0.0, 100.0 * free / usable_gb) if usable_gb > 0 else 0.0
    head = f"{planned_gb:.1f} of {usable_gb:.1f} usable GB"
    text = f"{head}, {free_pct:.0f} % free" if free >= 0 else f"{head}, {-free:.1f} GB over"
    return {"usedGb": round(planned_gb, 2), "capacityGb": round(usable_gb, 2), "freeGb": round(free, 2),
            "freePct": round(free_pct, 1), "expectedGb": round(expected_gb, 2), "cardGb": card_gb,
            "largestBatch": largest_batch, "device": device,
            "text": f"{text} (expected {expected_gb:.1f} GB of a {card_gb:g} GB {device}); "
                    f"largest batch that fits: {largest_batch}"}


def estimate(session: Session, catalogue: Catalogue, request: Request, *, price: PriceRule) -> dict[str, Any]:
    """Every requested (or offered) GPU type: batch, memory, time and cost, whether it is on the time/cost
    Pareto front, and a recommendation."""
    with fit.remembered_points(session):  # each GPU type's calibration points read once, not three times
        return _estimate(session, catalogue, request, price=price)


def _estimate(session: Session, catalogue: Catalogue, request: Request, *, price: PriceRule) -> dict[str, Any]:
    # the memory model, and torch on the first profile not in the disk cache (profile_cache): not at server start
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
    else:  # on several GPUs, only the types a run may use several of (not the host CPU)
        gpus = [g for g in catalogue.offered() if request.gpu_count == 1 or g.multi_gpu_efficiency is not None]
    count = request.gpu_count
    _check_split(args["batch"], count, [g for g in gpus if g.multi_gpu_efficiency is None])
    train_images = max(1, round(request.train_images * args["fraction"]))
    imgsz = args["imgsz"]
    gflops = model.gflops(imgsz)
    estimates, options = [], []
    for gpu in gpus:
        calibration = fit.calibrate(session, catalogue, gpu, model.family)
        vram = gpu.vram_gb if gpu.id != "cpu" else _host_ram_gb()
        amp = bool(args["amp"]) and gpu.id != "cpu"
        if args["batch"] == -1 or (isinstance(args["batch"], float) and args["batch"] < 1):
            fraction = 0.60 if args["batch"] == -1 else float(args["batch"])
            batch = 16 if gpu.id == "cpu" else memory.autobatch_batch(vram, model, imgsz=imgsz, fraction=fraction,
                                                                      amp=amp, nc=request.nc)
        else:
            batch = int(args["batch"])
        per_gpu = batch // count  # the trainer's split (ultralytics BaseTrainer: batch // world_size)
        batch = per_gpu * count  # what the GPUs train on together per step
        mem = memory.training_memory(model, imgsz=imgsz, batch=per_gpu, optimizer=str(args["optimizer"]), amp=amp,
                                     nc=request.nc)
        usable = memory.usable_gb(vram) if gpu.id != "cpu" else vram
        memory_scale = fit.memory_correction(session, gpu) if gpu.id != "cpu" else 1.0
        # The largest batch is decided as ``fits`` is: the corrected planning figure against the usable card.
        max_batch = count * memory.max_batch(usable / memory_scale, model, imgsz=imgsz,
                                             optimizer=str(args["optimizer"]), amp=amp, nc=request.nc)
        mem = dataclasses.replace(mem, peak_gb=mem.peak_gb * memory_scale, device_gb=mem.device_gb * memory_scale)
        # Whether it fits is decided on the pessimistic planning figure (memory.PLANNING_MARGIN): a false "fits"
        # costs a failed paid run. The figure shown (memoryGb) stays the expected one.
        plan = memory.training_memory(model, imgsz=imgsz, batch=per_gpu, optimizer=str(args["optimizer"]), amp=amp,
                                      nc=request.nc, planning=True)
        fits = plan.device_gb * memory_scale <= usable if gpu.id != "cpu" else mem.peak_gb <= vram
        workers = loader_workers(int(args["workers"]), host_cpus(gpu), train_images, batch)
        # The CPU's time model is FLOPs only (its probe calibrates it); GPUs are timed by their activations.
        activation_bytes, _ = (0.0, model.task) if gpu.id == "cpu" else fit.activations(model, imgsz, amp)
        work = Workload(gflops=gflops, train_images=train_images, val_images=request.val_images,
                        epochs=args["epochs"], batch=batch, workers=workers, host_cpus=host_cpus(gpu), imgsz=imgsz,
                        cache=args["cache"], val_every_epoch=bool(args["val"]),
                        patience=args["patience"] if args["patience"] else None,
                        activation_bytes=activation_bytes, task=model.task,
                        source_pixels=(request.source_image_size[0] * request.source_image_size[1]
                                       if request.source_image_size else None),
                        gpus=count, gpu_efficiency=gpu.multi_gpu_efficiency or 1.0)
        times = estimate_time(work, calibration.speed, calibration.loader, fit.fixed_costs(session, gpu),
                              spread=calibration.spread)
        # Every GPU is billed as a one-GPU run of the same seconds (billing.metering.charge_for).
        cost = cost_range_cents(times.total_seconds, gpu.price_per_hour, lambda s, p: count * price(s, p))
        allowed = gpu.allowed_for(request.tier)
        per_hour = round(gpu.price_per_hour * count, 6)  # the run's whole price per hour
        options.append(Option(gpu.id, gpu.display_name, per_hour, fits, allowed, times.total_seconds, cost))
        estimates.append({
            "gpuType": gpu.id, "displayName": gpu.display_name, "pricePerHour": per_hour,
            "gpuCount": count, "pricePerGpuHour": gpu.price_per_hour, "batchPerGpu": per_gpu,
            "scaling": scaling(gpu, count),
            "vramGb": vram, "fits": fits, "memoryGb": round(mem.device_gb, 2), "maxBatch": max_batch,
            "memory": memory_margin(plan.device_gb * memory_scale if gpu.id != "cpu" else mem.peak_gb, usable,
                                    max_batch, expected_gb=mem.device_gb if gpu.id != "cpu" else mem.peak_gb,
                                    card_gb=vram, device="GPU" if gpu.id != "cpu" else "host RAM"),
            "host": {"vcpus": host_cpus(gpu) * count, "workers": workers * count,
                     **({"ramGb": gpu.host_ram_gb} if gpu.id != "cpu" else {})},
            "batch": batch, "loaderBound": times.loader_bound, "allowed": allowed,
            "minTier": gpu.min_tier, "availability": "High",
            "epochSeconds": times.epoch_seconds.as_dict(), "totalSeconds": times.total_seconds.as_dict(),
            "costCents": cost.as_dict(0),
            "calibration": {"source": calibration.speed.source, "points": calibration.points,
                            **({"measured": calibration.measured} if calibration.measured else {})},
            "breakdown": {k: round(v, 1) for k, v in times.breakdown.items()},
        })
    estimates.sort(key=lambda e: (e["costCents"]["value"], e["totalSeconds"]["value"]))
    front = pareto_front(estimates)
    for item in estimates:
        item["pareto"] = item["gpuType"] in front
    deadline = request.deadline_minutes * 60 if request.deadline_minutes is not None else None
    recommendation = recommend(options, deadline_s=deadline, budget_cents=request.budget_cents)
    body: dict[str, Any] = {
        "model": {"name": model.name, "family": model.family, "task": model.task, "params": model.params,
                  "gflops": round(gflops, 2), "imgsz": imgsz},
        "images": {"train": train_images, "val": request.val_images,
                   **({"sourceSize": list(request.source_image_size)} if request.source_image_size else {})},
        "estimates": estimates, "recommendation": recommendation, "accuracy": fit.accuracy(session, catalogue),
    }
    if deadline is None and request.budget_cents is None:
        body["guidance"] = guidance(train_images, recommendation, estimates)
    return body


def scaling(gpu: GpuType, count: int) -> dict[str, Any] | None:
    """How an estimate on ``count`` GPUs was scaled from one (None on one GPU), and the assumption it rests on."""
    if count == 1:
        return None
    efficiency = gpu.multi_gpu_efficiency or 1.0
    return {"efficiency": efficiency, "speedup": round(count * efficiency, 3), "measured": False,
            "assumption": f"{count} GPUs are assumed to train {count * efficiency:.2f}x as fast as one ({efficiency:g} "
                          f"per GPU, DDP on one node; catalogue multi_gpu_efficiency): an assumption until runs on "
                          f"several {gpu.display_name} GPUs are measured. Start-up and the final validation do not "
                          f"shrink; memory is per GPU, for batch / {count}."}


def _check_split(batch: int | float, count: int, single: list[GpuType]) -> None:
    """The trainer splits the batch between ``count`` GPUs (DDP), so it must be a whole batch of at least one image
    per GPU, and the types asked for must run on several."""
    if count == 1:
        return
    if single:
        raise BadRequest(f"gpuCount: {single[0].display_name} trains on one device; give gpuCount 1")
    if batch == -1 or batch < 1:  # the trainer refuses AutoBatch on several GPUs
        raise BadRequest(f"trainArgs.batch: AutoBatch (-1 or a fraction) does not work on {count} GPUs; give a "
                         f"whole batch, e.g. {8 * count} (8 per GPU)")
    if batch < count:
        raise BadRequest(f"trainArgs.batch: batch {int(batch)} split over {count} GPUs leaves a GPU without images; "
                         f"give at least {count}")


def pareto_front(estimates: list[dict[str, Any]]) -> set[str]:
    """The usable GPU types (fits, allowed) no other usable type beats on both time and cost: every other choice
    is slower and dearer than one of these. Judged on the figures the answer shows, so a caller who compares
    them finds the same front."""
    usable = [(e["gpuType"], e["totalSeconds"]["value"], e["costCents"]["value"]) for e in estimates
              if e["fits"] and e["allowed"]]
    return {gpu for gpu, time, cost in usable
            if not any(t <= time and c <= cost and (t < time or c < cost) for _, t, c in usable)}


def guidance(train_images: int, recommendation: dict[str, Any], estimates: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule of thumb for this many images, and whether the balanced pick agrees with it (and why not). Asked
    again once the picks are narrowed to the types that run here (``training.capacity.recommend_here``): a
    disagreement must name the type the person is offered, not one they cannot start."""
    seed: dict[str, Any] = dict(seed_guidance(train_images))
    pick = (recommendation.get("balanced") or {}).get("gpuType")
    expected = {"small": ("rtx-2000-ada", "rtx-4000-ada", "rtx-a4500", "l4"),
                "medium": ("rtx-4090", "rtx-a6000", "rtx-a5000", "rtx-3090", "rtx-6000-ada", "l40s", "rtx-5090"),
                "large": ("h100-sxm", "h100-pcie", "h100-nvl", "a100-80gb-sxm", "a100-80gb-pcie")}[seed["band"]]
    seed["agrees"] = pick in expected
    names = {e["gpuType"]: e["displayName"] for e in estimates}
    if not seed["agrees"] and pick in names:
        seed["why"] = (f"the estimate prefers {names[pick]}: for this model, image size and "
                       f"data it gives a better time x price than the rule of thumb's {seed['gpuClass']}")
    return seed


def _host_ram_gb() -> float:
    try:
        import psutil  # only needed here; ships with ultralytics

        return round(psutil.virtual_memory().total / 1024**3, 1)
    except Exception:  # pragma: no cover - psutil ships with ultralytics
        return 16.0
