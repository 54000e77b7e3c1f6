"""Starting values for every GPU type, before any run on it has been measured.

Sources (IDs from shared/reference/measured-training.md; each number below names its ID):
- Relative speed across GPUs: Lambda's SSD300 AMP training throughput relative to an A100 80GB SXM [B1]. SSD300
  is a ResNet-50 detector trained with PyTorch AMP, the closest published cross-GPU workload to YOLO. GPUs that
  B1 does not list get a power law in dense FP16 tensor TFLOPS, memory bandwidth and board power (TDP), fitted on
  the B1 rows: newer GPUs gain far less than their peak FLOPs, and a card's power limit caps the clocks it can
  hold under sustained tensor load (a 70 W T4 or L4 cannot run at its datasheet boost clock for long). With TDP in
  the law, B1 rows that are not in the fit are predicted better: LambdaCloud A10 (150 W, the lowest power in B1)
  +32 % -> +7 %, A100 40GB PCIe +8 % -> -7 %, V100 16GB +20 % -> +17 % (benchmarks/estimator_published.py).
- Per-image GPU time follows the bytes autograd saves for backward, not the FLOPs: A1's YOLOv5n/s/m/l/x batches
  (128/64/40/24/16, chosen to fill a 16 GB V100) all take 0.31-0.39 s per step while their FLOPs per step differ
  5.7x; per GB of saved (fp16) activations they take 0.027-0.032 s [A1, derived]. YOLO's convolutions are narrow
  and each is followed by BatchNorm and SiLU, so a step is bound by streaming those tensors through memory. The
  rate is fitted to one point, YOLOv5l at batch 16 on an A100 SXM4 40GB = 95 img/s [A2], and scaled across GPUs by
  the relative speed above; the datasheet FP16 peak stays as a compute roof.
- Loader on a small host (the local CPU device before its probe): YOLOv8n on a 2-vCPU Colab host reaches 19 img/s
  with a T4 that is far from busy, i.e. ~0.105 CPU seconds per 640 training image with mosaic [A8, derived].
- Loader on a rented GPU host: 0.027 vCPU-seconds per 640 training image, the slowest loader A1 allows. A1 states
  whole days ("1 day" for YOLOv5n on a V100: 288 s per COCO epoch, or up to 432 s at the rounding limit), and its
  V100 host ran 8 loader workers: 8 workers / 0.027 s = 296 img/s, 400 s of loading per epoch, inside that limit
  [A1, derived]. The trainer's own process keeps one vCPU busy (``estimator.MAIN_PROCESS_VCPUS``), so a host with
  8 vCPUs (the catalogue's rule for the A100 class, ``catalogue.host_rule``) feeds 7 / 0.027 = 259 img/s: a COCO
  epoch of yolo11n at batch 16 on an A100 (GPU time ~425 s) is then loader-bound (~456 s), as public reports of
  COCO on one A100 show. The earlier prior (8 / 411 s, A1 read as exactly one day) made every A100 run GPU-bound.
- Segmentation: YOLOv5n-seg needs 963 s per COCO epoch on an A100 [A3], 2.2x what its activations predict, while
  n -> s -> m add little. The mask loss runs image by image on the host (a Python loop over the batch with a
  device sync per image, in YOLOv5's loss and in ultralytics' v8SegmentationLoss alike), in series with the GPU:
  a per-image host cost, 4.2 ms, fitted to A3 n-seg. The loader's own extra work for masks is small: +15 % per image
  (benchmarks/loader_factors.py, ultralytics' own pipeline), far too little to explain A3.
Held out for validation (never fitted): A1 s/m/l/x, A3 s/m, A7, A8, B1's V100/A10/A100-40GB-PCIe rows and the
C-series memory figures (see benchmarks/estimator_published.py).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.estimator import DeviceSpeed, FixedCosts, LoaderSpeed

# [B1] SSD300 AMP img/s relative to "A100 80GB SXM4" (Lambda 2023 set; H100 SXM rows averaged).
B1_RELATIVE = {
    "rtx-3090": 236 / 458, "rtx-a6000": 260 / 458, "rtx-6000-ada": 341 / 458, "rtx-4090": 379 / 458,
    "a100-80gb-pcie": 437 / 458, "a100-80gb-sxm": 1.0, "h100-pcie": 566 / 458,
    "h100-sxm": (782 + 865 + 862) / 3 / 458,
}
REFERENCE_GPU = "a100-80gb-sxm"
# [A2] YOLOv5l (109.1 GFLOPs at 640) trains 95 img/s at batch 16 on an A100 SXM4 (40 GB; same GA100 compute).
A2_IMAGES_PER_S, A2_GFLOPS, A2_BATCH = 95.0, 109.1, 16
# A2's GPU, A100-SXM4-40GB (NVIDIA A100 datasheet): 312 dense FP16 tensor TFLOPS, 1,555 GB/s, 400 W.
A2_GPU_SPECS = (312.0, 1555.0, 400.0)
# [A2] YOLOv5l at 640: fp32 bytes autograd saves per image, measured on the architecture (memory.py's meta pass on
# yolov5l.yaml, less the anchor-free head YOLOv5 did not have; tests/gpus/test_priors.py re-measures it).
A2_ACTIVATION_BYTES_FP32 = 915_286_528
AMP_FACTOR = 0.53             # fp16 / fp32 saved bytes under autocast (memory.AMP_FACTOR, measured there)
GPU_STEP_OVERHEAD_S = 0.030   # eager PyTorch: ~300 layers forward+backward+optimizer launches per step
CPU_STEP_OVERHEAD_S = 0.050
# [A3, fitted] YOLOv5n-seg, batch 16, 963 s per COCO epoch (train + val) on an A100: what the activation model
# leaves unexplained, per image, with the mask loss's loop counted once per training and once per val image.
SEGMENT_IMAGE_S = 0.0042
# [A8, derived] 2 vCPUs / 19 img/s; validation has no mosaic and no augmentation: about a fifth of the work.
# Note: 0.105 s is ~14x what ultralytics' pipeline costs on one core of the development machine (7.6 ms,
# benchmarks/loader_factors.py), and A7 on the same kind of host runs 3.4x faster, so A8's time is mostly not
# loader work. Left as it is: it only seeds the CPU device, whose estimates its own probe calibrates.
LOADER_640 = LoaderSpeed(train_cpu_s_640=2 / 19, val_cpu_s_640=2 / 19 / 5, source="A8")
# [A1, derived] YOLOv5n: 118,287 images in one day / 300 epochs on one V100, fed by the default 8 loader workers.
# cache=ram keeps images decoded and resized; today's mosaic takes its three partner images from a buffer of
# decoded images, so a cache saves one JPEG decode per image: 0.80 of the uncached cost, measured on COCO-like
# 640x480 JPEGs with ultralytics' own train dataset (benchmarks/loader_factors.py). The CPU device's LOADER_640
# keeps the older 0.45 until the CPU path is re-measured (estimator_accuracy.py).
CLOUD_LOADER_S_640 = 0.027   # [A1, at its rounding limit] vCPU-seconds per training image at 640 on a GPU host
CLOUD_LOADER_640 = LoaderSpeed(train_cpu_s_640=CLOUD_LOADER_S_640, val_cpu_s_640=CLOUD_LOADER_S_640 / 5,
                               cached_factor=0.80, source="A1")
CLOUD_FIXED = FixedCosts(provision_s=120.0, per_image_download_s=0.01, model_build_s=10.0, checkpoint_upload_s=5.0)
LOCAL_FIXED = FixedCosts(provision_s=3.0, per_image_download_s=0.002, model_build_s=3.0, checkpoint_upload_s=0.5)
CPU_PRIOR_TFLOPS = 0.05       # replaced by `lanner gpus probe` on the machine itself

Specs = dict[str, tuple[float, ...]]  # gpu id -> (dense FP16 tensor TFLOPS, bandwidth GB/s[, TDP W])


def _fit_power_law(specs: Specs, columns: int = 3) -> tuple[float, ...]:
    """log(rel) = a + b log(fp16 / ref) + c log(bw / ref) [+ d log(tdp / ref)], least squares over the B1 rows."""
    return _fitted_power_law(tuple(specs.items()), columns)


@functools.lru_cache(maxsize=16)
def _fitted_power_law(spec_items: tuple[tuple[str, tuple[float, ...]], ...], columns: int) -> tuple[float, ...]:
    """``_fit_power_law``, remembered: every GPU type's prior asks it for every type not in B1, the same fit."""
    specs = dict(spec_items)
    ref = specs[REFERENCE_GPU][:columns]
    rows, target = [], []
    for gpu, rel in B1_RELATIVE.items():
        if gpu in specs and len(specs[gpu]) >= columns:
            rows.append([1.0, *(math.log(v / r) for v, r in zip(specs[gpu][:columns], ref, strict=True))])
            target.append(math.log(rel))
    return tuple(_least_squares(rows, target))


def _least_squares(rows: list[list[float]], target: list[float]) -> list[float]:
    """The coefficients that minimise the squared residuals of ``rows @ coef = target`` (``numpy.linalg.lstsq``'s
    answer, to rounding: tests/gpus/test_priors.py compares them), by the normal equations, solved by Gauss-Jordan
    elimination with partial pivoting. In pure Python because every estimate fits the law once per process, and
    importing NumPy for a system of eight rows and at most four unknowns (condition number ~6) cost a warm
    ``lanner estimate`` 0.14 s of CPU, a tenth of it (issue 27)."""
    n = len(rows[0])
    # [A'A | A'b]: one equation per unknown
    system = [[sum(r[i] * r[j] for r in rows) for j in range(n)]
              + [sum(r[i] * t for r, t in zip(rows, target, strict=True))] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda k: abs(system[k][col]))
        if not system[pivot][col]:
            raise ValueError("the B1 rows do not determine the power law (fewer independent rows than unknowns)")
        system[col], system[pivot] = system[pivot], system[col]
        for k in range(n):
            if k != col:
                factor = system[k][col] / system[col][col]
                system[k] = [a - factor * b for a, b in zip(system[k], system[col], strict=True)]
    return [system[i][n] / system[i][i] for i in range(n)]


def power_law_speed(specs: Specs, spec: tuple[float, ...]) -> float:
    """Relative speed the B1 power law gives a GPU of these specifications (TDP used when both sides have it)."""
    columns = 3 if len(spec) >= 3 and spec[2] and len(specs[REFERENCE_GPU]) >= 3 else 2
    coef = _fit_power_law(specs, columns)
    ref = specs[REFERENCE_GPU][:columns]
    return math.exp(coef[0] + sum(c * math.log(v / r) for c, v, r in zip(coef[1:], spec[:columns], ref,
                                                                          strict=True)))


def relative_speeds(specs: Specs) -> dict[str, float]:
    """Training speed of each GPU relative to the A100 80GB SXM: measured where B1 has it, else the power law."""
    return {gpu: B1_RELATIVE.get(gpu) or power_law_speed(specs, spec) for gpu, spec in specs.items()}


def reference_tflops() -> float:
    """Effective training TFLOP/s of the reference GPU at large batch, from A2 with the per-step overhead removed.
    Used only when a workload's activations are unknown (the FLOP model)."""
    step = A2_BATCH / A2_IMAGES_PER_S
    compute = step - GPU_STEP_OVERHEAD_S
    return A2_BATCH * 3 * A2_GFLOPS * 1e9 / compute / 1e12


def catalogue_specs(gpus: Iterable[Any]) -> Specs:
    """(FP16 TFLOPS, bandwidth[, TDP]) of every catalogue row that has the first two."""
    return {g.id: (g.fp16_tflops, g.bandwidth_gbs, *((g.tdp_w,) if g.tdp_w else ())) for g in gpus
            if g.fp16_tflops and g.bandwidth_gbs}


@functools.cache
def _default_specs() -> tuple[tuple[str, tuple[float, ...]], ...]:
    return tuple(catalogue_specs(load_catalogue().all()).items())


def reference_activation_gbs(specs: Specs | None = None) -> float:
    """Saved-activation GB per second the reference GPU trains through: A2 on its own A100 40GB, scaled to the
    reference by the power law (A2's card has 1,555 GB/s against the reference's 2,039)."""
    a2_relative = power_law_speed(specs or dict(_default_specs()), A2_GPU_SPECS)
    compute = A2_BATCH / A2_IMAGES_PER_S - GPU_STEP_OVERHEAD_S
    return A2_BATCH * A2_ACTIVATION_BYTES_FP32 * AMP_FACTOR / compute / a2_relative / 1e9


def gpu_prior(relative: float, source: str, peak_tflops: float | None = None,
              specs: Specs | None = None) -> DeviceSpeed:
    """A GPU ``relative`` times as fast as the reference; ``specs`` (the catalogue's) place A2 on the same law."""
    return DeviceSpeed(train_tflops=reference_tflops() * relative, step_overhead_s=GPU_STEP_OVERHEAD_S,
                       overlaps_loader=True, source=source, activation_gbs=reference_activation_gbs(specs) * relative,
                       peak_tflops=peak_tflops, segment_image_s=SEGMENT_IMAGE_S)


def cpu_prior() -> DeviceSpeed:
    return DeviceSpeed(train_tflops=CPU_PRIOR_TFLOPS, step_overhead_s=CPU_STEP_OVERHEAD_S, val_speedup=1.3,
                       overlaps_loader=False, source="prior")
