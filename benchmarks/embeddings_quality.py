"""Embeddings (issue 31) on this machine's CPU: how fast ``embeddings.encoding.embed`` turns images into vectors, and
whether the vectors find augmented copies (flip, crop, colour jitter) of images hidden among others.

    OMP_NUM_THREADS=2 PYTHONPATH=. .venv/bin/python -m benchmarks.embeddings_quality WEIGHTS [--images 2000]
        [--copies 50] [--imgsz 128] [--size 160]

The same functions the embedding worker runs (``lanner.embeddings.encoding.embed``, batches of 32) and the same
index the server searches (``lanner.embeddings.index.build``): each original's 5 nearest neighbours (itself
excluded) must hold its copy. Throughput counts decoding nothing (the images are in memory): the model alone.
Then the copy-detection head is trained as the worker trains it (``lanner.embeddings.head``: edits of up to
2,000 of the dataset's images, copies included, as a real dataset would hold them) and the same search runs
through it; its cost is printed beside.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from lanner.embeddings import head, index
from lanner.embeddings.encoding import embed, flush_denormals
from tests.embeddings.near_duplicates import make_near_duplicates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("weights", help="a .pt file, or a model YAML (yolo11n.yaml) for random weights, seeded")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--imgsz", type=int, default=128, help="the demo's starting model's")
    parser.add_argument("--size", type=int, default=160, help="side of the synthetic images")
    args = parser.parse_args()
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory() as tmp:
        pairs = make_near_duplicates(Path(tmp), images=args.images, copies=args.copies, size=args.size)
        paths = sorted((Path(tmp) / "images" / "train").glob("*.jpg"))
        names = [p.name for p in paths]
        pixels = [cv2.imread(str(p)) for p in paths]
    if args.weights.endswith(".yaml"):
        import torch

        torch.manual_seed(0)
    model = YOLO(args.weights)
    flush_denormals()  # as the worker does
    embed(model, pixels[:32], args.imgsz)  # warm-up
    start = time.perf_counter()
    vectors = []
    for i in range(0, len(pixels), 32):
        vectors.extend(embed(model, pixels[i:i + 32], args.imgsz))
    seconds = time.perf_counter() - start
    matrix = np.stack(vectors)
    alone = found_in_top5(names, matrix, pairs, None)
    print(f"{len(pixels)} images of {args.size} px at imgsz {args.imgsz}, dim {matrix.shape[1]}: "
          f"{len(pixels) / seconds:.1f} images/s; copies in the top 5 of their originals: {alone}/{len(pairs)} "
          f"({100 * alone / len(pairs):.0f} %)", flush=True)
    start = time.perf_counter()
    edits = head.views(pixels[:head.IMAGES], lambda batch: embed(model, batch, args.imgsz))
    edited = time.perf_counter() - start
    mapping = head.train(edits)
    trained = time.perf_counter() - start - edited
    hits = found_in_top5(names, matrix, pairs, mapping)
    print(f"copy-detection head: {edits.shape[0]} images x {head.VIEWS} edits embedded in {edited:.1f} s, "
          f"trained in {trained:.1f} s; copies in the top 5 through it: {hits}/{len(pairs)} "
          f"({100 * hits / len(pairs):.0f} %)")


def found_in_top5(names: list[str], matrix: np.ndarray, pairs: dict[str, str], mapping: dict | None) -> int:
    found = index.DatasetIndex(names, *index.build(matrix, mapping), head=mapping)
    hits = 0
    for original, copy in pairs.items():
        nearest = [name for name, _ in found.search(matrix[names.index(original)], 6) if name != original]
        hits += copy in nearest[:5]
    return hits

if __name__ == "__main__":
    main()
