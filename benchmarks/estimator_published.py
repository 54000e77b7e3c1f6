"""The estimator's GPU figures against published measurements (issue 5, second benchmark).

    .venv/bin/python benchmarks/estimator_published.py

Uses only the priors (no calibration from this machine) and compares the predicted training throughput or time
with every published figure in shared/reference/measured-training.md that describes a full training setup.
Fitted (used to set the priors, so not a test): A2 (absolute scale), A1 YOLOv5n (rented-host loader cost),
B1 (relative GPU speed). Held out: A1 s/m/l/x, A3, A7, A8 (a 2-vCPU Colab host: slower cores than the
rented-host prior assumes), and the V100's relative speed from B1's V100 row (not used in the fit).
GFLOPs are the published ones (the original YOLOv5 models differ from ultralytics' anchor-free v5u YAMLs).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from common import write_section

from lanner.gpus import priors
from lanner.gpus.catalogue import default_catalogue
from lanner.gpus.estimator import Workload, estimate_time

SECTION = "## Estimator against published GPU measurements (issue 5)"
COCO_TRAIN, COCO_VAL = 118_287, 5_000


@dataclass
class Case:
    id: str
    gpu: str
    what: str
    gflops: float
    batch: int
    images: int
    val_images: int
    host_cpus: float
    measured: float          # seconds (per epoch, or per step for the notebook runs)
    measure: str             # "epoch" (train+val) | "train" (train only) | "step"
    cache: bool = False
    fitted: bool = False


CASES = [
    Case("A1", "v100-sxm2-32gb", "YOLOv5n COCO epoch, b128", 4.5, 128, COCO_TRAIN, COCO_VAL, 16, 288, "epoch",
         fitted=True),
    Case("A1", "v100-sxm2-32gb", "YOLOv5s COCO epoch, b64", 16.5, 64, COCO_TRAIN, COCO_VAL, 16, 576, "epoch"),
    Case("A1", "v100-sxm2-32gb", "YOLOv5m COCO epoch, b40", 49.0, 40, COCO_TRAIN, COCO_VAL, 16, 1152, "epoch"),
    Case("A1", "v100-sxm2-32gb", "YOLOv5l COCO epoch, b24", 109.1, 24, COCO_TRAIN, COCO_VAL, 16, 1728, "epoch"),
    Case("A1", "v100-sxm2-32gb", "YOLOv5x COCO epoch, b16", 205.7, 16, COCO_TRAIN, COCO_VAL, 16, 2304, "epoch"),
    Case("A2", "a100-80gb-sxm", "YOLOv5l COCO train, b16", 109.1, 16, COCO_TRAIN, 0, 12, 1239, "train",
         fitted=True),
    Case("A3", "a100-80gb-sxm", "YOLOv5n-seg COCO epoch, b16 (batch assumed)", 7.1, 16, COCO_TRAIN, COCO_VAL, 16,
         963, "epoch"),
    Case("A3", "a100-80gb-sxm", "YOLOv5s-seg COCO epoch, b16 (batch assumed)", 26.4, 16, COCO_TRAIN, COCO_VAL, 16,
         1059, "epoch"),
    Case("A3", "a100-80gb-sxm", "YOLOv5m-seg COCO epoch, b16 (batch assumed)", 70.8, 16, COCO_TRAIN, COCO_VAL, 16,
         1303, "epoch"),
    Case("A7", "t4", "YOLOv5s coco128 step, b16, cached", 16.5, 16, 128, 0, 2, 1 / 4.0, "step", cache=True),
    Case("A8", "t4", "YOLOv8n coco128 step, b16, 2 vCPUs", 8.7, 16, 128, 0, 2, 1 / 1.175, "step"),
]


def predict(case: Case, relative: dict[str, float]) -> float:
    speed = priors.gpu_prior(relative[case.gpu], "prior")
    work = Workload(gflops=case.gflops, train_images=case.images, val_images=case.val_images, epochs=1,
                    batch=case.batch, workers=min(8, int(case.host_cpus)), host_cpus=case.host_cpus, imgsz=640,
                    cache=case.cache)
    result = estimate_time(work, speed, priors.CLOUD_LOADER_640, priors.CLOUD_FIXED)
    if case.measure == "step":
        return result.train_step_seconds
    if case.measure == "train":
        return result.breakdown["train_per_epoch"]
    return result.epoch_seconds.value


def main() -> None:
    catalogue = default_catalogue()
    specs = {g.id: (g.fp16_tflops, g.bandwidth_gbs) for g in catalogue.all() if g.fp16_tflops and g.bandwidth_gbs}
    relative = priors.relative_speeds(specs)
    rows, held_out = [], []
    for case in CASES:
        predicted = predict(case, relative)
        error = (predicted - case.measured) / case.measured
        rows.append((case, predicted, error))
        if not case.fitted:
            held_out.append(abs(error))
        print(f"{case.id} {case.gpu:16} {case.what:45} predicted {predicted:9.2f} measured {case.measured:9.2f} "
              f"{error:+.0%}{' (fitted)' if case.fitted else ''}")
    v100 = relative["v100-sxm2-32gb"] / (229 / 458)  # B1: LambdaCloud V100 16GB SSD300 AMP vs A100 80GB SXM4
    median = sorted(held_out)[len(held_out) // 2]
    print(f"held-out median |error| {median:.0%}, worst {max(held_out):.0%}; V100 relative speed off by "
          f"{v100 - 1:+.0%} against B1")
    lines = [SECTION, "", f"Date {time.strftime('%Y-%m-%d', time.gmtime())}; priors only (no calibration); "
             "command `python benchmarks/estimator_published.py`. Fitted: A2 (absolute scale), A1 YOLOv5n (loader cost "
             "of a rented GPU host), B1 (relative speed of the GPUs it lists). Everything else is held out.", "",
             "| ID | GPU | workload | measured | predicted | error |", "|---|---|---|---:|---:|---:|"]
    for case, predicted, error in rows:
        unit = "s/step" if case.measure == "step" else "s"
        lines.append(f"| {case.id}{' (fitted)' if case.fitted else ''} | {case.gpu} | {case.what} | "
                     f"{case.measured:.2f} {unit} | {predicted:.2f} {unit} | {error:+.0%} |")
    lines += ["", f"Held-out median absolute error {median:.0%}, worst {max(held_out):.0%}. The power law gives "
              f"the V100 (not in the fit) a relative speed {v100 - 1:+.0%} off B1's V100 row.", ""]
    write_section(SECTION, "\n".join(lines))
    assert math.isfinite(median)


if __name__ == "__main__":
    main()
