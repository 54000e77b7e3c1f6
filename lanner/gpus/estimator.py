"""The training-time and cost model. Pure functions: no database, no torch; every input is explicit.

Per optimizer step on a device (a GPU, or the CPU):

    t_step  = t_fixed + batch * (t_image + t_task)        compute: a per-step cost (kernel launches, optimizer
    t_image = 3 * GFLOPs(imgsz) / throughput                step) plus the FLOPs of forward + backward (~3x fwd)
    t_load  = batch * loader_cost(imgsz) / workers        the data loader (decode + mosaic + augment) in parallel

On a GPU whose ``DeviceSpeed`` has an activation rate, and when the workload says how many bytes autograd saves per
image, the per-image time follows memory traffic instead (a roofline whose compute roof is the datasheet peak):

    t_image = max(activation_bytes / activation_rate, 3 * GFLOPs(imgsz) / peak)
    t_task  = per-image cost of a task's loss that runs image by image on the host (segmentation's mask loss)

YOLO convolutions are narrow and every one is followed by BatchNorm and SiLU, so under AMP a training step streams
its saved activations through memory several times and the tensor cores mostly wait (see ``priors.py``).

A GPU overlaps loading with compute, so a step takes max(compute, load): a fast GPU starved by a few host CPUs
is *loader-bound* and says so. The loader's workers are min(workers, vCPUs) (ultralytics' rule, 8 by default), and
on a GPU host the trainer's own process keeps one vCPU busy (the training loop, the loss's target assignment, the
pin-memory thread), so they run on at most vCPUs - 1. On the CPU the trainer and its loader share the same cores,
so they add up.
Validation runs forward only over the val split, once per epoch. Fixed costs: start-up (provisioning, dataset
download and caching, model build), the final validation, checkpoint uploads.

On ``gpus`` GPUs of one node (DDP) each trains and validates its share of every epoch, with its own slice of the
host's vCPUs, while the gradients are all-reduced: an epoch takes one GPU's time at the same total batch divided
by ``gpus * gpu_efficiency`` (the catalogue's ``multi_gpu_efficiency``, an assumption until measured); start-up,
the final validation and the uploads do not shrink.

``throughput`` and ``t_fixed`` per device come from ``DeviceSpeed``: seeded from specifications and published
measurements (see ``priors.py``), replaced by calibration from real runs and probes as they arrive.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

PriceRule = Callable[[float, float], int]
"""(seconds, USD per hour) -> micro-dollars charged: how device time is priced (``lanner.billing.metering``'s
``cost_micros``). A parameter, so the estimator knows no billing and an estimate uses the meter's own rule."""


@dataclass(frozen=True)
class DeviceSpeed:
    """How fast one device trains, in the terms of the model above."""

    train_tflops: float          # effective FLOP rate of forward+backward at large batch (TFLOP/s)
    step_overhead_s: float       # fixed cost per optimizer step (launches, optimizer, host sync)
    val_speedup: float = 1.6     # forward-only runs faster per FLOP than training (no grads, fused inference)
    overlaps_loader: bool = True  # GPUs load in parallel with compute; the CPU shares its cores
    source: str = "prior"
    # GPUs: saved-activation bytes (as trained: fp16 under AMP) a training step gets through per second (GB/s).
    # None: the FLOP model above alone (the CPU, whose probe calibrates it, and workloads of unknown activations).
    activation_gbs: float | None = None
    peak_tflops: float | None = None   # compute roof of the memory-traffic model (datasheet dense FP16 tensor)
    segment_image_s: float = 0.0  # segmentation: per-image mask-loss loop on the host, not overlapped with the GPU


@dataclass(frozen=True)
class LoaderSpeed:
    """Data-loader cost: CPU seconds per training image at imgsz 640 (mosaic and augmentation included)."""

    train_cpu_s_640: float
    val_cpu_s_640: float
    cached_factor: float = 0.45   # cache=ram/disk skips JPEG decode, the largest part of the work
    source: str = "prior"


@dataclass(frozen=True)
class FixedCosts:
    provision_s: float            # machine start, container pull
    per_image_download_s: float   # dataset download and caching, per image
    model_build_s: float
    checkpoint_upload_s: float    # per upload (one every 15 min, plus the final one)


@dataclass(frozen=True)
class Workload:
    gflops: float                 # forward GFLOPs per image at the run's imgsz
    train_images: int             # images per epoch (train split x fraction)
    val_images: int
    epochs: int
    batch: int
    workers: int                  # loader worker processes the trainer will use
    host_cpus: float              # CPU cores available to the loader
    imgsz: int
    cache: bool = False
    val_every_epoch: bool = True
    patience: int | None = None   # early stop: the run may end after this many epochs without improvement
    activation_bytes: float = 0.0  # bytes autograd saves per training image, as trained (AMP: fp16); 0: unknown
    task: str = "detect"
    source_pixels: float | None = None  # width x height of a typical source image; None: like the priors'
    gpus: int = 1                 # GPUs on one node, one DDP process each; batch is their total
    gpu_efficiency: float = 1.0   # per-GPU scaling of an epoch on ``gpus`` of them (catalogue multi_gpu_efficiency)


# The loader priors were measured on COCO-like 640x480 JPEGs (priors.py, benchmarks/loader_factors.py).
REFERENCE_SOURCE_PIXELS = 640 * 480


def loader_image_factor(work: Workload, loader: LoaderSpeed, cached: bool) -> float:
    """The loader's cost per image relative to a 640x480 source at imgsz 640.

    The part a cache removes (``1 - cached_factor``: the JPEG decode) grows with the source's pixels and not
    with imgsz; the rest (resize, mosaic, augmentation) works at imgsz. Without a known source size the whole
    cost scales with imgsz, as the priors were fitted. Resizing a large source is counted as decode (an
    assumption: both touch every source pixel once)."""
    pixels = (work.imgsz / 640.0) ** 2
    if cached:
        return loader.cached_factor * pixels
    if work.source_pixels is None:
        return pixels
    decode = 1.0 - loader.cached_factor
    return (1.0 - decode) * pixels + decode * work.source_pixels / REFERENCE_SOURCE_PIXELS


@dataclass(frozen=True)
class Range:
    value: float
    low: float
    high: float

    def scaled(self, factor: float) -> Range:
        return Range(self.value * factor, self.low * factor, self.high * factor)

    def as_dict(self, digits: int = 1) -> dict[str, float]:
        return {"value": round(self.value, digits), "low": round(self.low, digits), "high": round(self.high, digits)}


@dataclass(frozen=True)
class TimeEstimate:
    epoch_seconds: Range
    total_seconds: Range
    startup_seconds: float
    train_step_seconds: float
    compute_step_seconds: float
    loader_step_seconds: float
    loader_bound: bool
    breakdown: dict[str, float] = field(default_factory=dict)


def _memory_bound(work: Workload, speed: DeviceSpeed) -> bool:
    return bool(speed.activation_gbs and work.activation_bytes > 0)


def image_seconds(work: Workload, speed: DeviceSpeed) -> float:
    """Device seconds of forward + backward for one training image, per-step overhead excluded."""
    flops = 3.0 * work.gflops * 1e9
    if not _memory_bound(work, speed):
        return flops / (speed.train_tflops * 1e12)
    roof = flops / (speed.peak_tflops * 1e12) if speed.peak_tflops else 0.0
    return max(work.activation_bytes / (speed.activation_gbs * 1e9), roof)  # type: ignore[operator]


def task_image_seconds(work: Workload, speed: DeviceSpeed) -> float:
    """Host seconds per image that a task's loss adds in series with the device (0 for detection)."""
    return speed.segment_image_s if work.task == "segment" else 0.0


MAIN_PROCESS_VCPUS = 1.0  # a GPU host's vCPUs the training process itself keeps busy (not the loader's)


def loader_parallel(work: Workload, speed: DeviceSpeed) -> float:
    """How many images the loader decodes and augments at once: its workers, bounded by the vCPUs left to them."""
    cpus = work.host_cpus - MAIN_PROCESS_VCPUS if speed.overlaps_loader else work.host_cpus
    return max(1.0, min(float(work.workers or 1), cpus))


def step_times(work: Workload, speed: DeviceSpeed, loader: LoaderSpeed) -> tuple[float, float]:
    """(compute seconds, loader seconds) for one training step of ``work.batch`` images."""
    if _memory_bound(work, speed):
        compute = speed.step_overhead_s + work.batch * (image_seconds(work, speed) + task_image_seconds(work, speed))
    else:
        flops = 3.0 * work.gflops * 1e9
        compute = speed.step_overhead_s + work.batch * flops / (speed.train_tflops * 1e12)
        compute += work.batch * task_image_seconds(work, speed)
    per_image = loader.train_cpu_s_640 * loader_image_factor(work, loader, work.cache)
    load = work.batch * per_image / loader_parallel(work, speed)
    return compute, load


def parallel_speedup(work: Workload) -> float:
    """How many times faster than one GPU an epoch runs on ``work.gpus`` of them (1 on a single device)."""
    return work.gpus * work.gpu_efficiency if work.gpus > 1 else 1.0


def _epoch_parts(work: Workload, speed: DeviceSpeed, loader: LoaderSpeed) -> tuple[float, float, float, float]:
    """(compute seconds per step, loader seconds per step, training seconds, validation seconds) of one epoch;
    the steps are one GPU's at the whole batch, the epoch's seconds those of all ``work.gpus``."""
    compute, load = step_times(work, speed, loader)
    # Over a whole epoch: every step pays its overhead, but only real images pay compute and loading (the last
    # batch is partial), so a huge AutoBatch on a small dataset is not charged for images it never sees.
    steps = math.ceil(work.train_images / work.batch) if work.train_images else 0
    train_compute = steps * speed.step_overhead_s + work.train_images * (compute - speed.step_overhead_s) / work.batch
    train_load = work.train_images * load / work.batch
    train = max(train_compute, train_load) if speed.overlaps_loader else train_compute + train_load
    if _memory_bound(work, speed):  # forward only: a third of the traffic, and faster per byte like the FLOPs
        val_compute = work.val_images * image_seconds(work, speed) / (3.0 * speed.val_speedup)
    else:
        val_compute = work.val_images * work.gflops * 1e9 / (speed.train_tflops * 1e12 * speed.val_speedup)
    # Validation runs the same loss image by image (the trainer reports val losses) and post-processes each
    # image's masks for the mask mAP: counted at the training rate.
    val_compute += work.val_images * task_image_seconds(work, speed)
    val_load = (work.val_images * loader.val_cpu_s_640 * loader_image_factor(work, loader, False)
                / loader_parallel(work, speed))
    val = (max(val_compute, val_load) if speed.overlaps_loader else val_compute + val_load)
    val += math.ceil(work.val_images / max(1, work.batch * 2)) * speed.step_overhead_s if work.val_images else 0.0
    speedup = parallel_speedup(work)
    return compute, load, train / speedup, val / speedup


def epoch_seconds(work: Workload, speed: DeviceSpeed, loader: LoaderSpeed) -> float:
    """``estimate_time(...).epoch_seconds.value`` alone: calibration refits ask for it thousands of times."""
    _, _, train, val = _epoch_parts(work, speed, loader)
    return train + (val if work.val_every_epoch else 0.0)


def estimate_time(work: Workload, speed: DeviceSpeed, loader: LoaderSpeed, fixed: FixedCosts, *,
                  spread: tuple[float, float] = (0.8, 1.25)) -> TimeEstimate:
    """Epoch and total time. ``spread`` is the (low, high) ratio band of measured/predicted from calibration."""
    compute, load, train, val = _epoch_parts(work, speed, loader)
    loader_bound = load > compute
    step = max(compute, load) if speed.overlaps_loader else compute + load
    epoch = train + (val if work.val_every_epoch else 0.0)
    startup = fixed.provision_s + fixed.model_build_s + fixed.per_image_download_s * (work.train_images +
                                                                                      work.val_images)
    final = val + fixed.checkpoint_upload_s
    core_seconds = epoch * work.epochs
    uploads = math.floor(core_seconds / 900.0) * fixed.checkpoint_upload_s
    total = startup + core_seconds + final + uploads
    low, high = spread
    if work.patience is not None and work.patience < work.epochs:
        # Early stop can end the run after `patience` epochs without improvement; it cannot end before them.
        min_epochs = min(work.epochs, work.patience + 1)
        total_low = startup + epoch * min_epochs + final
    else:
        total_low = total
    epoch_range = Range(epoch, epoch * low, epoch * high)
    total_range = Range(total, total_low * low, total * high)
    return TimeEstimate(
        epoch_seconds=epoch_range, total_seconds=total_range, startup_seconds=startup, train_step_seconds=step,
        compute_step_seconds=compute, loader_step_seconds=load, loader_bound=loader_bound,
        breakdown={"startup": startup, "train_per_epoch": train, "val_per_epoch": val, "final": final,
                   "uploads": uploads},
    )


def cents(micros: int) -> int:
    """Display rounding used everywhere: whole cents, rounded up (a cost is never shown lower than charged)."""
    return -(-micros // 10_000)


def cost_range_cents(total: Range, price_per_hour: float, price: PriceRule) -> Range:
    """The cost of ``total`` seconds in whole cents, priced by the caller's rule (billing's, so an estimate
    is priced as the run will be billed)."""
    return Range(float(cents(price(total.value, price_per_hour))),
                 float(cents(price(total.low, price_per_hour))),
                 float(cents(price(total.high, price_per_hour))))


@dataclass(frozen=True)
class Option:
    """One GPU type as the recommender sees it."""

    gpu_type: str
    display_name: str
    price_per_hour: float
    fits: bool
    allowed: bool
    total_seconds: Range
    cost_cents: Range


def _meets(option: Option, deadline_s: float | None, budget_cents: float | None) -> bool:
    if deadline_s is not None and option.total_seconds.value > deadline_s:
        return False
    return not (budget_cents is not None and option.cost_cents.value > budget_cents)


def duration_text(seconds: float) -> str:
    """A duration as people read it: ``<0.1 s``, ``0.4 s``, ``42 s``, ``2.5 min``, ``40 min``, ``2.5 h`` (never
    ``0 s`` for a short epoch)."""
    if seconds < 0.1:
        return "<0.1 s"
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if seconds < 89.5:
        return f"{seconds:.0f} s"
    if seconds < 597:
        return f"{seconds / 60:.1f} min"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def ratio_text(a: Option, b: Option) -> str:
    """`` (2.0x faster than B for 1.5x the price)``: how ``a`` compares with ``b``, in the figures shown (one
    decimal); a ratio that shows as 1.0 says "as fast" / "the same price", and nothing is said when both do."""
    if a.gpu_type == b.gpu_type or not b.price_per_hour:
        return ""
    speed = b.total_seconds.value / a.total_seconds.value if a.total_seconds.value else 1.0
    price = a.price_per_hour / b.price_per_hour
    shown_speed = f"{max(speed, 1 / speed) if speed > 0 else 1.0:.1f}"
    shown_price = f"{price:.1f}"
    if shown_speed == "1.0" and shown_price == "1.0":
        return ""
    if shown_speed == "1.0":
        pace = f"about as fast as {b.display_name}"
    else:
        pace = f"{shown_speed}x {'faster' if speed >= 1 else 'slower'} than {b.display_name}"
    if shown_price == "1.0":
        cost = " at about the same price"
    elif price < 0.05:
        cost = " for under 0.1x the price"
    else:
        cost = f" for {shown_price}x the price"
    return f" ({pace}{cost})"


def recommend(options: list[Option], *, deadline_s: float | None = None, budget_cents: float | None = None,
              ) -> dict[str, dict[str, str] | None]:
    """cheapest (fits, allowed, meets deadline and budget), fastest (fits, allowed), balanced (best price x time).
    Only an option that meets the deadline and budget is said to; when none does, ``note`` says so and names the
    fastest."""
    usable = [o for o in options if o.fits and o.allowed]
    if not usable:
        return {"cheapest": None, "fastest": None, "balanced": None}
    fastest = min(usable, key=lambda o: (o.total_seconds.value, o.cost_cents.value))
    candidates = [o for o in usable if _meets(o, deadline_s, budget_cents)]
    cheapest = min(candidates, key=lambda o: (o.cost_cents.value, o.total_seconds.value)) if candidates else None
    # Balanced: the smallest cost x time product among the options that meet the constraints (or all usable).
    pool = candidates or usable
    balanced = min(pool, key=lambda o: (o.cost_cents.value + 1) * o.total_seconds.value)
    constraints = []  # (words, whether an option meets it)
    if deadline_s is not None:
        constraints.append((f"your {duration_text(deadline_s)} deadline",
                            lambda o: _meets(o, deadline_s, None)))
    if budget_cents is not None:
        constraints.append((f"your ${budget_cents / 100:.2f} budget", lambda o: _meets(o, None, budget_cents)))
    wanted = " and ".join(words for words, _ in constraints)

    def meets(option: Option) -> str:
        missed = [words for words, check in constraints if not check(option)]
        if not constraints:
            return ""
        return f"; does not meet {' and '.join(missed)}" if missed else f"; meets {wanted}"

    def compare(a: Option) -> str:
        return ratio_text(a, cheapest) if cheapest else ""

    result: dict[str, dict[str, str] | None] = {}
    if cheapest is not None:
        result["cheapest"] = {"gpuType": cheapest.gpu_type, "reason": (
            f"{cheapest.display_name}: lowest cost, about ${cheapest.cost_cents.value / 100:.2f} in "
            f"{duration_text(cheapest.total_seconds.value)}{meets(cheapest)}.")}
    else:
        result["cheapest"] = None
        result["note"] = {"reason": f"No allowed GPU that fits meets {wanted or 'the constraints'}; the fastest "
                                    f"is {fastest.display_name} at {duration_text(fastest.total_seconds.value)}."}
    result["fastest"] = {"gpuType": fastest.gpu_type, "reason": (
        f"{fastest.display_name}: shortest run, about {duration_text(fastest.total_seconds.value)} for "
        f"${fastest.cost_cents.value / 100:.2f}{compare(fastest)}{meets(fastest)}.")}
    result["balanced"] = {"gpuType": balanced.gpu_type, "reason": (
        f"{balanced.display_name}: best balance of time and price, about "
        f"{duration_text(balanced.total_seconds.value)} for ${balanced.cost_cents.value / 100:.2f}"
        f"{compare(balanced)}{meets(balanced)}.")}
    return result


def seed_guidance(train_images: int) -> dict[str, str]:
    """The product brief's rule of thumb, shown as a sanity band next to the computed answer."""
    if train_images < 1000:
        return {"band": "small", "gpuClass": "RTX 2000 Ada class",
                "rule": "fewer than 1,000 images: a small GPU such as the RTX 2000 Ada is enough"}
    if train_images <= 10000:
        return {"band": "medium", "gpuClass": "RTX 4090 / RTX A6000 class",
                "rule": "1,000-10,000 images: an RTX 4090 or RTX A6000 class GPU"}
    return {"band": "large", "gpuClass": "H100 class", "rule": "more than 10,000 images: an H100 class GPU"}
