"""Shared inference (issue 16): what ``models.predict`` costs over calling ``YOLO.predict`` directly, and what
dynamic batching buys at 32 concurrent clients.

    .venv/bin/python benchmarks/inference_bench.py                 # prints the results
    .venv/bin/python benchmarks/inference_bench.py --write-doc     # and replaces the docs/benchmarks.md section

Two ``lanner serve`` processes from this tree share one throw-away LANNER_HOME (one user, one API key, rate
limits off): one with the default batching, one with ``LANNER_INFERENCE_MAX_BATCH=1`` (batching off); they are
never loaded at the same time. Models (nothing is downloaded) are uploaded the way ``ul cloud predict`` uploads a
checkpoint: ``yolo11n.yaml`` as built (random weights: no box passes conf 0.25, so this measures the fixed cost)
and a 3-class yolo11n with calibrated batch norms whose every image fills ``max_det`` (300 boxes: the most
conversion and JSON a detect answer can need).

1. Overhead, 1 client: a 640x480 JPEG, conf 0.25. ``YOLO(weights).predict(path)`` in this process (it reads and
   decodes the file too) against ``POST /api/models/.../predict`` with the same file from one keep-alive HTTP
   client, alternating call by call; p50 of each and their difference, and the overhead measured within each
   call (wall time minus the Ultralytics pipeline's own preprocess + inference + postprocess, the same code on
   both sides): the pipeline's time swings with the machine's load far more than what each side adds around it.
2. Throughput, 32 clients: each sends the same image back to back for a fixed time; requests/s with batching
   on and off, at imgsz 640, 320, 160 and 64, in alternating rounds (the median round of each mode is shown,
   every round's rate in the last column).
The clients, both servers and the direct calls share the machine (torch threads: every CPU, in each process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from common import HOST, ROOT, Server, free_port, verdict, write_section

sys.path.insert(0, str(ROOT))  # the test helpers build the models
from tests.inference.conftest import build_task_model, encoded, shapes_image  # noqa: E402

TITLE = "## Shared inference (issue 16)"
USER = "bench"
CLIENTS = 32
SIZES = (640, 320, 160, 64)


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "lanner.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"lanner {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update({"LANNER_HOME": str(home), "LANNER_API_RATE_LIMIT": "", "LANNER_INFERENCE_RATE_LIMIT": "",
                "LANNER_SUPERVISOR_INTERVAL_SECONDS": "0", "LANNER_MAINTENANCE_INTERVAL_SECONDS": "0",
                "PYTHONPATH": str(ROOT), "YOLO_OFFLINE": "1", **extra})
    return env


def _server(name: str, home: Path, work: Path, **extra: str) -> Server:
    port = free_port()
    env = _env(home, LANNER_PUBLIC_URL=f"http://{HOST}:{port}", **extra)
    return Server(name, [sys.executable, "-m", "lanner.cli", "serve", "--host", HOST, "--port", str(port)], env,
                  port, work / f"{name}.log")


def _models(work: Path) -> dict[str, Path]:
    # the benchmark's own models: seconds of torch import, once
    from ultralytics import YOLO

    plain = work / "yolo11n.pt"
    YOLO("yolo11n.yaml").save(str(plain))
    return {"yolo11n": plain, "busy": build_task_model("detect", work / "busy.pt")}


def _upload(url: str, key: str, models: dict[str, Path]) -> None:
    # the official CLI's own upload (models.create, signed URL, PUT, upload.complete)
    from ultralytics_platform import Platform
    from ultralytics_platform.cli import upload_model

    client = Platform(base_url=url, api_key=key, timeout=120)
    client.projects.create(owner=USER, project="bench", name="bench", visibility="private")
    for path in models.values():
        upload_model(client, path, USER, "bench")


def _predict_url(server: Server, model: str) -> str:
    return f"{server.url}/api/models/{USER}/bench/{model}/predict"


OVERHEAD_CASES = (("yolo11n", 640), ("busy", 640), ("yolo11n", 160))


def overhead(server: Server, key: str, models: dict[str, Path], image: Path, *, calls: int) -> list[dict[str, Any]]:
    """Per case: wall-clock p50 of ``YOLO.predict`` and of ``models.predict``, their difference, and the same
    difference measured inside each call: wall time minus the Ultralytics pipeline's own time (preprocess,
    inference, postprocess, as ``Results.speed`` and the answer's ``speed`` report them; the same code runs in
    both). The pipeline dominates the wall time and swings with the machine's load; what is left is what each
    side adds around it, so the within-call figure holds still where the difference of p50s does not."""
    # torch and Ultralytics: the direct calls run in this process
    from ultralytics import YOLO

    out = []
    data = image.read_bytes()
    with httpx.Client(trust_env=False, timeout=120, headers={"Authorization": f"Bearer {key}"}) as client:
        for name, imgsz in OVERHEAD_CASES:
            direct_model = YOLO(models[name])
            url = _predict_url(server, name)
            fields = {"imgsz": str(imgsz), "conf": "0.25"}

            def direct_call(direct_model: Any = direct_model, imgsz: int = imgsz) -> tuple[float, float]:
                start = time.perf_counter()
                result = direct_model.predict(str(image), imgsz=imgsz, conf=0.25, verbose=False)[0]
                return (time.perf_counter() - start) * 1e3, sum(result.speed.values())

            def served_call(url: str = url, fields: dict[str, str] = fields) -> tuple[float, float, int]:
                start = time.perf_counter()
                answer = client.post(url, files={"file": ("img.jpg", data)}, data=fields)
                wall = (time.perf_counter() - start) * 1e3
                answer.raise_for_status()
                entry = answer.json()["images"][0]
                return wall, sum(entry["speed"].values()), len(entry["results"])

            for _ in range(3):  # warm-up: first load, first forward pass
                direct_call()
                served_call()
            direct, served, boxes = [], [], 0
            for _ in range(calls):  # alternating call by call: both see the same machine load
                direct.append(direct_call())
                wall, pipeline, boxes = served_call()
                served.append((wall, pipeline))
            row = {"model": name, "imgsz": imgsz, "boxes": boxes, "samples": calls,
                   "direct_p50": statistics.median(w for w, _ in direct),
                   "served_p50": statistics.median(w for w, _ in served),
                   "direct_around": statistics.median(w - p for w, p in direct),
                   "served_around": statistics.median(w - p for w, p in served)}
            row["overhead"] = row["served_p50"] - row["direct_p50"]
            row["within_call"] = row["served_around"] - row["direct_around"]
            out.append(row)
    return out


async def _load(url: str, key: str, data: bytes, imgsz: int, seconds: float, clients: int = CLIENTS
                ) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx.AsyncClient(trust_env=False, timeout=300, limits=limits,
                                 headers={"Authorization": f"Bearer {key}"}) as client:
        async def one() -> None:
            response = await client.post(url, files={"file": ("img.jpg", data)}, data={"imgsz": str(imgsz)})
            response.raise_for_status()

        await asyncio.gather(*[one() for _ in range(clients)])  # warm: connections open, lanes busy
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                try:
                    await one()
                    latencies.append(time.perf_counter() - start)
                except httpx.HTTPError:
                    errors += 1

        began = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(clients)])
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {"rps": len(latencies) / elapsed, "p50": latencies[len(latencies) // 2] * 1e3 if latencies else 0.0,
            "p99": latencies[int(len(latencies) * 0.99)] * 1e3 if latencies else 0.0, "errors": errors,
            "requests": len(latencies)}


def throughput(on: Server, off: Server, key: str, image: Path, *, seconds: float, rounds: int) -> dict[int, Any]:
    data = image.read_bytes()
    out: dict[int, Any] = {}
    for imgsz in SIZES:
        runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
        for _ in range(rounds):
            for mode, server in (("off", off), ("on", on)):
                runs[mode].append(asyncio.run(_load(_predict_url(server, "yolo11n"), key, data, imgsz, seconds)))
        middle = {mode: sorted(values, key=lambda r: r["rps"])[len(values) // 2] for mode, values in runs.items()}
        out[imgsz] = {**middle, "ratio": middle["on"]["rps"] / middle["off"]["rps"],
                      "all": {mode: [round(r["rps"], 1) for r in values] for mode, values in runs.items()}}
    return out


def _lscpu() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    except OSError:
        return "lscpu unavailable"
    keep = ("Architecture", "CPU(s)", "Model name", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
            "L2 cache", "L3 cache", "Flags")
    picked = []
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() in keep:
            value = value.strip()
            if name.strip() == "Flags":
                value = " ".join(f for f in value.split() if f.startswith(("avx", "fma", "amx")))
            picked.append(f"{name.strip()}: {value}")
    return "; ".join(picked)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def render(results: dict[str, Any]) -> str:
    over, flow = results["overhead"], results["throughput"]
    lines = [TITLE, "", __doc__.split("\n\n", 2)[2].strip(), "",
             f"- Machine (`lscpu`): {results['lscpu']}; {results['ram_gib']:.1f} GiB RAM; load average "
             f"{results['load_before']} before, {results['load_after']} after (other users' tests share it)",
             f"- Date: {results['date']}; Lanner commit {results['commit']}; torch {results['torch']}, "
             f"ultralytics {results['ultralytics']}",
             f"- Command: `{results['command']}`", "",
             f"### Overhead, 1 client (p50 of {over[0]['samples']} alternating calls each)", "",
             "| model | imgsz | boxes per answer | `YOLO.predict` p50 ms | `models.predict` p50 ms | difference of "
             "p50s ms | around the pipeline: `YOLO.predict` / `models.predict` ms | overhead within calls ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in over:
        lines.append(f"| {row['model']} | {row['imgsz']} | {row['boxes']} | {row['direct_p50']:.1f} | "
                     f"{row['served_p50']:.1f} | {row['overhead']:+.1f} | {row['direct_around']:.1f} / "
                     f"{row['served_around']:.1f} | **{row['within_call']:+.1f}** |")
    lines += ["", "### Throughput, 32 concurrent clients (yolo11n, one 640x480 JPEG)", "",
              "| imgsz | batching off req/s | batching on req/s | on / off | p50 ms off / on | p99 ms off / on | "
              "errors | every round, off; on |", "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for imgsz, row in flow.items():
        off, on = row["off"], row["on"]
        rounds = f"{', '.join(map(str, row['all']['off']))}; {', '.join(map(str, row['all']['on']))}"
        lines.append(f"| {imgsz} | {off['rps']:.2f} | {on['rps']:.2f} | **{row['ratio']:.2f}x** | "
                     f"{off['p50']:.0f} / {on['p50']:.0f} | {off['p99']:.0f} / {on['p99']:.0f} | "
                     f"{off['errors'] + on['errors']} | {rounds} |")
    worst = max(row["within_call"] for row in over)
    lines += ["", "Targets:", "",
              f"- overhead p50 ≤ 5 ms (within calls): {worst:+.1f} ms at worst — {verdict(worst <= 5.0)}"]
    for imgsz, row in flow.items():
        lines.append(f"- batching ≥ 1.5x at imgsz {imgsz}: {row['ratio']:.2f}x — {verdict(row['ratio'] >= 1.5)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="load time per throughput run")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds per throughput case")
    parser.add_argument("--calls", type=int, default=100, help="calls of each kind per overhead case")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lanner-inference-bench-"))
    home = work / "home"
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    servers: list[Server] = []
    try:
        _cli(_env(home), "users", "create", USER)
        key = _cli(_env(home), "keys", "create", USER)
        models = _models(work)
        image = work / "img.jpg"
        image.write_bytes(encoded(shapes_image(640, 480, seed=1)))
        on = _server("batching-on", home, work)
        off = _server("batching-off", home, work, LANNER_INFERENCE_MAX_BATCH="1")
        servers = [on, off]
        for server in servers:
            server.start()
        _upload(on.url, key, models)
        over = overhead(on, key, models, image, calls=args.calls)
        flow = {} if args.skip_throughput else throughput(on, off, key, image, seconds=args.seconds,
                                                          rounds=args.rounds)
    finally:
        for server in servers:
            server.stop()
    import torch  # noqa: I001  (loaded above by the direct calls; only versions are read)
    import ultralytics

    results = {"overhead": over, "throughput": flow, "lscpu": _lscpu(), "ram_gib": os.sysconf("SC_PAGE_SIZE") *
               os.sysconf("SC_PHYS_PAGES") / 2**30, "load_before": load_before,
               "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
               "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": _commit(),
               "torch": torch.__version__.split("+")[0], "ultralytics": ultralytics.__version__,
               "command": "python benchmarks/inference_bench.py " + " ".join(sys.argv[1:])}
    print(json.dumps({k: v for k, v in results.items() if k != "lscpu"}, indent=2, default=str))
    section = render(results)
    print(section)
    if args.write_doc:
        write_section(TITLE, section)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
