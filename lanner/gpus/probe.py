"""``lanner gpus probe``: measure real training on this machine's devices and keep it as a calibration point.

It runs the real trainer for three short epochs on a synthetic dataset and keeps the faster of the last two (the
first pays for start-up and caches), from the trainer's own callbacks. The faster one, because an epoch is short
and anything else on the machine only ever makes it longer: the minimum is the machine's own speed. The point then
calibrates the local executor's estimates: the model's per-step and per-FLOP costs are scaled so this measurement
is predicted exactly.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from lanner.gpus.models import CalibrationPoint


@dataclass(frozen=True)
class ProbeResult:
    device: str
    gpu_type: str
    model: str
    imgsz: int
    batch: int
    train_images: int
    val_images: int
    workers: int
    epoch_seconds: float
    startup_seconds: float


def local_devices() -> list[tuple[str, str]]:
    """(trainer device, catalogue gpu type) for each local device: CUDA GPUs through NVML names, else the CPU."""
    devices: list[tuple[str, str]] = []
    try:
        import torch  # start-up cost: torch loads only when devices are probed

        for index in range(torch.cuda.device_count()):
            gpu_type = gpu_type_for_name(torch.cuda.get_device_name(index))
            if gpu_type is not None:  # a GPU the catalogue does not list cannot be offered or calibrated
                devices.append((str(index), gpu_type))
    except Exception:
        pass
    return devices or [("cpu", "cpu")]


# (words that must all appear in the lowered device name, catalogue id), most specific first. NVML and CUDA
# names differ by vendor prefix ("Tesla T4", "NVIDIA A100-SXM4-40GB"), so matching is by distinctive words.
_NAME_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("h200", "nvl"), "h200-nvl"), (("h200",), "h200-sxm"),
    (("h100", "nvl"), "h100-nvl"), (("h100", "pcie"), "h100-pcie"), (("h100",), "h100-sxm"),
    (("b300",), "b300"), (("b200",), "b200"),
    (("a100", "80gb", "pcie"), "a100-80gb-pcie"), (("a100", "80gb"), "a100-80gb-sxm"),
    (("l40s",), "l40s"), (("l40",), "l40"), (("a40",), "a40"),
    (("rtx pro 6000",), "rtx-pro-6000"), (("rtx pro 5000",), "rtx-pro-5000"), (("rtx pro 4500",), "rtx-pro-4500"),
    (("rtx pro 4000",), "rtx-pro-4000"),
    (("6000 ada",), "rtx-6000-ada"), (("4000 ada",), "rtx-4000-ada"), (("2000 ada",), "rtx-2000-ada"),
    (("a6000",), "rtx-a6000"), (("a5000",), "rtx-a5000"), (("a4500",), "rtx-a4500"),
    (("5090",), "rtx-5090"), (("4090",), "rtx-4090"), (("3090",), "rtx-3090"),
    (("v100", "32gb"), "v100-sxm2-32gb"), (("t4",), "t4"), (("l4",), "l4"),
)


def gpu_type_for_name(name: str) -> str | None:
    """The catalogue id of a CUDA/NVML device name, or None for a GPU the catalogue does not list (an A10, an
    A100 40GB, a 16 GB V100...): its timings must not calibrate another type, and never the CPU."""
    lowered = " ".join(name.lower().replace("-", " ").replace("_", " ").split())
    words = set(lowered.split())
    for needles, gpu_type in _NAME_RULES:
        if all((needle in words) if " " not in needle else (needle in lowered) for needle in needles):
            return gpu_type
    return None


PROBE_EPOCHS = 3  # epoch 0 warms up; the faster of the others is kept
# Ten steps at the default batch: with four (the first probe's 64 images) an epoch's own jitter (worker start,
# validation set-up) was a large share of the one calibration point, and every CPU estimate inherited it.
PROBE_IMAGES = 160
# Two image sizes, each a calibration point (the fit makes their median ratio 1): a CPU's speed per FLOP at one
# size is not its speed at others (oneDNN's blocking fits some feature-map sizes better); on this machine imgsz
# 320 ran ~13 % slower per FLOP than 160-416 around it, and a probe there put every other estimate that far off.
PROBE_SIZES = (192, 384)


def run_probe(*, model: str = "yolo11n.yaml", imgsz: int = PROBE_SIZES[0], batch: int = 16, images: int = PROBE_IMAGES,
              device: str = "cpu", workers: int | None = None) -> ProbeResult:
    from ultralytics import YOLO  # start-up cost: seconds to import, only for a probe

    from lanner.synthetic import make_detection_dataset  # start-up cost: OpenCV, only for a probe

    workers = min(2, os.cpu_count() or 1) if workers is None else workers
    root = Path(tempfile.mkdtemp(prefix="lanner-probe-"))
    marks: dict[str, float] = {}
    try:
        data = make_detection_dataset(root / "data", train=images, val=max(4, images // 4), size=max(64, imgsz))
        yolo = YOLO(model)
        started = time.monotonic()

        def epoch_start(trainer: object) -> None:
            marks.setdefault(f"start{trainer.epoch}", time.monotonic())  # type: ignore[attr-defined]

        def epoch_end(trainer: object) -> None:
            marks.setdefault(f"end{trainer.epoch}", time.monotonic())  # type: ignore[attr-defined]

        yolo.add_callback("on_train_epoch_start", epoch_start)
        yolo.add_callback("on_fit_epoch_end", epoch_end)
        yolo.train(data=str(data), epochs=PROBE_EPOCHS, imgsz=imgsz, batch=batch, workers=workers, device=device,
                   plots=False, project=str(root / "runs"), name="probe", exist_ok=True, verbose=False,
                   amp=device != "cpu", val=True, save=False)
        epoch = min(marks[f"end{e}"] - marks[f"start{e}"] for e in range(1, PROBE_EPOCHS))
        startup = marks["start0"] - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    gpu_type = "cpu" if device == "cpu" else dict(local_devices()).get(device)
    if gpu_type is None:
        raise ValueError(f"device {device} is not a GPU type in the catalogue: nothing to calibrate")
    return ProbeResult(device=device, gpu_type=gpu_type, model=model, imgsz=imgsz, batch=batch,
                       train_images=images, val_images=max(4, images // 4), workers=workers,
                       epoch_seconds=epoch, startup_seconds=startup)


def record_probe(session: Session, result: ProbeResult) -> CalibrationPoint:
    from lanner.gpus.profile import model_profile  # start-up cost: imports torch

    profile = model_profile(result.model, nc=2)
    point = CalibrationPoint(gpu_type=result.gpu_type, source="probe", model_name=result.model,
                             family=profile.family, gflops=profile.gflops(result.imgsz), imgsz=result.imgsz,
                             batch=result.batch, train_images=result.train_images, val_images=result.val_images,
                             workers=result.workers, host_cpus=float(os.cpu_count() or 1), cache=False,
                             epoch_seconds=result.epoch_seconds, startup_seconds=result.startup_seconds,
                             peak_memory_gb=None)
    session.add(point)
    session.flush()
    return point
