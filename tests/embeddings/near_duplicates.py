"""Synthetic near-duplicates for the similar-images tests and benchmark (issue 31): augmented copies (a flip, a
crop, a colour jitter) of some images hidden among others, written as a YOLO detection dataset. The copies are new
bytes, so they are separate images that only an embedding can pair with their originals."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from lanner.synthetic import make_detection_dataset


def augment(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A horizontal flip, a crop of 80-90 % of each side (resized back), and a brightness/contrast/hue jitter."""
    height, width = image.shape[:2]
    out = image[:, ::-1]
    keep = rng.uniform(0.8, 0.9)
    ch, cw = int(height * keep), int(width * keep)
    y0, x0 = int(rng.integers(0, height - ch + 1)), int(rng.integers(0, width - cw + 1))
    out = cv2.resize(np.ascontiguousarray(out[y0:y0 + ch, x0:x0 + cw]), (width, height))
    hsv = cv2.cvtColor(out, cv2.COLOR_BGR2HSV).astype(np.int16)
    hsv[..., 0] = (hsv[..., 0] + int(rng.integers(-8, 9))) % 180
    out = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2BGR).astype(np.float32)
    out = out * rng.uniform(0.8, 1.2) + rng.uniform(-20, 20)
    return np.clip(out, 0, 255).astype(np.uint8)


def make_near_duplicates(root: Path, *, images: int, copies: int, size: int = 96, seed: int = 0
                         ) -> dict[str, str]:
    """A dataset of ``images`` synthetic shapes images (train split) plus an augmented copy of the first
    ``copies`` of them (named ``copy_<original>``); returns {original name: copy name}."""
    make_detection_dataset(root, train=images, val=0, size=size, seed=seed)
    rng = np.random.default_rng(seed + 1)
    pairs = {}
    folder = root / "images" / "train"
    for path in sorted(folder.glob("*.jpg"))[:copies]:
        copy = f"copy_{path.name}"
        cv2.imwrite(str(folder / copy), augment(cv2.imread(str(path)), rng))
        label = root / "labels" / "train" / path.with_suffix(".txt").name
        (label.parent / f"copy_{label.name}").write_text(label.read_text())  # the labels matter not here
        pairs[path.name] = copy
    return pairs


def make_reencoded(root: Path, *, images: int, copies: int, size: int = 64, seed: int = 0) -> dict[str, str]:
    """Like ``make_near_duplicates``, the copies being the first images saved again as JPEG at quality 70: other
    bytes, nearly the same pixels. Every embedding must put such a copy first among its original's neighbours."""
    make_detection_dataset(root, train=images, val=0, size=size, seed=seed)
    pairs = {}
    folder = root / "images" / "train"
    for path in sorted(folder.glob("*.jpg"))[:copies]:
        copy = f"reencoded_{path.name}"
        cv2.imwrite(str(folder / copy), cv2.imread(str(path)), [cv2.IMWRITE_JPEG_QUALITY, 70])
        label = root / "labels" / "train" / path.with_suffix(".txt").name
        (label.parent / f"reencoded_{label.name}").write_text(label.read_text())
        pairs[path.name] = copy
    return pairs
