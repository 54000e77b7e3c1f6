"""The Review queue (issue 31) on this machine's CPU: of 20 label errors injected into a labelled set, how many
a model trained on that set puts in the top 10 % of the queue (mistakenness, ``lanner.review.scoring``).

    PYTHONPATH=. .venv/bin/python -m benchmarks.review_queue --write-doc [--record tests/review/recorded.json]

A synthetic shapes set (``lanner.synthetic``: 200 train images of 96 px, one to three circles or squares each,
40 val) gets 20 errors in 20 distinct train images (``tests/review/corrupt.py``: classes swapped, boxes deleted,
boxes shifted half a width, in turn). yolo11n.yaml is trained from scratch on the corrupted set (nothing
downloaded, ``tests/trained.py``'s clean subprocess), then predicts every train image at conf 0.05 through the
inference conversion the scores job's worker uses (``inference.convert.annotations``); each image is scored
against its corrupted labels and the images are ranked. ``--record`` keeps the labels, predictions and errors
for ``tests/review/test_scoring.py``, which checks the same figure on them without training."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import cpu_model, write_section
from lanner.review import scoring
from lanner.synthetic import make_detection_dataset
from tests.review.corrupt import inject, read_labels
from tests.trained import _train

TITLE = "## Review queue (issue 31)"


def queue(images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded images ``[{name, labels, predictions, error}]`` in the Review queue's order: scored, calibrated
    over the set (what the scores job does), highest first."""
    values = scoring.calibrated([scoring.mistakenness(im["labels"], im["predictions"]).kinds for im in images])
    return [im for _, im in sorted(zip(values, images, strict=True), key=lambda pair: -pair[0])]


def rank(images: list[dict[str, Any]]) -> tuple[int, int, dict[str, int]]:
    """(errors in the top 10 %, errors, per kind found) of recorded images."""
    top = queue(images)[:max(1, len(images) // 10)]
    kinds: dict[str, int] = {}
    for image in top:
        if image["error"]:
            kinds[image["error"]] = kinds.get(image["error"], 0) + 1
    return sum(kinds.values()), sum(1 for im in images if im["error"]), kinds


def record(root: Path, weights: Path, errors: dict[str, str], imgsz: int) -> list[dict[str, Any]]:
    from ultralytics import YOLO

    from lanner.inference import convert

    model = YOLO(str(weights))
    out = []
    for path in sorted((root / "images" / "train").glob("*.jpg")):
        result = model.predict(str(path), conf=0.05, iou=0.7, imgsz=imgsz, device="cpu", verbose=False)[0]
        answer = convert.annotations(result)
        labels = read_labels(root / "labels" / "train" / f"{path.stem}.txt")
        out.append({"name": path.stem, "labels": [{**lb, "bbox": [round(v, 5) for v in lb["bbox"]]} for lb in labels],
                    "predictions": [{"classId": p["classId"], "bbox": [round(v, 5) for v in p["bbox"]],
                                     "confidence": round(c, 4)}
                                    for p, c in zip(answer["predictions"], answer["confidences"], strict=True)],
                    "error": errors.get(path.stem)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--imgsz", type=int, default=96)
    parser.add_argument("--errors", type=int, default=20)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--from-recording", type=Path, help="score a recording again instead of training")
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    if args.from_recording:
        saved = json.loads(args.from_recording.read_text())
        images, trained = saved["images"], float(saved["trainedSeconds"])
        args.images, args.epochs, args.imgsz = len(images), saved["epochs"], saved["imgsz"]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "shapes"
            data = make_detection_dataset(root, train=args.images, val=40, size=args.imgsz, seed=args.seed)
            errors = inject(root / "labels" / "train", args.errors, seed=args.seed + 6)
            started = time.monotonic()
            weights = _train(Path(tmp), data, epochs=args.epochs, imgsz=args.imgsz, batch=16)
            trained = time.monotonic() - started
            images = record(root, weights, errors, args.imgsz)
    found, total, kinds = rank(images)
    share = found / total
    print(f"{found}/{total} injected errors in the top 10 % ({share:.0%}); by kind {kinds}; training {trained:.0f} s")
    if args.record:
        args.record.write_text(json.dumps({"imgsz": args.imgsz, "epochs": args.epochs, "seed": args.seed,
                                           "trainedSeconds": round(trained), "images": images},
                                          separators=(",", ":")) + "\n")
    if args.write_doc:
        load = os.getloadavg()[0]
        write_section(TITLE, f"""{TITLE}

`python -m benchmarks.review_queue` — {datetime.now(UTC):%Y-%m-%d}, {cpu_model()}, {os.cpu_count()} cores,
load average {load:.1f} (other work on the machine).
{args.images} synthetic train images at {args.imgsz} px with {total} injected label errors (classes swapped, boxes
deleted, boxes shifted half a width); yolo11n.yaml from scratch, {args.epochs} epochs on the corrupted set
({trained:.0f} s on the CPU); every train image scored by mistakenness at conf 0.05.

| errors in the top 10 % of the Review queue | by kind | target |
|---|---|---|
| **{found} / {total} ({share:.0%})** | {", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))} | ≥ 70 % |
""")


if __name__ == "__main__":
    main()
