"""Small synthetic datasets drawn with OpenCV: tests and `lanner gpus probe` train on them, nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

CLASSES = ["circle", "square"]


def make_detection_dataset(root: Path, *, train: int = 16, val: int = 8, size: int = 160, seed: int = 0,
                           single_class: bool = False) -> Path:
    """Write a YOLO detection dataset (images/labels per split, data.yaml) and return data.yaml. With
    ``single_class`` every shape is labelled ``shape``: a detector trained on it finds objects but cannot tell
    circles from squares (the demo's pretrained start, which a fine-tune on labelled shapes then specialises)."""
    names_of = ["shape"] if single_class else CLASSES
    rng = np.random.default_rng(seed)
    for split, count in (("train", train), ("val", val)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image = np.full((size, size, 3), 255, np.uint8)
            lines = []
            for _ in range(int(rng.integers(1, 4))):
                cls = int(rng.integers(0, len(CLASSES)))
                w = int(rng.integers(size // 8, size // 3))
                x0 = int(rng.integers(0, size - w))
                y0 = int(rng.integers(0, size - w))
                color = tuple(int(c) for c in rng.integers(0, 200, 3))
                if cls == 0:
                    cv2.circle(image, (x0 + w // 2, y0 + w // 2), w // 2, color, -1)
                else:
                    cv2.rectangle(image, (x0, y0), (x0 + w, y0 + w), color, -1)
                cx, cy = (x0 + w / 2) / size, (y0 + w / 2) / size
                lines.append(f"{0 if single_class else cls} {cx:.6f} {cy:.6f} {w / size:.6f} {w / size:.6f}")
            cv2.imwrite(str(root / "images" / split / f"{split}_{i:04d}.jpg"), image)
            (root / "labels" / split / f"{split}_{i:04d}.txt").write_text("\n".join(lines) + "\n")
    data_yaml = root / "data.yaml"
    names = "\n".join(f"  {i}: {n}" for i, n in enumerate(names_of))
    data_yaml.write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n{names}\n")
    return data_yaml
