"""The predictor: weights in, the hosted ``PredictResponse`` out. The core of shared inference, reusable by anything
that serves a model (a dedicated endpoint), with no HTTP in it.

- Models are loaded once into a ``ModelCache`` (LRU by weights digest, under ``LANNER_INFERENCE_CACHE_BYTES``),
  from weights the caller hands over as ``Weights`` (a digest and a way to write the file).
- Images are queued on a ``Batcher`` lane per (weights, image size): requests that arrive together run as one
  batch (``LANNER_INFERENCE_BATCH_WINDOW_MS``, ``LANNER_INFERENCE_MAX_BATCH``) on the inference threads
  (``LANNER_INFERENCE_WORKERS``), never on the event loop; torch's threads are sized to the machine
  (``LANNER_INFERENCE_THREADS``).
- Each request's result is converted to its wire shape on the inference thread, right after its batch.

Callers validate options first (``lanner.inference.schemas`` holds the hosted ranges).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lanner import __version__
from lanner.config import Settings
from lanner.errors import Unprocessable
from lanner.inference import convert
from lanner.inference.batcher import Batcher
from lanner.inference.cache import ModelCache
from lanner.scratch import scratch_folder

if TYPE_CHECKING:
    from lanner.inference.runtime import LoadedModel


CPU_BATCH_PIXELS = 8 * 640 * 640


@dataclass(frozen=True)
class Weights:
    """A model's weights: ``digest`` (the cache key) and ``write_to(path)``, which puts the file at ``path``;
    ``suffix`` is the file's kind: ``.pt`` (an Ultralytics checkpoint, run by PyTorch) or ``.onnx`` (an ONNX
    export, run by ONNX Runtime)."""

    digest: str
    write_to: Callable[[Path], None]
    suffix: str = ".pt"


@dataclass(frozen=True)
class Options:
    """One request's parameters (the hosted defaults)."""

    conf: float = 0.25
    iou: float = 0.7
    imgsz: int = 640
    normalize: bool = False
    decimals: int = 5
    bits: int = 8


@dataclass(frozen=True)
class ModelInfo:
    task: str
    class_names: list[str]


@dataclass(frozen=True)
class _Item:
    weights: Weights
    image: np.ndarray
    conf: float
    iou: float
    finish: Callable[[Any, dict[str, float]], Any]  # (Results, speed) -> what the caller gets


class Predictor:
    def __init__(self, *, home: Path, cache_bytes: int, max_batch: int = 16, window_s: float = 0.005,
                 threads: int = 0, workers: int = 1, cpu_batch_pixels: int = CPU_BATCH_PIXELS) -> None:
        self.home = home
        self.threads = threads
        self.cpu_batch_pixels = cpu_batch_pixels
        self.on_cpu: bool | None = None  # known once a model is loaded
        self.cache: ModelCache[LoadedModel] = ModelCache(cache_bytes, size_of=lambda model: model.nbytes)
        self.workers = max(1, workers)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.batcher: Batcher[tuple[str, int], _Item, Any] = Batcher(
            self._run_batch, executor=self._executor_now, max_batch=max_batch, window_s=window_s,
            limit=self._batch_limit)
        self._versions: dict[str, str] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Predictor:
        return cls(home=settings.resolved_home, cache_bytes=settings.inference_cache_bytes,
                   max_batch=settings.inference_max_batch, window_s=settings.inference_batch_window_ms / 1000,
                   threads=settings.inference_threads, workers=settings.inference_workers,
                   cpu_batch_pixels=settings.inference_cpu_batch_pixels)

    def _batch_limit(self, key: tuple[str, int]) -> int:
        """On a CPU, a batch holds at most ``cpu_batch_pixels`` of input (batch x imgsz^2): past a few 640-px
        images its activations no longer fit the caches and each image runs slower than alone."""
        if not self.on_cpu or self.cpu_batch_pixels <= 0:
            return self.batcher.max_batch
        return self.cpu_batch_pixels // (key[1] * key[1])

    def _executor_now(self) -> ThreadPoolExecutor:
        """The inference threads, started on first use (again after ``close``: an app may be started twice)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="lanner-inference")
            return self._pool

    def close(self) -> None:
        """Stop the inference threads (a batch running finishes) and unload every model."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self.cache.clear()

    # -- loading --------------------------------------------------------------------------------------------
    def _load(self, weights: Weights) -> LoadedModel:
        # torch and Ultralytics take seconds to import: the server pays it when the first model is loaded
        from lanner.inference import runtime

        runtime.configure_threads(self.threads)
        if self._versions is None:
            self._versions = {"lanner": __version__, **runtime.versions()}
        with scratch_folder(self.home, "inference-") as folder:
            path = folder / f"weights{weights.suffix}"
            weights.write_to(path)  # a hard link where the blob store can
            try:
                loaded = runtime.load(path, digest=weights.digest, threads=self.threads)
                self.on_cpu = loaded.device == "cpu"
                return loaded
            except runtime.UnloadableWeights as error:
                raise Unprocessable(f"this model cannot be served: {error}", code="unloadable_weights") from None

    def _model(self, weights: Weights) -> LoadedModel:
        return self.cache.get(weights.digest, lambda: self._load(weights))

    async def model(self, weights: Weights) -> LoadedModel:
        """The loaded model (loading it off the event loop when it is not in the cache)."""
        loaded = self.cache.peek(weights.digest)
        return loaded if loaded is not None else await asyncio.to_thread(self._model, weights)

    async def info(self, weights: Weights) -> ModelInfo:
        loaded = await self.model(weights)
        return ModelInfo(loaded.task, list(loaded.class_names))

    @property
    def versions(self) -> dict[str, str]:
        return dict(self._versions or {"lanner": __version__})

    # -- running --------------------------------------------------------------------------------------------
    def _run_batch(self, key: tuple[str, int], items: list[_Item]) -> list[Any]:
        """One batch, on an inference thread: every item has the same weights and image size."""
        from lanner.inference.runtime import Job  # loaded by now: _model imported it

        model = self._model(items[0].weights)
        outputs = model.run([Job(item.image, item.conf, item.iou) for item in items], key[1])
        finished: list[Any] = []
        for item, (result, speed) in zip(items, outputs, strict=True):
            try:
                finished.append(item.finish(result, speed))
            except Exception as error:  # one request's conversion fails it alone
                finished.append(error)
        return finished

    async def run(self, weights: Weights, image: np.ndarray, *, conf: float, iou: float, imgsz: int,
                  finish: Callable[[Any, dict[str, float]], Any]) -> Any:
        """Queue one image; ``finish(Results, speed)`` runs on the inference thread and its value is returned."""
        await self.model(weights)  # a first load happens here, outside the batch
        return await self.batcher.submit((weights.digest, imgsz), _Item(weights, image, conf, iou, finish))

    def run_here(self, weights: Weights, images: Sequence[np.ndarray], *, conf: float, iou: float,
                 imgsz: int) -> list[Any]:
        """One ``Results`` per image, run on the calling thread: for background work (the labelling assistant's
        scoring), which shares the model cache and the loaded model's lock with requests but not the batcher,
        whose lanes belong to the app's event loop."""
        from lanner.inference.runtime import Job  # loaded by now: _model imported it

        model = self._model(weights)
        return [result for result, _ in model.run([Job(image, conf, iou) for image in images], imgsz)] if images else []

    async def predict(self, weights: Weights, image: np.ndarray, options: Options = Options(), *, model_name: str,
                      started: float | None = None) -> dict[str, Any]:
        """The hosted ``PredictResponse`` for one image. ``started``: ``time.perf_counter()`` when the call began
        (for ``functionTimeCall``; now by default)."""
        started = time.perf_counter() if started is None else started
        loaded = await self.model(weights)
        entry = await self.run(weights, image, conf=options.conf, iou=options.iou, imgsz=options.imgsz,
                               finish=partial(_entry, options=options))
        return convert.predict_response([entry], class_names=loaded.class_names, task=loaded.task, model=model_name,
                                        call_seconds=time.perf_counter() - started,
                                        alive_seconds=time.time() - loaded.loaded_at, versions=self.versions)

    async def annotate(self, weights: Weights, image: np.ndarray, *, conf: float, iou: float, imgsz: int = 640,
                       class_map: Sequence[int | None] | None = None) -> dict[str, Any]:
        """``images.predict``'s labels: ``{predictions, confidences, partial, inferenceTime}`` (ms)."""

        def finish(result: Any, speed: dict[str, float]) -> dict[str, Any]:
            labels = convert.annotations(result, class_map=class_map)
            return {**labels, "inferenceTime": round(sum(speed.values()), 3)}

        return await self.run(weights, image, conf=conf, iou=iou, imgsz=imgsz, finish=finish)

    # -- for callers on a worker thread (label proposals, the labelling assistant) ----------------------------
    def info_now(self, weights: Weights) -> ModelInfo:
        """``info`` on the calling thread (loading through the same cache)."""
        loaded = self._model(weights)
        return ModelInfo(loaded.task, list(loaded.class_names))

    def annotate_now(self, weights: Weights, images: Sequence[np.ndarray], *, conf: float, iou: float,
                     imgsz: int = 640, class_map: Sequence[int | None] | None = None) -> list[dict[str, Any]]:
        """``annotate`` for several images at once, run on the calling thread: the same cache, model lock and
        conversion, for code that is not async and must not wait on the event loop. Never call it there."""
        results = self.run_here(weights, images, conf=conf, iou=iou, imgsz=imgsz)
        return [convert.annotations(result, class_map=class_map) for result in results]


def _entry(result: Any, speed: dict[str, float], *, options: Options) -> dict[str, Any]:
    return convert.image_entry(result, speed, normalize=options.normalize, decimals=options.decimals,
                               bits=options.bits)
