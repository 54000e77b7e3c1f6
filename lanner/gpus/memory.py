"""GPU memory of ``yolo train``: what the trainer's ``GPU_mem`` column will show, and which batch fits.

The peak of a training step comes at the end of the forward pass, when every tensor autograd saved for backward is
alive at once. We measure those bytes on the real architecture (``activation_bytes_per_image``) and add what a
trainer keeps resident; the remaining constants were fitted to published measurements (IDs from
``/work/shared/reference/measured-training.md``; the fit and its errors are in ``tests/gpus/test_memory.py``):

    peak = params + grads + optimizer + ema                 fp32 copies of P parameters: 4P bytes each
                                                            (+2P: autocast's fp16 weight cache under AMP)
         + activations = K_ACT * A * (AMP_FACTOR if amp) * batch
         + loss        = batch * anchors * (16 * max_objects + 24 * nc)          detect/segment/pose/obb
         + WORKSPACE                                        cuDNN/cuBLAS workspaces, the batch on the GPU, ...
         + fragmentation = min(FRAGMENTATION * (activations + loss), FRAGMENTATION_CAP)
    device = peak + CUDA_CONTEXT                            what nvidia-smi / nvtop show

``A`` is the fp32 bytes saved for backward per image. Every figure is in GiB (2**30 bytes), like the trainer's
``GPU_mem`` (``memory_reserved() / 2**30``) and, near enough, a datasheet's "24 GB". Published YOLOv5-era figures
are in 1e9-byte GB: the tests convert them.
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lanner.gpus import profile_cache
from lanner.gpus.profile import ModelProfile, meta_model, model_profile

if TYPE_CHECKING:
    import torch

GIB = 1 << 30

# CPU bf16 autocast / fp32 saved bytes, measured with activation_bytes_per_image's hook on yolov5s, yolov5n,
# yolov8n, yolo11n, yolo11s: 0.52-0.54. Convolution, norm and activation inputs are saved in half precision;
# CUDA fp16 autocast keeps the same ops in half.
AMP_FACTOR = 0.53
# Reserved / saved bytes: backward's transient gradients (+9 %, measured on CPU with a live-tensor counter) times
# the caching allocator's rounding and splitting. Fitted (least squares, GiB) to the C1 AutoBatch profile (YOLOv5s
# 640 on A100, b1-b16); the C7 profile (YOLOv5n 416 on RTX 3070) is held out.
K_ACT = 1.26
BACKWARD_TRANSIENT = 1.09  # the measured part of K_ACT; the rest (1.16) is the allocator's
# Training-only fixed memory (cuDNN/cuBLAS workspaces, the batch and its labels on the GPU, the optimizer step).
# Fitted to C3 epoch 0 (YOLOv5s b16 640 on T4: 3.91 G = 3.64 GiB).
WORKSPACE_GB = 0.50
# Growth of the cache after the first epoch (validation at 2x batch, label counts that vary per batch): C3's
# 3.91 -> 4.76 G is 0.26 x the batch-dependent memory (fitted); C4's 4.31 -> 5.31 G is 0.28 (held out). Capped:
# the current trainer empties the cache around validation once it holds > 50 % of the GPU, and C7 (b146, ~6 G)
# showed no such growth. Given the card's size (``vram_gb``), the growth is also bounded by what the card has free:
# these are cached, unused blocks, and the caching allocator releases them and retries before it reports an out-
# of-memory, so reserved memory never outgrows the card. The advisor leaves the bound off for ``fits`` and
# ``maxBatch`` (the unbounded figure keeps a margin); benchmarks/estimator_published.py applies it to C7.
FRAGMENTATION = 0.26
FRAGMENTATION_CAP_GB = 1.0  # the largest jump published: C4, +1.0 G
# Planning (``fits``, ``max_batch``): a false "fits" costs a failed paid run, a false "does not fit" a little speed,
# so the decision uses a pessimistic figure. The batch-dependent memory (activations, loss) is taken 25 % higher:
# the detection AutoBatch profiles of tests/gpus/validation_cases.json (YOLOv8n/s, b8/b16) are predicted 1-15 %
# low (read in their 1e9-byte GB, tests/gpus/validation.py), and 25 % is the validation's own tolerance. The
# cache's growth after epoch 0 keeps its measured 0.26 ratio without the 1 GiB cap: the published OOMs at large
# batch (ultralytics #467, #1451, #4679) came after epoch 0, when the cache had grown well past 1 GiB. The OOM
# reports themselves are the test, not the fit.
PLANNING_MARGIN = 1.25
# A datasheet's "16 GB" is not what torch can use: torch reports 14.75 GiB for a T4 (16 GB), 44.99 for an A40
# (48 GB), 23.99 for an RTX 4090 (24 GB) and 79.2 for an A100 80GB (validation_cases.json). Planning takes the
# lowest of those ratios, so a card is never credited with memory torch does not see.
USABLE_FRACTION = 0.92
# Outside the caching allocator: CUDA context and kernel images. C7: nvtop 7.40 GiB vs GPU_mem 5.95 G (5.54 GiB)
# = 1.86 GiB with a desktop on that GPU and eager kernel loading (torch 1.x); torch 2.x loads kernels lazily.
CUDA_CONTEXT_GB = 0.75
# The detection loss at its peak, per anchor of the dense head: the task-aligned assigner's (image, object, anchor)
# tensors and the classification BCE's (image, anchor, class) tensors. Measured on CPU (fp32, live-tensor counter,
# yolov8n 640): 14 and 20 bytes; the class path is rounded up to ultralytics' AMP envelope (profile_ops: ~6 fp32
# copies, autocast upcasts both BCE inputs), the assigner's to 16.
LOSS_BYTES_PER_OBJECT = 16
LOSS_BYTES_PER_CLASS = 24
DEFAULT_MAX_OBJECTS = 100  # labels in the most crowded mosaic of a batch (COCO-like); the trainer pads to it
OPTIMIZER_STATES = {"sgd": 1, "musgd": 2, "adam": 2, "adamw": 2, "adamax": 2, "nadam": 2, "radam": 2, "rmsprop": 2}
AUTO_ITERATIONS = 10_000  # trainer.build_optimizer: AdamW up to this many iterations, MuSGD beyond
AUTOBATCH_DEFAULT = 16    # DEFAULT_CFG.batch: the trainer's fallback
MAX_BATCH_LIMIT = 1 << 16  # max_batch stops looking here (host RAM for CPU training can be huge)


@dataclass(frozen=True)
class MemoryEstimate:
    peak_gb: float               # what the trainer's GPU_mem (torch.cuda.memory_reserved) would show
    device_gb: float             # + CUDA context, as nvidia-smi would show
    breakdown: dict[str, float]  # params, grads, optimizer, ema, activations, loss, workspace, fragmentation (GiB)


def activation_bytes_per_image(model: str | Path | ModelProfile, imgsz: int, *, nc: int | None = None) -> int:
    """fp32 bytes autograd saves for backward per training image at imgsz (the trainer's stride-rounded size)."""
    profile = _profile(model, nc)
    return _activation_bytes(profile, trainer_imgsz(profile, imgsz))


def trainer_imgsz(profile: ModelProfile, imgsz: int) -> int:
    """The trainer rounds imgsz up to a multiple of the largest stride (at least 32)."""
    stride = max((*profile.strides, 32))
    return max(stride, math.ceil(imgsz / stride) * stride)


def training_memory(profile_or_model: ModelProfile | str | Path, *, imgsz: int, batch: int, optimizer: str = "auto",
                    amp: bool = True, nc: int | None = None, iterations: int | None = None,
                    max_objects: int = DEFAULT_MAX_OBJECTS, vram_gb: float | None = None,
                    planning: bool = False) -> MemoryEstimate:
    """Memory of one training run at a fixed batch (see the module docstring for the formula).

    ``iterations`` resolves ``optimizer="auto"`` as the trainer does: ceil(images / max(batch, 64)) * epochs.
    ``max_objects``: labels on the most crowded (mosaic) training image. ``vram_gb``: the card, when the cache's
    growth should be bounded by what it has free (see FRAGMENTATION). ``planning``: the pessimistic figure that
    decides whether a batch fits (see PLANNING_MARGIN).
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, not {batch}")
    profile = _profile(profile_or_model, nc)
    size = trainer_imgsz(profile, imgsz)
    states = OPTIMIZER_STATES[resolve_optimizer(optimizer, iterations).lower()]
    return estimate_memory(profile.params, _activation_bytes(profile, size), loss_bytes_per_image(
        profile, size, max_objects), batch=batch, optimizer_states=states, amp=amp, vram_gb=vram_gb,
        planning=planning)


def estimate_memory(params: int, activation_bytes: float, loss_bytes: float, *, batch: int, optimizer_states: int,
                    amp: bool, vram_gb: float | None = None, planning: bool = False) -> MemoryEstimate:
    """The formula on explicit inputs (also used to replay the published calibration points)."""
    weights = 4 * params
    margin = PLANNING_MARGIN if planning else 1.0
    act = K_ACT * activation_bytes * (AMP_FACTOR if amp else 1.0) * batch * margin
    loss = loss_bytes * batch * margin
    parts = {
        "params": (weights + (2 * params if amp else 0)) / GIB,
        "grads": weights / GIB,
        "optimizer": optimizer_states * weights / GIB,
        "ema": weights / GIB,
        "activations": act / GIB,
        "loss": loss / GIB,
        "workspace": WORKSPACE_GB,
        "fragmentation": FRAGMENTATION * (act + loss) / GIB if planning else min(FRAGMENTATION * (act + loss) / GIB,
                                                                                 FRAGMENTATION_CAP_GB),
    }
    if vram_gb is not None:  # cached blocks are released before the card runs out
        need = sum(v for k, v in parts.items() if k != "fragmentation")
        parts["fragmentation"] = max(0.0, min(parts["fragmentation"], vram_gb - CUDA_CONTEXT_GB - need))
    peak = sum(parts.values())
    return MemoryEstimate(peak_gb=peak, device_gb=peak + CUDA_CONTEXT_GB, breakdown=parts)


def usable_gb(vram_gb: float) -> float:
    """What torch can allocate on a card sold as ``vram_gb`` GB, for planning (see USABLE_FRACTION)."""
    return vram_gb * USABLE_FRACTION


def max_batch(vram_gb: float, profile_or_model: ModelProfile | str | Path, *, imgsz: int, optimizer: str = "auto",
              amp: bool = True, nc: int | None = None, iterations: int | None = None,
              max_objects: int = DEFAULT_MAX_OBJECTS) -> int:
    """Largest batch whose planning memory (peak + CUDA context, see PLANNING_MARGIN) fits in vram_gb; 0 when not
    even batch 1 fits."""
    profile = _profile(profile_or_model, nc)

    def fits(b: int) -> bool:
        return training_memory(profile, imgsz=imgsz, batch=b, optimizer=optimizer, amp=amp, iterations=iterations,
                               max_objects=max_objects, planning=True).device_gb <= vram_gb

    if not fits(1):
        return 0
    low, high = 1, 2
    while fits(high):  # memory is increasing in batch: bracket, then bisect
        if high >= MAX_BATCH_LIMIT:
            return MAX_BATCH_LIMIT
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def autobatch_batch(vram_gb: float, profile_or_model: ModelProfile | str | Path, *, imgsz: int, amp: bool = True,
                    nc: int | None = None, fraction: float = 0.60, max_objects: int = DEFAULT_MAX_OBJECTS,
                    dataset_size: int = 0) -> int:
    """The batch the trainer's AutoBatch (batch=-1) would pick on this GPU, replaying ``utils/autobatch.py``.

    AutoBatch measures one forward+backward of a copy of the model at a few batch sizes, fits a straight line
    and solves it for ``fraction`` of the free memory. We replay it with the probe's memory predicted by the same
    model (two model copies + grads + activations + ultralytics' loss envelope; no optimizer, EMA or
    fragmentation). ``max_objects`` is the trainer's max_num_obj (4 x the most labels on one image).
    """
    profile = _profile(profile_or_model, nc)
    size = trainer_imgsz(profile, imgsz)
    act = K_ACT * _activation_bytes(profile, size) * (AMP_FACTOR if amp else 1.0)
    fixed = (12 + (2 if amp else 0)) * profile.params  # trainer's model + probe copy + its grads (+ fp16 cache)
    envelope = 0
    if profile.strides and profile.family != "rtdetr" and max_objects:  # profile_ops' detect-loss envelope
        envelope = profile.anchors(size) * 6 * (max_objects + 2 * profile.nc) * 4

    total = vram_gb
    free = vram_gb - CUDA_CONTEXT_GB  # reserved + free as mem_get_info reports them
    sizes = [1, 2, 4, 8, 16] if total < 16 else [1, 2, 4, 8, 16, 32, 64]
    if dataset_size > 0:
        sizes = [b for b in sizes if b <= dataset_size]
    results = []
    for b in sizes:
        mem = (fixed + (act + envelope) * b) / GIB
        results.append(mem if mem <= free else None)  # past the free memory the probe runs out of memory
    points = [(b, m) for b, m in zip(sizes, results, strict=True) if m is not None and 0 < m < total]
    if not points:
        return AUTOBATCH_DEFAULT  # nothing fits: the trainer's default batch (AutoBatch itself errors out)
    fit_x, fit_y = zip(*points, strict=True)
    if len(points) == 1:
        return fit_x[0]
    import numpy as np  # start-up cost: only AutoBatch (batch -1) fits its line, as ultralytics' autobatch does

    slope, intercept = np.polyfit(fit_x, fit_y, deg=1)
    b = int((free * fraction - intercept) / slope)
    oom = next((i for i, m in enumerate(results) if m is None and sizes[i] > fit_x[0]), None)
    if oom is not None and b >= sizes[oom]:
        b = sizes[oom - 1]
    b = min(max(b, fit_x[0]), 1024)
    return min(b, dataset_size) if dataset_size > 0 else b


def resolve_optimizer(name: str, iterations: int | None = None) -> str:
    """The optimizer the trainer will build: ``auto`` is AdamW for short runs and MuSGD for long ones.

    Mirrors ``ultralytics/engine/trainer.py build_optimizer`` (8.4): AdamW when iterations <= 10,000, else MuSGD
    (older releases picked SGD). Unknown iterations count as a long run; both carry two state buffers.
    """
    key = str(name).strip().lower()
    if key == "auto":
        return "AdamW" if iterations is not None and iterations <= AUTO_ITERATIONS else "MuSGD"
    if key not in OPTIMIZER_STATES:
        raise ValueError(f"unknown optimizer '{name}': one of auto, {', '.join(sorted(OPTIMIZER_STATES))}")
    return {"sgd": "SGD", "musgd": "MuSGD", "adam": "Adam", "adamw": "AdamW", "adamax": "Adamax", "nadam": "NAdam",
            "radam": "RAdam", "rmsprop": "RMSprop"}[key]


def loss_bytes_per_image(profile: ModelProfile, imgsz: int, max_objects: int = DEFAULT_MAX_OBJECTS) -> float:
    """Loss and label-assignment memory per image: dense heads only (classify and RT-DETR are negligible)."""
    if not profile.strides or profile.family == "rtdetr":
        return 0.0
    return float(profile.anchors(imgsz) * (LOSS_BYTES_PER_OBJECT * max_objects + LOSS_BYTES_PER_CLASS * profile.nc))


def _profile(model: ModelProfile | str | Path, nc: int | None) -> ModelProfile:
    if isinstance(model, ModelProfile):
        if nc is None or nc == model.nc:
            return model
        model = model.key[0]
    return model_profile(model, nc=nc)


@functools.lru_cache(maxsize=1024)
def _activation_bytes(profile: ModelProfile, imgsz: int) -> int:
    """One training-mode forward of batch 2, summing the storages autograd saves (parameters excluded); from the
    disk cache (``profile_cache``) when measured before."""
    stored = profile_cache.activation_bytes(profile.key, imgsz)
    if stored is not None:
        return int(stored)
    module = meta_model(profile)
    try:
        value = saved_bytes(module, imgsz, "meta") // 2
    except Exception:  # an op without a meta kernel: run it for real on CPU, with uninitialised weights
        cpu = copy.deepcopy(module).to_empty(device="cpu")
        value = saved_bytes(cpu, imgsz, "cpu") // 2
    profile_cache.store_activation_bytes(profile.key, imgsz, value)
    return value


def saved_bytes(module: torch.nn.Module, imgsz: int, device: str = "meta", *, batch: int = 2,
                within: torch.nn.Module | None = None) -> int:
    """Sum of the distinct storages autograd packs for backward in one forward of ``batch`` images (parameters
    excluded). On ``meta`` nothing is computed, only shapes propagate. With ``within``, only the storages first
    packed while that submodule runs (a head, a Proto module): how much of the total that part saves."""
    import torch  # start-up cost: torch loads on the first measurement not found in the disk cache

    def storage_id(t: torch.Tensor) -> int:
        storage = t.untyped_storage()
        return storage._cdata if t.device.type == "meta" else storage.data_ptr()

    params = {storage_id(p) for p in module.parameters()}
    seen: dict[int, int] = {}
    inside = [within is None]

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = storage_id(t)
        if key not in params and key not in seen:
            seen[key] = t.untyped_storage().nbytes() if inside[0] else 0
        return t

    hooks = [] if within is None else [within.register_forward_pre_hook(lambda *_: inside.__setitem__(0, True)),
                                       within.register_forward_hook(lambda *_: inside.__setitem__(0, False))]
    if device == "meta":
        x = torch.empty(batch, 3, imgsz, imgsz, device="meta")
    else:
        x = torch.randn(batch, 3, imgsz, imgsz, generator=torch.Generator().manual_seed(0))
    try:
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = module(x)
        del out
    finally:
        for hook in hooks:
            hook.remove()
    return sum(seen.values())
