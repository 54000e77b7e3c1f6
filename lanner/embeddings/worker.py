"""What an executor runs for one embedding attempt: ``python -m lanner.embeddings.worker``.

Everything comes from ``LANNER_EMBEDDING_SPEC`` (JSON: ``jobId, attempt, weightsUrl, weightsSha256, manifestUrl,
vectorsUrl, imgsz, batch``), built by ``embeddings.queue``. The worker fetches the weights (checked against their
digest), then asks the job's signed manifest link, page after page, for images that have no vector yet under
these weights (sha256 order, after the last one it saw), fetches each page's images from their signed links,
embeds them with ``YOLO.embed`` (the pooled features before the head: one vector per image) and PUTs the page's
vectors to the job's signed vectors link, where the server stores them before the next page is asked for. An
attempt after a crash therefore skips every page already delivered: the manifest lists only what is missing.
An empty page ends the job (exit 0). It needs no database and no key, so it runs the same on a Ray node.

An image that cannot be fetched or decoded is counted (``failedDownloads``), one the model fails on too
(``failedInference``); neither stops the job. On a failure that does, it prints ``ERROR_MARK`` and a JSON
``{"message": ...}`` and exits 3, as the export worker does."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lanner.scratch import scratch_folder

SPEC_ENV = "LANNER_EMBEDDING_SPEC"
ERROR_MARK = "LANNER_EMBEDDING_ERROR "
EXIT_FAILED = 3
RETRY_SECONDS = 180.0  # rides over a server restart: the signed links stay valid
FETCH_THREADS = 8


class EmbeddingFailed(Exception):
    """A reason for the user; the worker exits with it."""


def with_retries(what: str, attempt: Callable[[], Any]) -> Any:
    """``attempt()`` until it succeeds, for ``RETRY_SECONDS`` while the server is away; a 4xx answer is final."""
    deadline = time.monotonic() + RETRY_SECONDS
    delay = 1.0
    while True:
        try:
            return attempt()
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                detail = exc.read().decode("utf-8", "replace")[:300]
                raise EmbeddingFailed(f"{what}: HTTP {exc.code} {detail}") from None
            reason = f"HTTP {exc.code}"
        except OSError as exc:
            reason = str(exc)
        if time.monotonic() > deadline:
            raise EmbeddingFailed(f"{what}: {reason}")
        print(f"lanner embeddings: {what} ({reason}); retrying", flush=True)
        time.sleep(delay)
        delay = min(delay * 2, 15.0)


def fetch_weights(url: str, target: Path, sha256: str) -> None:
    """The weights whole: a body cut short by a dying server reads as complete, so the digest decides."""
    def attempt() -> None:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=120) as response, target.open("wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
                digest.update(chunk)
        if digest.hexdigest() != sha256:
            raise ConnectionError(f"the weights received hash to {digest.hexdigest()[:12]}…, not {sha256[:12]}…")

    with_retries("the model's weights could not be fetched", attempt)


def page_url(manifest_url: str, after: str, limit: int) -> str:
    return f"{manifest_url}&{urllib.parse.urlencode({'after': after, 'limit': limit})}"


def fetch_page(manifest_url: str, after: str, limit: int) -> list[dict[str, str]]:
    def attempt() -> list[dict[str, str]]:
        with urllib.request.urlopen(page_url(manifest_url, after, limit), timeout=120) as response:
            return list(json.loads(response.read())["images"])

    return with_retries("the job's image list could not be read", attempt)


def fetch_image(url: str) -> np.ndarray | None:
    """The image as BGR pixels (what ``YOLO`` takes for arrays), or None when it cannot be had."""
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except (OSError, urllib.error.HTTPError):
            time.sleep(1.0)
            continue
        return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)  # None: not an image
    return None


def embed(model: Any, images: list[np.ndarray], imgsz: int) -> list[np.ndarray | None]:
    """One L2-normalised float32 vector per image; a batch the model fails on is retried image by image, so one
    bad image costs only itself."""
    try:
        vectors = [v.detach().cpu().numpy().ravel() for v in model.embed(images, imgsz=imgsz, verbose=False)]
    except Exception:
        if len(images) == 1:
            return [None]
        return [embed(model, [image], imgsz)[0] for image in images]
    return [(v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32) for v in vectors]


def pack(hashes: list[str], vectors: list[np.ndarray], failed_downloads: int, failed_inference: int) -> bytes:
    """A page's vectors as an ``.npz`` (no pickles: the server loads it with ``allow_pickle=False``)."""
    out = io.BytesIO()
    dim = vectors[0].shape[0] if vectors else 0
    np.savez(out, sha256=np.array(hashes, dtype="S64"),
             vectors=np.stack(vectors) if vectors else np.zeros((0, dim), np.float32),
             failed=np.array([failed_downloads, failed_inference], dtype=np.int64))
    return out.getvalue()


def deliver(url: str, body: bytes) -> None:
    def attempt() -> None:
        request = urllib.request.Request(url, data=body, method="PUT", headers={
            "Content-Type": "application/octet-stream", "Content-Length": str(len(body))})
        with urllib.request.urlopen(request, timeout=300):
            return

    with_retries("the server refused the vectors", attempt)


def run(spec: dict[str, Any], home: Path) -> int:
    """Embed every image the manifest lists; returns how many vectors were delivered."""
    started, delivered = time.monotonic(), 0
    with scratch_folder(home, "embed-") as folder:
        weights = folder / "model.pt"
        fetch_weights(spec["weightsUrl"], weights, spec["weightsSha256"])
        from ultralytics import YOLO  # seconds to import: once the weights are here

        model = YOLO(str(weights))
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
    return delivered


def main() -> None:
    raw = os.environ.get(SPEC_ENV)
    if not raw:
        sys.exit(f"lanner embedding worker: {SPEC_ENV} is not set")
    spec = json.loads(raw)
    home = Path(os.path.expanduser(os.environ.get("LANNER_WORKER_DIR") or os.environ.get("LANNER_HOME") or "."))
    home.mkdir(parents=True, exist_ok=True)
    print(f"lanner embeddings: job {spec['jobId']} attempt {spec.get('attempt')} at {spec['imgsz']} px", flush=True)
    try:
        run(spec, home)
    except EmbeddingFailed as exc:
        print(ERROR_MARK + json.dumps({"message": str(exc)}), flush=True)
        sys.exit(EXIT_FAILED)


def error_from_log(tail: str) -> str | None:
    """The message a failed worker printed last (see ``main``), or None."""
    for line in reversed(tail.splitlines()):
        if ERROR_MARK in line:
            try:
                return str(json.loads(line.split(ERROR_MARK, 1)[1])["message"])
            except (ValueError, KeyError, TypeError):
                return None
    return None


if __name__ == "__main__":
    main()
