"""What an executor runs for one embedding attempt: ``python -m lanner.embeddings.worker``.

Everything comes from ``LANNER_EMBEDDING_SPEC`` (JSON: ``jobId, attempt, weightsUrl, weightsSha256, vectorKey,
manifestUrl, vectorsUrl, imgsz, batch``), built by ``embeddings.queue``. The worker fetches the weights (checked
against their digest), then asks the job's signed manifest link, page after page, for images that have no vector
yet under the job's key (sha256 order, after the last one it saw), fetches each page's images from their signed
links, embeds them (``embeddings.encoding.embed``: one vector per image, from the model's backbone) and PUTs the
page's vectors to the job's signed vectors link, where the server stores them before the next page is asked for.
An attempt after a crash therefore skips every page already delivered: the manifest lists only what is missing.
An empty page ends the job (exit 0). It needs no database and no key, so it runs the same on a Ray node. The
job's vectors are stored under ``vectorKey``, which names the weights and the encoding (``encoding.vector_key``):
a worker of another Lanner version (another ``encoding.ENCODING``), or one handed weights other than the job's,
refuses the job rather than deliver vectors that would be stored under the wrong name.

When the spec also has ``sampleUrl`` and ``headUrl`` (the server has no copy-detection head for the job's vector
key yet, ``embeddings.head``), the worker then fetches a sample of the dataset's images, embeds ``head.VIEWS``
edited copies of each, trains the head and PUTs it: the last step, so an attempt after a crash finds no page left
and goes straight to it again.

An image that cannot be fetched or decoded is counted (``failedDownloads``), one the model fails on too
(``failedInference``); neither stops the job. On a failure that does, it prints ``ERROR_MARK`` and a JSON
``{"message": ...}`` and exits 3, as the export worker does."""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lanner.embeddings import head
from lanner.embeddings.encoding import ENCODING, embed, flush_denormals, vector_key
from lanner.scratch import scratch_folder
from lanner.training.executors import worker_io
from lanner.training.executors.worker_io import WorkerFailed, download, with_retries

SPEC_ENV = "LANNER_EMBEDDING_SPEC"
ERROR_MARK = "LANNER_EMBEDDING_ERROR "
FETCH_THREADS = 8


def page_url(manifest_url: str, after: str, limit: int) -> str:
    return f"{manifest_url}&{urllib.parse.urlencode({'after': after, 'limit': limit})}"


def fetch_page(manifest_url: str, after: str, limit: int) -> list[dict[str, str]]:
    def attempt() -> list[dict[str, str]]:
        with urllib.request.urlopen(page_url(manifest_url, after, limit), timeout=120) as response:
            return list(json.loads(response.read())["images"])

    return with_retries("the job's image list could not be read", attempt, refuse=True)


def fetch_image(url: str, longest: int = 0) -> np.ndarray | None:
    """The image as BGR pixels (what ``YOLO`` takes for arrays), or None when it cannot be had; with ``longest``,
    shrunk (aspect kept) so that its longer side is at most that."""
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except (OSError, urllib.error.HTTPError):
            time.sleep(1.0)
            continue
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)  # None: not an image
        if image is not None and longest and max(image.shape[:2]) > longest:
            ratio = longest / max(image.shape[:2])
            image = cv2.resize(image, (max(1, round(image.shape[1] * ratio)), max(1, round(image.shape[0] * ratio))),
                               interpolation=cv2.INTER_AREA)
        return image
    return None


def pack(hashes: list[str], vectors: list[np.ndarray], failed_downloads: int, failed_inference: int) -> bytes:
    """A page's vectors as an ``.npz`` (no pickles: the server loads it with ``allow_pickle=False``)."""
    out = io.BytesIO()
    dim = vectors[0].shape[0] if vectors else 0
    np.savez(out, sha256=np.array(hashes, dtype="S64"),
             vectors=np.stack(vectors) if vectors else np.zeros((0, dim), np.float32),
             failed=np.array([failed_downloads, failed_inference], dtype=np.int64))
    return out.getvalue()


def deliver(url: str, body: bytes) -> None:
    worker_io.put(body, url, what="the server refused the vectors", timeout=300, refuse=True)


def run(spec: dict[str, Any], home: Path) -> int:
    """Embed every image the manifest lists; returns how many vectors were delivered."""
    if vector_key(spec["weightsSha256"]) != spec["vectorKey"]:
        raise WorkerFailed(f"this worker's vectors ({ENCODING}, of weights {spec['weightsSha256'][:12]}…) are not "
                           "the ones the job wants: run the server's version of Lanner on the workers")
    started, delivered = time.monotonic(), 0
    with scratch_folder(home, "embed-") as folder:
        weights = folder / "model.pt"
        download(spec["weightsUrl"], weights, spec["weightsSha256"])
        from ultralytics import YOLO  # seconds to import: once the weights are here

        model = YOLO(str(weights))
        flush_denormals()
        imgsz, batch = int(spec["imgsz"]), int(spec.get("batch") or 32)
        after = ""
        with ThreadPoolExecutor(FETCH_THREADS) as pool:
            while page := fetch_page(spec["manifestUrl"], after, batch):
                after = page[-1]["sha256"]
                pixels = list(pool.map(fetch_image, [image["url"] for image in page]))
                fetched = [(image["sha256"], p) for image, p in zip(page, pixels, strict=True) if p is not None]
                vectors = embed(model, [p for _, p in fetched], imgsz) if fetched else []
                kept = [(sha, v) for (sha, _), v in zip(fetched, vectors, strict=True) if v is not None]
                deliver(spec["vectorsUrl"], pack([sha for sha, _ in kept], [v for _, v in kept],
                                                 len(page) - len(fetched), len(fetched) - len(kept)))
                delivered += len(kept)
                print(f"lanner embeddings: {delivered} vectors ({delivered / (time.monotonic() - started):.1f}/s)",
                      flush=True)
            if spec.get("headUrl"):
                try:
                    train_head(spec, pool, lambda images: embed(model, images, imgsz))
                except Exception as exc:  # the vectors are delivered: the job stands, the key's next job tries again
                    print(f"lanner embeddings: the copy-detection head could not be trained ({exc}); similar "
                          "images are searched by the vectors alone", flush=True)
    return delivered


def train_head(spec: dict[str, Any], pool: ThreadPoolExecutor, embed_images: Any) -> None:
    """Train the vector key's copy-detection head on a sample of the dataset's images and deliver it. The images
    are kept shrunk to 1.5 times the embedding size (``head.augment`` crops to 55 % of the area at least, whose
    side is then still larger than what the model is given), so 2,000 photos take about 700 MB at 224 px, not
    tens of GB."""
    started = time.monotonic()
    listed = fetch_page(spec["sampleUrl"], "", head.IMAGES)
    images = [p for p in pool.map(lambda image: fetch_image(image["url"], 3 * int(spec["imgsz"]) // 2), listed)
              if p is not None]
    edits = head.views(images, embed_images, batch=int(spec.get("batch") or 32))
    print(f"lanner embeddings: {len(edits) * head.VIEWS} edited copies of {len(edits)} images embedded for the "
          f"copy-detection head in {time.monotonic() - started:.0f} s", flush=True)
    if len(edits) < 2:
        return
    trained = head.train(edits)
    worker_io.put(head.to_bytes(trained, len(edits)), spec["headUrl"], what="the server refused the head",
                  timeout=300, refuse=True)
    print(f"lanner embeddings: copy-detection head trained on {len(edits)} images "
          f"({time.monotonic() - started:.0f} s in all)", flush=True)


def main() -> None:
    worker_io.main(SPEC_ENV, ERROR_MARK, run, lambda spec: f"lanner embeddings: job {spec['jobId']} attempt "
                   f"{spec.get('attempt')} at {spec['imgsz']} px")


if __name__ == "__main__":
    main()
