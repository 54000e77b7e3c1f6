"""Estimator accuracy on this machine (issue 5): one probe, then predict and measure real CPU training runs.

    .venv/bin/python benchmarks/estimator_accuracy.py [--quick]

1. ``lanner gpus probe`` with its defaults: short real trainings on synthetic data (yolo11n, imgsz 192 and 384,
   batch 16, 160 images) become the only calibration points of the ``cpu`` device.
2. For each configuration below (model n/s, imgsz 160-416, batch 4-32, 32-512 images) the estimator predicts
   the epoch time *before* the run; then the real trainer runs three epochs, timed as the probe is (the faster
   of the last two).
3. Writes the predicted-versus-measured table and the median / worst absolute error to docs/benchmarks.md.
Targets: median absolute error <= 10 %, worst <= 25 %.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from common import ROOT, cpu_model, write_section
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from lanner.gpus import advisor
from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.models import CalibrationPoint
from lanner.gpus.probe import PROBE_IMAGES, PROBE_SIZES, record_probe, run_probe
from lanner.training.estimates import advise

PROBES = [("yolo11n.yaml", size, 16, PROBE_IMAGES) for size in PROBE_SIZES]  # lanner gpus probe's defaults
CONFIGS = [  # model, imgsz, batch, train images
    ("yolo11n.yaml", 160, 8, 64), ("yolo11n.yaml", 160, 32, 256), ("yolo11n.yaml", 224, 16, 128),
    ("yolo11n.yaml", 256, 4, 64), ("yolo11n.yaml", 320, 32, 512), ("yolo11n.yaml", 416, 8, 128),
    ("yolo11n.yaml", 416, 16, 32), ("yolo11s.yaml", 160, 16, 128), ("yolo11s.yaml", 224, 8, 64),
    ("yolo11s.yaml", 320, 16, 64), ("yolo11s.yaml", 256, 32, 128), ("yolo11n.yaml", 288, 24, 192),
]
SECTION = "## Estimator accuracy on CPU (issue 5)"


def predict(session: Session, model: str, imgsz: int, batch: int, images: int, workers: int) -> float:
    """The production estimate (``advisor.estimate``, as ``POST /api/training/estimate`` answers it) of one
    epoch on the ``cpu`` type, calibrated by the probe stored in ``session``."""
    request = advisor.Request(model=model, train_images=images, val_images=max(4, images // 4),
                              train_args={"epochs": 2, "imgsz": imgsz, "batch": batch, "workers": workers},
                              gpu_types=["cpu"], tier="enterprise", nc=2)
    [estimate] = advise(session, load_catalogue(), request)["estimates"]
    return float(estimate["epochSeconds"]["value"])


def write_doc(rows: list[tuple], probes: list[float], median: float, worst: float, command: str) -> None:
    cpu = cpu_model()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [SECTION, "", f"- Machine: {os.cpu_count()} CPUs ({cpu}); date {date}; commit {commit}",
             f"- Command: `{command}`",
             "- Probes (the only calibration points): " + "; ".join(
                 f"{m}, imgsz {s}, batch {b}, {n} images: {t:.2f} s/epoch" for (m, s, b, n), t in zip(
                     PROBES, probes, strict=True)), "",
             "| model | imgsz | batch | images | predicted s/epoch | measured s/epoch | error |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {m} | {s} | {b} | {n} | {p:.2f} | {t:.2f} | {e:+.1%} |" for m, s, b, n, p, t, e in rows]
    lines += ["", f"Median absolute error **{median:.1%}** (target <= 10 %), worst **{worst:.1%}** "
              "(target <= 25 %).", ""]
    write_section(SECTION, "\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three configurations only (a smoke run)")
    args = parser.parse_args()
    workers = min(2, os.cpu_count() or 1)
    engine = create_engine("sqlite://")  # a throwaway database: the probes are its only calibration points
    CalibrationPoint.metadata.create_all(engine, tables=[CalibrationPoint.__table__])
    session = Session(engine)
    probes = []
    for model, imgsz, batch, images in PROBES:
        probe = run_probe(model=model, imgsz=imgsz, batch=batch, images=images, workers=workers)
        record_probe(session, probe)
        probes.append(probe.epoch_seconds)
        print(f"probe {imgsz}: {probe.epoch_seconds:.2f} s/epoch", flush=True)
    rows = []
    for model, imgsz, batch, images in CONFIGS[:3] if args.quick else CONFIGS:
        predicted = predict(session, model, imgsz, batch, images, workers)
        measured = run_probe(model=model, imgsz=imgsz, batch=batch, images=images, workers=workers).epoch_seconds
        error = (predicted - measured) / measured
        rows.append((model, imgsz, batch, images, predicted, measured, error))
        print(f"{model} {imgsz} b{batch} n{images}: predicted {predicted:.2f} s, measured {measured:.2f} s "
              f"({error:+.1%})", flush=True)
    errors = [abs(r[-1]) for r in rows]
    median, worst = statistics.median(errors), max(errors)
    print(f"median |error| {median:.1%}, worst {worst:.1%}")
    if not args.quick:
        write_doc(rows, probes, median, worst, "python benchmarks/estimator_accuracy.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
