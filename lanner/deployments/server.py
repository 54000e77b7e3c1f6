"""A local endpoint's serving process: ``python -m lanner.deployments.server``, launched and supervised by
``deployments.supervisor`` through the local executor (its own session, its log in the deployment's folder).

It reads its instructions from ``LANNER_ENDPOINT_SPEC`` (the model file, the port, threads, batching), loads
the model first (an ONNX export on ONNX Runtime, or a checkpoint on PyTorch, through ``lanner.inference``), and
only then listens on ``127.0.0.1:<port>``, so an open port means a loaded model:

- ``POST /predict``: the image as the body, the options in the query (``deployments.serving``), answered with
  the hosted ``PredictResponse``; requests that arrive together are batched (``lanner.inference.batcher``);
- ``GET /health``: what it serves.

A model that cannot be loaded exits with ``EXIT_UNSERVABLE`` after one ``lanner-endpoint:`` line saying why,
which the deployment then shows; anything else that kills it is restarted by the supervisor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lanner.deployments import serving
from lanner.errors import LannerError
from lanner.inference.predictor import Options, Predictor, Weights

CACHE_BYTES = 1 << 40  # one model per process: never evicted


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def build_app(spec: dict[str, Any], predictor: Predictor, weights: Weights, *, loaded: Any) -> Starlette:
    model_uri = spec["model"]
    info = {"ok": True, "deployment": spec["deploymentId"], "model": model_uri, "runtime": loaded.runtime,
            "task": loaded.task, "loadedAt": loaded.loaded_at, "pid": os.getpid()}

    async def run(image: Any, options: Options) -> dict[str, Any]:
        return await predictor.predict(weights, image, options, model_name=model_uri)

    async def predict(request: Request) -> Response:
        status, body = await serving.predict(await request.body(), request.query_params,
                                             max_pixels=spec["maxPixels"], run=run)
        return Response(body, status_code=status, media_type="application/json")

    async def health(_: Request) -> Response:
        return JSONResponse(info)

    return Starlette(routes=[Route("/predict", predict, methods=["POST"]), Route("/health", health)])


def _fail(message: str, code: int) -> None:
    print(f"{serving.ERROR_PREFIX} {message}", flush=True)
    sys.exit(code)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = json.loads(os.environ[serving.SPEC_ENV])
    folder = Path(spec["folder"])
    source = Path(spec["path"])
    predictor = Predictor(home=folder, cache_bytes=CACHE_BYTES, max_batch=spec["maxBatch"],
                          window_s=spec["windowMs"] / 1000, threads=spec["threads"], workers=1,
                          cpu_batch_pixels=spec["cpuBatchPixels"])
    weights = Weights(spec["digest"], lambda path: _link_or_copy(source, path), suffix=source.suffix)
    started = time.perf_counter()
    try:
        loaded = asyncio.run(predictor.model(weights))
    except LannerError as error:
        _fail(error.message, serving.EXIT_UNSERVABLE)
    except Exception as error:  # the runtime's own failure: say what it was, then stop for good
        _fail(f"the model could not be loaded ({type(error).__name__}: {str(error)[:300]})", serving.EXIT_UNSERVABLE)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((spec["host"], spec["port"]))
    except OSError as error:
        _fail(f"port {spec['port']} is taken ({error.strerror})", serving.EXIT_PORT_TAKEN)
    print(f"lanner endpoint {spec['deploymentId']}: {loaded.runtime} model loaded in "
          f"{time.perf_counter() - started:.1f} s, listening on {spec['host']}:{spec['port']}", flush=True)
    config = uvicorn.Config(build_app(spec, predictor, weights, loaded=loaded), log_level="warning",
                            access_log=False, lifespan="off", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
