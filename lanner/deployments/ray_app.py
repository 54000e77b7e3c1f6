"""A deployment on Ray: one Ray Serve application per deployment, and the Ray Job that deploys or deletes it
(``python -m lanner.deployments.ray_app deploy|delete``, submitted by ``deployments.backends.RayBackend``).
Only the job and the replicas import this module (it needs ``ray[serve]``); the server never does.

The job's driver fetches the served file once (the signed link in its spec) and binds its bytes to the
application, so Serve can restart or add replicas without Lanner. Each replica:

- gets ``num_cpus`` and ``memory`` from the deployment's ``cpu`` and ``memoryGi`` (``ray_actor_options``), and
  sizes torch's and ONNX Runtime's threads to them;
- scales between ``minInstances`` and ``maxInstances`` replicas (``autoscaling_config``);
- batches concurrent requests with ``@serve.batch`` and runs each batch through the same predictor as shared
  inference and local endpoints (``lanner.inference``; ``deployments.serving`` for the request itself);
- answers ``POST <route>/predict`` (the image as the body, options in the query) and ``GET <route>/health``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lanner import scratch
from lanner.deployments import serving
from lanner.inference.predictor import Options, Predictor, Weights

CACHE_BYTES = 1 << 40  # one model per replica: never evicted
DEFAULT_MAX_BATCH = 16
REPLICA_HOME = "lanner-endpoints"  # in the node's temporary folder, shared by the replicas on it
ABANDONED_SECONDS = 60.0  # a scratch folder whose replica died this long ago is removed by the next one


def replica_home() -> Path:
    """The predictor's home on this node: each load writes the weights into its own locked scratch folder there,
    removed once loaded. Shared, not one temporary folder per replica: Serve starts a replica for every restart
    and scale-up, and stops them without running any clean-up, so per-replica folders piled up for good; a load
    killed half-way leaves its folder, which the next replica to start here removes (``scratch.collect``)."""
    home = Path(tempfile.gettempdir()) / REPLICA_HOME
    scratch.collect(home, ABANDONED_SECONDS)
    return home


@serve.deployment(health_check_period_s=5, max_constructor_retry_count=3)
class Endpoint:
    def __init__(self, artefact: bytes, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.predictor = Predictor(home=replica_home(), cache_bytes=CACHE_BYTES,
                                   max_batch=spec["maxBatch"], window_s=0.0, threads=int(spec["cpu"]), workers=1,
                                   cpu_batch_pixels=int(spec["cpuBatchPixels"]))
        self.weights = Weights(spec["digest"], lambda path: path.write_bytes(artefact), suffix=spec["suffix"])
        with ThreadPoolExecutor(1) as pool:  # loaded now, whether or not an event loop runs in this thread
            self.loaded = pool.submit(asyncio.run, self.predictor.model(self.weights)).result()
        self.run_batch.set_max_batch_size(int(spec["maxBatch"]))
        self.run_batch.set_batch_wait_timeout_s(float(spec["windowMs"]) / 1000)

    @serve.batch(max_batch_size=DEFAULT_MAX_BATCH, batch_wait_timeout_s=0.005)
    async def run_batch(self, items: list[tuple[np.ndarray, Options]]) -> list[Any]:
        """A batch Serve gathered: one forward pass per image size (the predictor's lane runs what it is given
        at once), one answer or error per item."""
        return await asyncio.gather(*(self.predictor.predict(self.weights, image, options,
                                                             model_name=self.spec["model"])
                                      for image, options in items), return_exceptions=True)

    async def _run(self, image: np.ndarray, options: Options) -> dict[str, Any]:
        result = await self.run_batch((image, options))
        if isinstance(result, BaseException):
            raise result
        return result

    async def __call__(self, request: Request) -> Response:
        if request.url.path.rstrip("/").endswith("/health"):
            return JSONResponse({"ok": True, "deployment": self.spec["deploymentId"], "model": self.spec["model"],
                                 "runtime": self.loaded.runtime, "task": self.loaded.task, "pid": os.getpid()})
        if request.method != "POST" or not request.url.path.rstrip("/").endswith("/predict"):
            return JSONResponse({"error": "not found: POST /predict or GET /health", "code": "not_found"},
                                status_code=404)
        status, body = await serving.predict(await request.body(), request.query_params,
                                             max_pixels=int(self.spec["maxPixels"]), run=self._run)
        return Response(body, status_code=status, media_type="application/json")


def _fetch(spec: dict[str, Any]) -> bytes:
    response = httpx.get(spec["url"], timeout=600, follow_redirects=True)
    response.raise_for_status()
    data = response.content
    if hashlib.sha256(data).hexdigest() != spec["digest"]:
        raise RuntimeError("the model file arrived corrupted (its SHA-256 differs)")
    return data


def deploy(spec: dict[str, Any]) -> None:
    serve.start(http_options={"host": spec["serveHost"], "port": int(spec["servePort"])})
    env = {"YOLO_OFFLINE": "1", "OMP_NUM_THREADS": str(spec["cpu"]), "OMP_WAIT_POLICY": "PASSIVE"}
    if spec.get("pythonPath"):
        env["PYTHONPATH"] = spec["pythonPath"]
    app = Endpoint.options(
        ray_actor_options={"num_cpus": float(spec["cpu"]), "memory": float(spec["memoryGi"]) * 1024**3,
                           "runtime_env": {"env_vars": env}},
        autoscaling_config={"min_replicas": int(spec["minReplicas"]), "max_replicas": int(spec["maxReplicas"]),
                            "target_ongoing_requests": 2, "upscale_delay_s": 5, "downscale_delay_s": 60},
        max_ongoing_requests=max(8, 2 * int(spec["maxBatch"])),
    ).bind(_fetch(spec), spec)
    serve.run(app, name=spec["app"], route_prefix=spec["route"], blocking=False)
    print(f"lanner endpoint {spec['deploymentId']}: Ray Serve application {spec['app']} at {spec['route']}",
          flush=True)


def main() -> None:
    spec = json.loads(os.environ[serving.SPEC_ENV])
    action = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if action == "deploy":
            deploy(spec)
        elif action == "delete":
            serve.delete(spec["app"])
        else:
            raise SystemExit(f"usage: python -m lanner.deployments.ray_app deploy|delete (not {action!r})")
    except Exception as error:  # the job's log carries the reason the deployment then shows
        print(f"{serving.ERROR_PREFIX} Ray Serve: {type(error).__name__}: {str(error)[:400]}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
