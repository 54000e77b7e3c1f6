"""Starting values for every GPU type, before any run on it has been measured.

Sources (IDs from shared/reference/measured-training.md; each number below names its ID):
- Relative speed across GPUs: Lambda's SSD300 AMP training throughput relative to an A100 80GB SXM [B1]. SSD300
  is a ResNet-50 detector trained with PyTorch AMP, the closest published cross-GPU workload to YOLO. GPUs that
  B1 does not list get a power law in dense FP16 tensor TFLOPS and memory bandwidth, fitted on the B1 rows:
  newer GPUs gain far less than their peak FLOPs.
- Absolute scale: YOLOv5l, batch 16, 640, one COCO epoch on one A100 SXM4 = 20:39 train -> 95 img/s [A2].
- Loader on a small host (the local CPU device before its probe): YOLOv8n on a 2-vCPU Colab host reaches 19 img/s
  with a T4 that is far from busy, i.e. ~0.105 CPU seconds per 640 training image with mosaic [A8, derived].
- Loader on a rented GPU host: YOLOv5n trains COCO at 411 img/s on one V100 [A1, derived], a loader-bound rate;
  with the trainer's default 8 loader workers that is ~0.019 CPU seconds per image per worker.
Held out for validation (never fitted): A1 s/m/l/x, A3, A7, C-series (see benchmarks/estimator_published.py).
"""

from __future__ import annotations

import math

import numpy as np

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
GPU_STEP_OVERHEAD_S = 0.030   # eager PyTorch: ~300 layers forward+backward+optimizer launches per step
CPU_STEP_OVERHEAD_S = 0.050
# [A8, derived] 2 vCPUs / 19 img/s; validation has no mosaic and no augmentation: about a fifth of the work.
LOADER_640 = LoaderSpeed(train_cpu_s_640=2 / 19, val_cpu_s_640=2 / 19 / 5, source="A8")
# [A1, derived] YOLOv5n: 118,287 images in 288 s on one V100 = 411 img/s, fed by the default 8 loader workers.
CLOUD_LOADER_640 = LoaderSpeed(train_cpu_s_640=8 / 411, val_cpu_s_640=8 / 411 / 5, source="A1")
DATACENTER_HOST_CPUS = 16.0   # vCPUs that rental hosts typically attach per datacenter GPU
CONSUMER_HOST_CPUS = 8.0
CLOUD_FIXED = FixedCosts(provision_s=120.0, per_image_download_s=0.01, model_build_s=10.0, checkpoint_upload_s=5.0)
LOCAL_FIXED = FixedCosts(provision_s=3.0, per_image_download_s=0.002, model_build_s=3.0, checkpoint_upload_s=0.5)
CPU_PRIOR_TFLOPS = 0.05       # replaced by `lanner gpus probe` on the machine itself


def _fit_power_law(specs: dict[str, tuple[float, float]]) -> tuple[float, float, float]:
    """log(rel) = a + b log(fp16 / ref) + c log(bw / ref), least squares over the B1 rows."""
    ref_fp16, ref_bw = specs[REFERENCE_GPU]
    rows, target = [], []
    for gpu, rel in B1_RELATIVE.items():
        if gpu in specs:
            fp16, bw = specs[gpu]
            rows.append([1.0, math.log(fp16 / ref_fp16), math.log(bw / ref_bw)])
            target.append(math.log(rel))
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(target), rcond=None)
    return float(coef[0]), float(coef[1]), float(coef[2])


def relative_speeds(specs: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Training speed of each GPU relative to the A100 80GB SXM: measured where B1 has it, else the power law."""
    a, b, c = _fit_power_law(specs)
    ref_fp16, ref_bw = specs[REFERENCE_GPU]
    out = {}
    for gpu, (fp16, bw) in specs.items():
        out[gpu] = B1_RELATIVE.get(gpu) or math.exp(a + b * math.log(fp16 / ref_fp16) + c * math.log(bw / ref_bw))
    return out


def reference_tflops() -> float:
    """Effective training TFLOP/s of the reference GPU at large batch, from A2 with the per-step overhead removed."""
    step = A2_BATCH / A2_IMAGES_PER_S
    compute = step - GPU_STEP_OVERHEAD_S
    return A2_BATCH * 3 * A2_GFLOPS * 1e9 / compute / 1e12


def gpu_prior(relative: float, source: str) -> DeviceSpeed:
    return DeviceSpeed(train_tflops=reference_tflops() * relative, step_overhead_s=GPU_STEP_OVERHEAD_S,
                       overlaps_loader=True, source=source)


def cpu_prior() -> DeviceSpeed:
    return DeviceSpeed(train_tflops=CPU_PRIOR_TFLOPS, step_overhead_s=CPU_STEP_OVERHEAD_S, val_speedup=1.3,
                       overlaps_loader=False, source="prior")
