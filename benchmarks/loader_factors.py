"""Relative CPU cost of the trainer's data loader: cached vs decoded images, segmentation vs detection.

    .venv/bin/python benchmarks/loader_factors.py

The GPU advisor's loader priors (``lanner/gpus/priors.py``) give CPU seconds per 640 training image for detection
without a cache. Two ratios scale them: ``cache=ram`` (the images are kept decoded and resized, so JPEG decode and
the first resize are skipped) and segmentation (every polygon is resampled to 1,000 points, warped with the mosaic
and rasterised into the mask target). Both are properties of the pipeline, not of the host, so they are measured
here, on one core, with ultralytics' own training dataset (mosaic, random perspective, HSV, flips, formatting and
collate, exactly as a loader worker runs them), rather than fitted to any published training time.

The dataset imitates COCO: 640x480 JPEGs (quality 90) cut from the two photographs ultralytics ships, with a
Poisson(7.3) number of objects per image (COCO train2017: ~860k instances over 118k images) and 24-vertex polygons.
Prints the per-image times and the two ratios; nothing is written to docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

# More images than the training dataset's buffer of decoded images (min(n, 8 x batch, 1000) = 128), so that the
# uncached runs really decode: mosaic draws its three partner images from that buffer.
IMAGES, MEAN_OBJECTS, VERTICES, BATCH, REPEATS = 384, 7.3, 24, 16, 3


def make_dataset(root: Path, seed: int = 0) -> dict:
    from ultralytics.utils import ASSETS

    rng = np.random.default_rng(seed)
    photos = [cv2.imread(str(ASSETS / name)) for name in ("bus.jpg", "zidane.jpg")]
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir(parents=True)
    for i in range(IMAGES):
        photo = photos[i % 2]
        h, w = photo.shape[:2]
        ch, cw = int(h * rng.uniform(0.6, 1.0)), int(w * rng.uniform(0.6, 1.0))
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        image = cv2.resize(photo[y0:y0 + ch, x0:x0 + cw], (640, 480), interpolation=cv2.INTER_AREA)
        if rng.random() < 0.5:
            image = image[:, ::-1]
        cv2.imwrite(str(root / "images" / f"{i:04d}.jpg"), np.ascontiguousarray(image),
                    [cv2.IMWRITE_JPEG_QUALITY, 90])
        lines = []
        for _ in range(max(1, int(rng.poisson(MEAN_OBJECTS)))):
            cx, cy = rng.uniform(0.15, 0.85, 2)
            rx, ry = rng.uniform(0.03, 0.15, 2)
            angles = np.sort(rng.uniform(0, 2 * np.pi, VERTICES))
            xs = np.clip(cx + rx * np.cos(angles), 0, 1)
            ys = np.clip(cy + ry * np.sin(angles), 0, 1)
            lines.append(f"{int(rng.integers(0, 80))} " + " ".join(f"{x:.5f} {y:.5f}" for x, y in zip(xs, ys,
                                                                                                     strict=True)))
        (root / "labels" / f"{i:04d}.txt").write_text("\n".join(lines) + "\n")
    return {"names": {i: str(i) for i in range(80)}, "nc": 80, "channels": 3, "path": str(root)}


def seconds_per_image(root: Path, data: dict, task: str, cache: bool) -> float:
    """One core: dataset[i] (load + mosaic + augment + format) and the collate, as one loader worker runs them."""
    from ultralytics.cfg import get_cfg
    from ultralytics.data.build import build_yolo_dataset
    from ultralytics.utils import DEFAULT_CFG

    cfg = get_cfg(DEFAULT_CFG, {"task": task, "imgsz": 640, "cache": "ram" if cache else False})
    dataset = build_yolo_dataset(cfg, str(root / "images"), BATCH, data, mode="train")
    for i in range(BATCH):  # warm-up: label cache, first mosaics
        dataset[i]
    runs = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for first in range(0, IMAGES, BATCH):
            dataset.collate_fn([dataset[i] for i in range(first, first + BATCH)])
        runs.append((time.perf_counter() - started) / IMAGES)
    return statistics.median(runs)


def main() -> None:
    torch.set_num_threads(1)
    cv2.setNumThreads(0)  # as in a loader worker
    with tempfile.TemporaryDirectory(prefix="lanner-loader-") as tmp:
        root = Path(tmp)
        data = make_dataset(root)
        detect = seconds_per_image(root, data, "detect", cache=False)
        cached = seconds_per_image(root, data, "detect", cache=True)
        segment = seconds_per_image(root, data, "segment", cache=False)
    print(f"detect, decoded each time: {detect * 1000:.1f} ms per image on one core")
    print(f"detect, cache=ram:         {cached * 1000:.1f} ms  -> cached factor {cached / detect:.2f}")
    print(f"segment, decoded:          {segment * 1000:.1f} ms  -> segmentation factor {segment / detect:.2f}")


if __name__ == "__main__":
    main()
