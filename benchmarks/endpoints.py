"""Dedicated endpoints: predict latency (p50, p99) and throughput at 1, 8 and 32 concurrent clients, PyTorch
against ONNX Runtime, in one run on one machine.

A real ``lanner serve`` (local executor) gets a YOLO11n built from its YAML (random weights, nothing
downloaded) as a model with weights; ``exports.create(format=onnx)`` makes its ONNX export through the export
worker; two deployments of it with the same resources (``cpu`` = the machine's cores, 2 GiB) are created, one
pinned to PyTorch (``runtime: pytorch``, a Lanner extension) and one served by ONNX Runtime (the default once
the export exists). Each client sends the same 640x480 JPEG through the SDK's route
(``POST /api/deployments/{owner}/{deployment}/predict``, multipart, the owner's key) as fast as it gets
answers; latency is measured by the client, end to end. One extra row per runtime sends straight to the serving
process (bypassing the server) with 1 client, to show what the server's authentication and forwarding cost.

    PYTHONPATH=. .venv/bin/python benchmarks/endpoints.py [--requests 32] [--imgsz 640]

Writes ``benchmarks/endpoints.json`` and the "Dedicated endpoints" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cv2
import httpx
import numpy as np

from benchmarks.common import (
    ROOT,
    Server,
    cpu_model,
    free_port,
    local_client,
    ram_bytes,
    run_cli,
    venv_bin,
    write_section,
)

OUT = Path(__file__).with_name("endpoints.json")
CLIENTS = (1, 8, 32)
TITLE = "## Dedicated endpoints (issue 16)"


def test_image(width: int = 640, height: int = 480) -> bytes:
    rng = np.random.default_rng(0)
    image = np.full((height, width, 3), 255, np.uint8)
    for _ in range(6):
        side = int(rng.integers(40, 160))
        x, y = int(rng.integers(0, width - side)), int(rng.integers(0, height - side))
        color = tuple(int(c) for c in rng.integers(0, 200, 3))
        cv2.rectangle(image, (x, y), (x + side, y + side), color, -1)
    return cv2.imencode(".jpg", image)[1].tobytes()


def nano_weights(folder: Path) -> Path:
    from ultralytics import YOLO  # start-up cost: only the benchmark's setup needs it

    path = folder / "yolo11n.pt"
    YOLO("yolo11n.yaml").save(str(path))
    return path


def attach(home: Path, url: str, weights: Path) -> None:
    from lanner.config import Settings
    from lanner.context import AppContext
    from tests.trained import attach_weights

    ctx = AppContext.from_settings(Settings(home=home, public_url=url))
    attach_weights(SimpleNamespace(state=SimpleNamespace(lanner=ctx)), SimpleNamespace(username="bench"), weights,
                   project="bench", model="nano")
    ctx.db.dispose()


def wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")


async def load(url: str, headers: dict[str, str], image: bytes, clients: int, requests: int,
               imgsz: int, direct: bool) -> tuple[list[float], int, float]:
    """``requests`` predicts over ``clients`` concurrent connections: (latencies in ms as the client saw them,
    errors, wall seconds)."""
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=300, limits=limits, trust_env=False) as client:
        async def one() -> None:
            nonlocal errors
            while not queue.empty():
                queue.get_nowait()
                started = time.perf_counter()
                if direct:
                    answer = await client.post(f"{url}/predict", params={"imgsz": imgsz}, content=image)
                else:
                    answer = await client.post(f"{url}/predict", headers=headers, data={"imgsz": str(imgsz)},
                                               files={"file": ("image.jpg", image, "image/jpeg")})
                latencies.append((time.perf_counter() - started) * 1e3)
                errors += answer.status_code != 200

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(clients)))
        return latencies, errors, time.perf_counter() - started


def summary(clients: int, latencies: list[float], errors: int, wall: float) -> dict[str, float]:
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, int(np.ceil(q * len(ordered))) - 1))]

    return {"clients": clients, "requests": len(ordered), "errors": errors, "p50_ms": round(pct(0.5), 1),
            "p99_ms": round(pct(0.99), 1), "mean_ms": round(float(np.mean(ordered)), 1),
            "throughput_rps": round(len(ordered) / wall, 2)}


def process_url(home: Path, slug: str) -> str:
    from sqlalchemy import select

    from lanner.config import Settings
    from lanner.db import Database
    from lanner.deployments.models import Deployment

    db = Database(Settings(home=home).resolved_database_url)
    try:
        with db.session() as session:
            return str(session.scalar(select(Deployment.url).where(Deployment.slug == slug)))
    finally:
        db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=32, help="requests per client count (at least 2 per client)")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=4, help="turns each runtime takes per row")
    options = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    cpu = max(c for c in (1, 2, 4, 6, 8) if c <= max(1, cores))
    image = test_image()
    results: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "cpu": cpu_model(), "cores": cores,
                               "ram_gib": round(ram_bytes() / 1024**3, 1), "python": platform.python_version(),
                               "imgsz": options.imgsz, "image": "640x480 JPEG", "deploymentCpu": cpu, "runs": [],
                               "loadBefore": round(os.getloadavg()[0], 2)}
    results["rounds"] = options.rounds
    from ultralytics_platform import Platform

    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        env = {**os.environ, "LANNER_HOME": str(home), "LANNER_API_RATE_LIMIT": "0",
               "LANNER_ENDPOINT_POLL_SECONDS": "0.5", "LANNER_SUPERVISOR_INTERVAL_SECONDS": "0",
               "LANNER_MAINTENANCE_INTERVAL_SECONDS": "0"}
        env["PYTHONPATH"] = env.get("PYTHONPATH") or str(ROOT)
        port = free_port()
        env["LANNER_PUBLIC_URL"] = f"http://127.0.0.1:{port}"
        run_cli(["users", "create", "bench"], env)
        key = run_cli(["keys", "create", "bench"], env)
        server = Server("lanner", [venv_bin("lanner"), "serve", "--port", str(port)], env, port,
                        Path(scratch) / "server.log")
        server.start()
        try:
            attach(home, server.url, nano_weights(Path(scratch)))
            platform_ = Platform(base_url=server.url, api_key=key, timeout=120)
            with local_client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as http:
                created = http.post("/api/deployments/bench", json={
                    "project": "bench", "model": "nano", "deployment": "nano-pytorch", "name": "PyTorch",
                    "region": "us-central1", "cpu": cpu, "memoryGi": 2, "runtime": "pytorch"})
                assert created.status_code == 201, created.text
            export = platform_.exports.create("bench", "bench", "nano", format="onnx",
                                              args={"imgsz": options.imgsz})
            wait(lambda: platform_.exports.retrieve("bench", "bench", "nano", export["id"])["export"]["status"]
                 == "completed", 600, "the ONNX export")
            platform_.deployments.create("bench", project="bench", model="nano", deployment="nano-onnx",
                                         name="ONNX Runtime", region="us-central1", cpu=cpu, memory_gi=2)
            for slug, runtime in (("nano-pytorch", "pytorch"), ("nano-onnx", "onnx")):
                ready = wait(lambda s=slug: (d := platform_.deployments.retrieve("bench", s)["deployment"])[
                    "status"] == "ready" and d, 300, f"{slug} to be ready")
                assert ready["runtime"] == runtime, ready
            headers = {"Authorization": f"Bearer {key}"}
            slugs = {"pytorch": "nano-pytorch", "onnx": "nano-onnx"}
            targets = {(runtime, path): (process_url(home, slug) if path == "process" else
                                         f"{server.url}/api/deployments/bench/{slug}")
                       for runtime, slug in slugs.items() for path in ("server", "process")}
            for runtime in slugs:  # warm-up
                asyncio.run(load(targets[(runtime, "server")], headers, image, 1, 5, options.imgsz, False))
            # The machine is shared: the runtimes take turns, in several rounds, so a burst of someone else's
            # work falls on both alike; each row pools its rounds.
            pooled: dict[tuple[str, str, int], tuple[list[float], int, float]] = {}
            plan = [(path, clients) for clients in CLIENTS for path in ("server",)] + [("process", 1)]
            for _ in range(options.rounds):
                for path, clients in plan:
                    for runtime in slugs:
                        count = max(options.requests, 2 * clients) // options.rounds
                        latencies, errors, wall = asyncio.run(load(targets[(runtime, path)], headers, image,
                                                                   clients, count, options.imgsz, path == "process"))
                        seen = pooled.get((runtime, path, clients), ([], 0, 0.0))
                        pooled[(runtime, path, clients)] = (seen[0] + latencies, seen[1] + errors, seen[2] + wall)
            for (runtime, path, clients), (latencies, errors, wall) in pooled.items():
                row = {"runtime": runtime, "path": path, **summary(clients, latencies, errors, wall)}
                results["runs"].append(row)
                print(row, flush=True)
        finally:
            server.stop()
            kill_endpoints(home)
    results["loadAfter"] = round(os.getloadavg()[0], 2)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    write_section(TITLE, section(results))


def kill_endpoints(home: Path) -> None:
    """The serving processes this run launched (they outlive the server by design)."""
    import signal

    from sqlalchemy import select

    from lanner.config import Settings
    from lanner.db import Database
    from lanner.deployments.models import Deployment

    db = Database(Settings(home=home).resolved_database_url)
    with db.session() as session:
        for external in session.scalars(select(Deployment.external_id).where(Deployment.external_id.is_not(None))):
            if external and external[0].isdigit():
                try:
                    os.killpg(int(external.split(":", 1)[0]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
    db.dispose()


def section(r: dict[str, Any]) -> str:
    rows = []
    for run in sorted(r["runs"], key=lambda x: (x["runtime"] != "pytorch", x["path"] != "server", x["clients"])):
        via = "server" if run["path"] == "server" else "process directly"
        rows.append(f"| {run['runtime']} | {via} | {run['clients']} | {run['requests']} | {run['p50_ms']} ms | "
                    f"{run['p99_ms']} ms | {run['throughput_rps']} | {run['errors']} |")
    by = {(x["runtime"], x["clients"]): x for x in r["runs"] if x["path"] == "server"}
    ratios = ", ".join(f"{c} client{'s' if c > 1 else ''}: "
                       f"{by[('pytorch', c)]['p50_ms'] / by[('onnx', c)]['p50_ms']:.2f}x"
                       for c in CLIENTS if ("pytorch", c) in by and ("onnx", c) in by)
    return f"""{TITLE}

`PYTHONPATH=. .venv/bin/python benchmarks/endpoints.py` (results in `benchmarks/endpoints.json`), {r['date']}, on
{r['cpu']} ({r['cores']} cores visible, {r['ram_gib']} GiB, Python {r['python']}; the machine is shared with
other test runs: 1-minute load average {r['loadBefore']} before, {r['loadAfter']} after).
YOLO11n from its YAML (random weights), served by a real `lanner serve` with the local executor: one deployment
pinned to PyTorch, one served by ONNX Runtime from the model's ONNX export (made by `exports.create`), each a
serving process with `cpu={r['deploymentCpu']}` (torch or ONNX Runtime intra-op threads) and the server's dynamic
batching. Every request is one {r['image']} at `imgsz={r['imgsz']}` through `POST /api/deployments/.../predict`
(multipart, the owner's key), timed by the client end to end; clients send their next request as soon as they
get an answer. "process directly" posts to the serving process itself, without the server in between. The two
runtimes take turns ({r.get('rounds', 1)} rounds of each row), since the machine is shared; a row pools its rounds.

| runtime | via | clients | requests | p50 | p99 | throughput (req/s) | errors |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

PyTorch p50 / ONNX Runtime p50 through the server:
{ratios}.
With more clients than cores, latency grows with the queue: throughput is the machine's, and p99 is mostly
waiting.
"""


if __name__ == "__main__":
    main()
