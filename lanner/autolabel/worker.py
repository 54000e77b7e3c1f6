"""What an executor runs for one auto-annotation attempt: ``python -m lanner.autolabel.worker``.

Everything comes from ``LANNER_AUTOLABEL_SPEC`` (JSON, built by ``autolabel.queue``): ``jobId, attempt,
operation, weightsUrl, weightsSha256, images [{key, url}], confidence, iou, imgsz, classMap, chunk, chunkUrl,
token`` (a blur run has ``cascade``, the operator's cascade or None, instead of weights, and hands back each
image's face boxes: ``face_chunk``). The
worker fetches the weights (checked against their hash), then for each chunk of images fetches them, predicts,
converts the boxes to dataset labels (``inference.convert.annotations``, the shared inference's conversion) and
POSTs them to ``chunkUrl``; the server records each image once. So a worker killed mid-batch loses at most its
current chunk, and the next attempt is given only the images not yet recorded. A 409 from the server (the run
was cancelled, or a newer attempt owns it) ends the worker quietly. It needs no database, so it runs the same on
a Ray node.

On failure it prints ``ERROR_MARK`` and a JSON ``{"message": ...}`` and exits 3 (the queue keeps the message)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from lanner.exports.worker import ERROR_MARK
from lanner.scratch import scratch_folder
from lanner.training.executors import worker_io
from lanner.training.executors.worker_io import WorkerFailed, download, with_retries

SPEC_ENV = "LANNER_AUTOLABEL_SPEC"
TOKEN_HEADER = "X-Lanner-Autolabel-Token"
EXIT_STOPPED = 0


class Stopped(Exception):
    """The server no longer takes this attempt's labels (cancelled, or superseded)."""


def fetch(url: str) -> bytes:
    def attempt() -> bytes:
        with urllib.request.urlopen(url, timeout=120) as response:
            return bytes(response.read())
    return with_retries("an image could not be fetched", attempt)


def post_chunk(spec: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    body = json.dumps({"results": results}).encode()

    def attempt() -> dict[str, Any]:
        request = urllib.request.Request(spec["chunkUrl"], data=body, method="POST", headers={
            "Content-Type": "application/json", TOKEN_HEADER: spec["token"]})
        with urllib.request.urlopen(request, timeout=120) as response:
            return dict(json.loads(response.read()))

    try:
        return with_retries("the labels could not be handed to the server", attempt)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 409):
            raise Stopped(exc.read().decode("utf-8", "replace")[:300]) from None
        raise WorkerFailed(f"the server refused the labels (HTTP {exc.code}: "
                           f"{exc.read().decode('utf-8', 'replace')[:300]})") from None


def label_chunk(model: Any, spec: dict[str, Any], images: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The dataset labels the model predicts for ``images``, with their confidences (auto-annotation stores only
    the boxes; the review scores job, which runs this worker too, weighs disagreements by them)."""
    # start-up cost: the server imports this module (SPEC_ENV) and needs neither OpenCV nor the conversion
    import cv2
    import numpy as np

    from lanner.inference import convert

    pixels = []
    for image in images:
        decoded = cv2.imdecode(np.frombuffer(fetch(image["url"]), np.uint8), cv2.IMREAD_COLOR)
        if decoded is None:
            raise WorkerFailed(f"image {image['key']} could not be decoded")
        pixels.append(decoded)
    results = model.predict(pixels, conf=spec["confidence"], iou=spec["iou"], imgsz=spec["imgsz"], device="cpu",
                            verbose=False)
    out = []
    for image, result in zip(images, results, strict=True):
        labels = convert.annotations(result, class_map=spec.get("classMap"))
        out.append({"key": image["key"], "labels": labels["predictions"], "partial": labels["partial"],
                    "confidences": labels["confidences"]})
    return out


def face_chunk(cascade: Any, spec: dict[str, Any], images: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The faces the cascade finds in ``images`` (normalised boxes): the server blurs them in the originals."""
    from lanner.autolabel import faces  # start-up cost: OpenCV, which the server importing this module needs not

    out = []
    for image in images:
        try:
            pixels = faces.decode(fetch(image["url"]))
        except ValueError:
            raise WorkerFailed(f"image {image['key']} could not be decoded") from None
        out.append({"key": image["key"], "faces": faces.detect(cascade, pixels, spec["confidence"])})
    return out


def _processor(spec: dict[str, Any], folder: Path) -> Any:
    """What turns a chunk of images into its results: the face cascade of a blur run, else the model."""
    if spec.get("operation") == "blur":
        from lanner.autolabel import faces  # start-up cost: OpenCV, which the server importing this module needs not

        path = faces.cascade_path(spec.get("cascade"))
        if path is None:
            where = spec.get("cascade") or "this OpenCV bundles no cascades"
            raise WorkerFailed(f"no face detector on this node ({where}): set LANNER_FACE_CASCADE or install an "
                               "OpenCV 4 wheel")
        cascade = faces.load(path)
        return lambda chunk: face_chunk(cascade, spec, chunk)
    from ultralytics import YOLO  # seconds to import: only in the worker

    weights = folder / "weights.pt"
    download(spec["weightsUrl"], weights, spec.get("weightsSha256"))
    model = YOLO(str(weights))
    return lambda chunk: label_chunk(model, spec, chunk)


def run(spec: dict[str, Any], home: Path) -> int:
    started = time.monotonic()
    done = 0
    with scratch_folder(home, "autolabel-") as folder:
        process = _processor(spec, folder)
        images = spec["images"]
        size = max(1, int(spec.get("chunk") or 16))
        for start in range(0, len(images), size):
            chunk = images[start:start + size]
            answer = post_chunk(spec, process(chunk))
            done += len(chunk)
            print(f"lanner autolabel: {spec['jobId']} {done}/{len(images)} images "
                  f"({answer.get('processed')}/{answer.get('total')} recorded)", flush=True)
    print(f"lanner autolabel: {spec['jobId']} done in {time.monotonic() - started:.1f} s", flush=True)
    return done


def run_until_stopped(spec: dict[str, Any], home: Path) -> None:
    """``run``, ending quietly (exit 0) when the server no longer takes this attempt's labels."""
    try:
        run(spec, home)
    except Stopped as exc:
        print(f"lanner autolabel: stopped by the server ({exc})", flush=True)
        sys.exit(EXIT_STOPPED)


def main() -> None:
    worker_io.main(SPEC_ENV, ERROR_MARK, run_until_stopped, lambda spec: f"lanner autolabel: {spec['jobId']} "
                   f"attempt {spec.get('attempt')}: {len(spec['images'])} images")


if __name__ == "__main__":
    main()
