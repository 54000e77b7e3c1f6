"""Streaming replay (issue 19): what one streamed training run costs ``lanner serve``, without the training.

    .venv/bin/python benchmarks/stream_replay.py [--runs 30] [--profile docs/profiles/x.svg] [--no-doc]
    .venv/bin/python benchmarks/stream_replay.py --capture   # re-record benchmarks/stream_session.jsonl

benchmarks/streaming_overhead.py measures the end-to-end ratio, but a run there takes ~13 s and the server's
share of it (~0.1 s of CPU, a few requests the trainer waits for) drowns in the machine's noise. This replays the
requests of one real streamed run (``stream_session.jsonl``: every ``_send`` and checkpoint upload the trainer's
platform integration made in the workload of streaming_overhead.py, recorded with ``--capture`` through
benchmarks/trainer_probe) ``--runs`` times, back to back, against a fresh ``lanner serve``. The requests are made
by the trainer's own code (``ultralytics.utils.callbacks.platform._send`` and ``_upload_model``: a new client
and connection per request, the same bodies, the same upload of a file of the recorded size), one at a time, so
each request's wall time and the server's CPU seconds during it (``/proc``, every thread) can be told apart.

Reported per run (medians over the runs): the server's CPU seconds by request kind and in all, and the wall time
the training thread waits on the server (``training_started``, and the final upload and ``training_complete`` in
``on_train_end``; ``console_output`` and ``epoch_end`` go out from the trainer's thread pool); and the idle
server's CPU per second (its background loops, which cost the same with and without streaming). Written as the
"### Server cost per streamed run (stream_replay.py)" part of the "## Streaming overhead (issue 19)" section.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil
from common import DOC, ROOT, FlameGraph, Server, cpu_model, ram_bytes
from streaming_overhead import (
    OWNER,
    PROBE_DIR,
    PROJECT,
    git_revision,
    make_dataset,
    start_lanner,
    start_stub,
    train_argv,
    trainer_env,
    write_part,
    yolo_settings,
)

SESSION = Path(__file__).resolve().parent / "stream_session.jsonl"
PART = "### Server cost per streamed run (stream_replay.py)"
SYNC = ("training_started", "upload slot", "upload PUT", "checkpoint_saved", "training_complete")


def capture(args: argparse.Namespace) -> int:
    """One real ``yolo train`` of the streaming_overhead workload, streamed to the stub platform with the trainer
    probe recording every call: the session this benchmark replays."""
    root = Path(tempfile.mkdtemp(prefix="lanner-replay-"))
    servers: list[Server] = []
    try:
        work = root / "work"
        work.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANNER_", "PYTEST_"))}
        stub = start_stub(root, env, servers)
        data = make_dataset(root)
        yolo_settings(work)
        trainer = trainer_env(work, stub.url, "stub-key")
        trainer.update(PYTHONPATH=str(PROBE_DIR), LANNER_TRAINER_PROBE=str(root / "probe.json"),
                       LANNER_TRAINER_CAPTURE=str(root / "session.jsonl"))
        done = subprocess.run(train_argv(args, data, "capture"), cwd=work, env=trainer, capture_output=True,
                              text=True, timeout=args.timeout)
        if done.returncode != 0:
            raise RuntimeError(f"yolo train failed:\n{(done.stdout + done.stderr)[-4000:]}")
        shutil.copyfile(root / "session.jsonl", SESSION)
        lines = SESSION.read_text().splitlines()
        print(f"{len(lines)} calls recorded in {SESSION.relative_to(ROOT)}")
        return 0
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


class Meter:
    """Wraps the trainer's HTTP calls in this process: each request's wall time and the server's CPU seconds
    while it ran, under the request's kind (the event of a metrics webhook, the upload slot, the PUT)."""

    def __init__(self, pid: int) -> None:
        self.server = psutil.Process(pid)
        self.samples: list[tuple[str, float, float]] = []  # (kind, wall s, server CPU s)
        self.kind = ""

    def cpu(self) -> float:
        times = self.server.cpu_times()
        return times.user + times.system

    def timed(self, kind_of: Any, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kind = kind_of(*args, **kwargs)
            cpu, wall = self.cpu(), time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.samples.append((kind, time.perf_counter() - wall, self.cpu() - cpu))
        return wrapper


def request_kind(client: Any, request: Any, *args: Any, **kwargs: Any) -> str:
    if request.url.path.endswith("/training/metrics"):
        return str(json.loads(request.content).get("event"))
    if request.url.path.endswith("/models/upload"):
        return "upload slot"
    return request.url.path


def replay_once(platform: Any, session: list[dict[str, Any]], name: str, weights: dict[str, Path]) -> None:
    """One run's calls, in the recorded order, with this run's model and run ids in place of the recorded ones."""
    project = f"{OWNER}/{PROJECT}"
    model_id = run_id = None
    artifact: dict[str, Any] | None = None
    for call in session:
        if call["kind"] == "upload":
            artifact = platform._upload_model(weights[call["filename"]], project, name, retry=0, model_id=model_id,
                                              run_id=run_id)
            if not artifact:
                raise RuntimeError(f"the upload of {call['filename']} failed")
            continue
        event, data = call["event"], dict(call["data"])
        if event == "checkpoint_saved":
            continue  # sent by _upload_model above, naming its own upload
        if "runId" in data:
            data["runId"] = run_id
        if event == "training_complete":
            results = {k: v for k, v in data["results"].items() if k not in ("modelPath", "modelSize")}
            data["results"] = {**results, **(artifact or {})}
        response = platform._send(event, data, project, name, model_id, retry=1)
        if not response:
            raise RuntimeError(f"{event} of {name} was refused (see the server log)")
        if event == "training_started":
            model_id, run_id = response["modelId"], response["runId"]


def replay(args: argparse.Namespace) -> int:
    session = [json.loads(line) for line in SESSION.read_text().splitlines()]
    root = Path(tempfile.mkdtemp(prefix="lanner-replay-"))
    servers: list[Server] = []
    try:
        server, env, api_key = start_lanner(root, servers)
        if args.stub:  # the same calls answered at once with nothing stored: the floor of every request
            server = start_stub(root, env, servers)
        assert server.proc is not None
        os.environ.update(YOLO_CONFIG_DIR=str(root / "config"), NO_PROXY="127.0.0.1,localhost",
                          no_proxy="127.0.0.1,localhost")
        import httpx
        from ultralytics.utils import uploads
        from ultralytics.utils.callbacks import platform

        platform.PLATFORM_URL = server.url
        platform._api_key = api_key
        weights = {}
        for call in session:
            if call["kind"] == "upload":  # a file of the recorded size, its bytes random (as weights are to a hash)
                weights[call["filename"]] = path = root / call["filename"]
                path.write_bytes(os.urandom(call["size"]))
        meter = Meter(server.proc.pid)
        httpx.Client.send = meter.timed(request_kind, httpx.Client.send)
        uploads.safe_upload = meter.timed(lambda *a, **k: "upload PUT", uploads.safe_upload)

        for warm in range(2):  # not counted: first statements, first imports on both sides
            replay_once(platform, session, f"warm-{warm}", weights)
        idle_s = args.idle
        before = meter.cpu()
        time.sleep(idle_s)
        idle_rate = (meter.cpu() - before) / idle_s
        per_run: list[dict[str, list[float]]] = []
        with FlameGraph(server.proc.pid, args.profile, gil=args.gil):
            for run in range(args.runs):
                meter.samples.clear()
                replay_once(platform, session, f"replay-{run}", weights)
                kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
                for kind, wall, cpu in meter.samples:
                    kinds[kind][0] += 1
                    kinds[kind][1] += wall
                    kinds[kind][2] += cpu
                per_run.append(dict(kinds))
        text = report(args, per_run, idle_rate)
        print(text)
        if args.json:
            args.json.write_text(json.dumps({"idle_cpu_s_per_s": idle_rate, "runs": per_run}))
        if not (args.no_doc or args.stub):
            write_part(PART, text)
            print(f"Wrote {PART!r} in {DOC.relative_to(ROOT)}")
        return 0
    finally:
        for running in servers:
            running.stop()
        shutil.rmtree(root, ignore_errors=True)


def report(args: argparse.Namespace, per_run: list[dict[str, list[float]]], idle_rate: float) -> str:
    kinds = sorted({k for run in per_run for k in run}, key=lambda k: -statistics.fmean(
        run.get(k, [0, 0.0, 0.0])[2] for run in per_run))

    def median(kind: str | None, index: int) -> float:
        """Calls and wall: the median run's; CPU: the mean over the runs (``/proc`` counts in 10 ms ticks, which
        only a sum over many requests evens out)."""
        values = [sum(v[index] for k, v in run.items() if kind is None or k == kind) for run in per_run]
        return statistics.fmean(values) if index == 2 else statistics.median(values)

    def sync_wall(run: dict[str, list[float]]) -> float:
        return sum(v[1] for k, v in run.items() if k in SYNC)

    rows = ["| request | per run | server CPU ms per run | wall ms per run |", "|---|---:|---:|---:|"]
    for kind in kinds:
        rows.append(f"| {kind}{' (the trainer waits)' if kind in SYNC else ''} | {median(kind, 0):.0f} | "
                    f"{median(kind, 2) * 1000:.1f} | {median(kind, 1) * 1000:.1f} |")
    total_cpu, total_wall = median(None, 2), median(None, 1)
    waited = statistics.median(sync_wall(run) for run in per_run)
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join([
        PART,
        "",
        f"The {sum(1 for _ in SESSION.read_text().splitlines())} calls of one recorded streamed run "
        "(`benchmarks/stream_session.jsonl`) made by the trainer's own platform code against a fresh "
        f"`lanner serve`, one at a time, {args.runs} runs back to back (2 more first, not counted); the server's "
        "CPU is measured around each request (`/proc`, all its threads, so its background loops are in it too). "
        "Medians over the runs (CPU: means, as `/proc` counts 10 ms ticks).",
        "",
        f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {ram_bytes() / 2**30:.1f} GiB RAM",
        f"- Date: {date}; commit {git_revision()}; load average after: {load}",
        f"- Command: `.venv/bin/python benchmarks/stream_replay.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        *rows,
        "",
        f"Per streamed run: **{total_cpu * 1000:.0f} ms** of server CPU, {total_wall * 1000:.0f} ms of request "
        f"wall time, of which the training thread waits **{waited * 1000:.0f} ms** (the requests marked). The idle "
        f"server: {idle_rate * 1000:.1f} ms of CPU per second (in both arms of the ratio).",
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description="Server cost of one streamed training run, replayed.")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds the idle server's CPU is measured")
    parser.add_argument("--profile", type=Path, help="py-spy flame graph of the server during the replay")
    parser.add_argument("--gil", action="store_true", help="only samples holding the GIL in the flame graph")
    parser.add_argument("--stub", action="store_true", help="replay against benchmarks/stub_platform.py instead "
                        "(what the same calls cost with no server work: the floor), no doc")
    parser.add_argument("--capture", action="store_true", help="record the session from one real run instead")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--json", type=Path, help="also write every run's numbers to this file")
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be positive")
    sys.stdout.reconfigure(line_buffering=True)
    return capture(args) if args.capture else replay(args)


if __name__ == "__main__":
    sys.exit(main())
