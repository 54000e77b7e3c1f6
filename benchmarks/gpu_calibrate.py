"""Measure real training on this machine's GPU and write a calibration file the advisor loads as measured priors.

    .venv/bin/python benchmarks/gpu_calibrate.py [--out FILE] [--budget 420] [--device 0]
    .venv/bin/python benchmarks/gpu_calibrate.py --device cpu --quick      # a smoke run (tests use it)

On a synthetic dataset (``lanner.synthetic``), for yolo11n/s/m (YAMLs: nothing is downloaded) x imgsz 320/640 x
batch 16/32/64, it trains two short epochs and times the second (the first pays for start-up), recording epoch
time, step time and peak reserved memory (``torch.cuda.max_memory_reserved``); a configuration that runs out of
memory is recorded as ``oom`` and the larger batches of it are skipped. Then AutoBatch's choice for each model at
640. A time budget (default 7 minutes, so the whole script fits in 8 on any NVIDIA GPU) stops cleanly between
configurations: what was not run is recorded as ``skipped``. The file carries the GPU name, driver, torch version
and date; name it in ``LANNER_GPU_CATALOGUE`` (``"calibration": ["this.json"]``) and the advisor fits that GPU
type to it (``lanner/gpus/measured.py``), showing the provenance in each estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lanner.gpus.measured import FORMAT  # noqa: E402
from lanner.synthetic import make_detection_dataset  # noqa: E402

MODELS = ("yolo11n.yaml", "yolo11s.yaml", "yolo11m.yaml")
IMGSZ = (320, 640)
BATCHES = (16, 32, 64)
TRAIN_IMAGES = 256   # per epoch: 4-16 steps, enough for a steady step time in a budget of minutes
QUICK = {"models": ("yolo11n.yaml",), "imgsz": (64,), "batches": (4,), "train_images": 16}


def device_facts(device: str) -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "hostCpus": os.cpu_count()}
    if device == "cpu":
        return {**facts, "name": "CPU", "gpuType": "cpu", "driver": "none", "memoryGb": None}
    from lanner.gpus.probe import gpu_type_for_name

    index = int(device)
    name = torch.cuda.get_device_name(index)
    driver = "unknown"
    try:
        import pynvml  # ships with ultralytics' GPU extras on most images; the name and torch are enough without

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
    except Exception:
        pass
    total = torch.cuda.get_device_properties(index).total_memory / 1e9
    return {**facts, "name": name, "gpuType": gpu_type_for_name(name), "driver": driver, "memoryGb": round(total, 2)}


def train_once(model: str, data: Path, imgsz: int, batch: int, device: str, workers: int, root: Path
               ) -> dict[str, Any]:
    """Two epochs; the second one timed by the trainer's own callbacks, its steps counted."""
    import torch
    from ultralytics import YOLO

    marks: dict[str, float] = {}
    steps = {"n": 0}
    yolo = YOLO(model)
    yolo.add_callback("on_train_epoch_start", lambda t: marks.setdefault(f"start{t.epoch}", time.monotonic()))
    yolo.add_callback("on_train_batch_end", lambda t: steps.__setitem__("n", steps["n"] + (t.epoch == 1)))
    yolo.add_callback("on_train_epoch_end", lambda t: marks.setdefault(f"train{t.epoch}", time.monotonic()))
    yolo.add_callback("on_fit_epoch_end", lambda t: marks.setdefault(f"end{t.epoch}", time.monotonic()))
    if device != "cpu":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(int(device))
    yolo.train(data=str(data), epochs=2, imgsz=imgsz, batch=batch, workers=workers, device=device, plots=False,
               project=str(root / "runs"), name="calibrate", exist_ok=True, verbose=False, amp=device != "cpu",
               val=True, save=False)
    train = marks["train1"] - marks["start1"]
    peak = torch.cuda.max_memory_reserved(int(device)) / 1e9 if device != "cpu" else None
    return {"epochSeconds": round(marks["end1"] - marks["start1"], 4),
            "stepSeconds": round(train / max(1, steps["n"]), 5),
            "peakMemoryGb": round(peak, 3) if peak is not None else None}


def autobatch(model: str, imgsz: int, device: str) -> int | None:
    """AutoBatch's own choice (ultralytics' ``check_train_batch_size`` at its default 60 % fraction)."""
    if device == "cpu":
        return None
    import torch
    from ultralytics import YOLO
    from ultralytics.utils.autobatch import check_train_batch_size

    net = YOLO(model).model.to(f"cuda:{device}")
    try:
        return int(check_train_batch_size(net, imgsz=imgsz, amp=True))
    finally:
        del net
        torch.cuda.empty_cache()


def calibrate(*, device: str, quick: bool, budget_s: float, out: Path) -> dict[str, Any]:
    from lanner.gpus.profile import model_profile

    started = time.monotonic()
    facts = device_facts(device)
    plan = QUICK if quick else {"models": MODELS, "imgsz": IMGSZ, "batches": BATCHES, "train_images": TRAIN_IMAGES}
    workers = min(8, os.cpu_count() or 1)
    root = Path(tempfile.mkdtemp(prefix="lanner-calibrate-"))
    points: list[dict[str, Any]] = []
    try:
        images = plan["train_images"]
        val = max(4, images // 8)
        datasets = {size: make_detection_dataset(root / f"data{size}", train=images, val=val, size=max(64, size))
                    for size in plan["imgsz"]}
        for model in plan["models"]:
            profile = model_profile(model, nc=2)
            for imgsz in plan["imgsz"]:
                too_big = False
                for batch in plan["batches"]:
                    point = {"model": model, "family": profile.family, "gflops": round(profile.gflops(imgsz), 4),
                             "imgsz": imgsz, "batch": batch, "trainImages": images, "valImages": val,
                             "workers": workers, "hostCpus": os.cpu_count() or 1}
                    if too_big:
                        points.append({**point, "status": "skipped", "why": "a smaller batch ran out of memory"})
                        continue
                    if time.monotonic() - started > budget_s:
                        points.append({**point, "status": "skipped", "why": "time budget spent"})
                        continue
                    try:
                        points.append({**point, **train_once(model, datasets[imgsz], imgsz, batch, device, workers,
                                                             root), "status": "ok"})
                    except Exception as exc:  # CUDA out of memory: record it, skip larger batches
                        if "out of memory" not in str(exc).lower():
                            raise
                        too_big = True
                        points.append({**point, "status": "oom"})
                    print(json.dumps(points[-1]), flush=True)
        chosen = {}
        for model in plan["models"]:
            if time.monotonic() - started > budget_s:
                break
            chosen[model] = autobatch(model, 640, device)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    document = {"format": FORMAT, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "gpu": {key: facts[key] for key in ("name", "gpuType", "driver", "torch", "cuda", "memoryGb")},
                "host": {"cpus": facts["hostCpus"]}, "budgetSeconds": budget_s,
                "elapsedSeconds": round(time.monotonic() - started, 1), "points": points,
                "autobatch": {"imgsz": 640, "fraction": 0.60, "batch": chosen}}
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return document


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="0", help="CUDA device index, or cpu")
    parser.add_argument("--quick", action="store_true", help="one tiny configuration (a smoke run)")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds of measurements before stopping")
    parser.add_argument("--out", type=Path, default=Path("gpu-calibration.json"))
    args = parser.parse_args()
    document = calibrate(device=args.device, quick=args.quick, budget_s=args.budget, out=args.out)
    if document["gpu"]["gpuType"] is None:
        print(f"note: {document['gpu']['name']} is not a catalogue type; the advisor will refuse this file",
              file=sys.stderr)
    ran = sum(p["status"] == "ok" for p in document["points"])
    print(f"{args.out}: {ran} of {len(document['points'])} configurations measured in "
          f"{document['elapsedSeconds']} s on {document['gpu']['name']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
