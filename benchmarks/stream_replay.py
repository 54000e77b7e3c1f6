"""Streaming replay (issue 19): what one streamed training run costs ``lanner serve``, without the training.

    .venv/bin/python benchmarks/stream_replay.py [--runs 30] [--baseline REV --rounds 4] [--profile x.svg] [--no-doc]
    .venv/bin/python benchmarks/stream_replay.py --capture   # re-record benchmarks/stream_session.jsonl

benchmarks/streaming_overhead.py measures the end-to-end ratio, but a run there takes ~13 s and the server's
share of it (~0.1 s of CPU, a few requests the trainer waits for) drowns in the machine's noise. This replays the
requests of one real streamed run (``stream_session.jsonl``: every ``_send`` and checkpoint upload the trainer's
platform integration made in the workload of streaming_overhead.py, recorded with ``--capture`` through
benchmarks/trainer_probe) ``--runs`` times, back to back, against a fresh ``lanner serve``. The requests are made
by the trainer's own code (``ultralytics.utils.callbacks.platform._send`` and ``_upload_model``: a new client
and connection per request, the same bodies, the same upload of a file of the recorded size), one at a time, so
each request's wall time and the server's CPU seconds during it (``/proc``, every thread) can be told apart.

With ``--baseline REV``, rounds alternate between a server running ``lanner/`` as it was at REV (``git archive``)
and one running this checkout, each round a fresh server. Reported per run: the server's CPU seconds by request
kind and in all, and the wall time the training thread waits on the server (``training_started``, and the final
upload and ``training_complete`` in ``on_train_end``; ``console_output`` and ``epoch_end`` go out from the
trainer's thread pool); and the idle server's CPU per second (its background loops, which cost the same with and
without streaming). Written as the "### Server cost per streamed run (stream_replay.py)" part of the
"## Streaming overhead (issue 19)" section.
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

    def __init__(self) -> None:
        self.server: psutil.Process | None = None  # the server being measured (a fresh one per measurement)
        self.samples: list[tuple[str, float, float]] = []  # (kind, wall s, server CPU s)

    def cpu(self) -> float:
        assert self.server is not None
        times = self.server.cpu_times()
        return times.user + times.system

    def timed(self, kind_of: Any, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.server is None:  # not measuring (a server's start-up health checks)
                return function(*args, **kwargs)
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


Measured = dict[str, Any]  # {"runs": [{kind: [calls, wall s, server CPU s]}], "idle": server CPU s per idle s}


class Replayer:
    """The trainer's platform code in this process, pointed at one fresh server per ``measure``."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args, self.root = args, root
        self.session = [json.loads(line) for line in SESSION.read_text().splitlines()]
        os.environ.update(YOLO_CONFIG_DIR=str(root / "config"), NO_PROXY="127.0.0.1,localhost",
                          no_proxy="127.0.0.1,localhost")
        import httpx
        from ultralytics.utils import uploads
        from ultralytics.utils.callbacks import platform

        self.platform = platform
        self.weights = {}
        for call in self.session:
            if call["kind"] == "upload":  # a file of the recorded size, its bytes random (as weights are to a hash)
                self.weights[call["filename"]] = path = root / call["filename"]
                path.write_bytes(os.urandom(call["size"]))
        self.meter = Meter()
        httpx.Client.send = self.meter.timed(request_kind, httpx.Client.send)
        uploads.safe_upload = self.meter.timed(lambda *a, **k: "upload PUT", uploads.safe_upload)

    def measure(self, label: str, pythonpath: str | None = None, profile: Path | None = None) -> Measured:
        """A fresh ``lanner serve`` (its code from ``pythonpath`` when given; the stub with ``--stub``), two runs
        not counted, the idle server's CPU, then ``--runs`` runs."""
        home = self.root / label
        home.mkdir()
        servers: list[Server] = []
        try:
            server, env, api_key = start_lanner(home, servers, pythonpath=pythonpath)
            if self.args.stub:  # the same calls answered at once with nothing stored: the floor of every request
                server = start_stub(home, env, servers)
            assert server.proc is not None
            self.platform.PLATFORM_URL = server.url
            self.platform._api_key = api_key
            self.meter.server = psutil.Process(server.proc.pid)
            for warm in range(2):  # not counted: first statements, first imports on both sides
                replay_once(self.platform, self.session, f"warm-{warm}", self.weights)
            before = self.meter.cpu()
            time.sleep(self.args.idle)
            idle_rate = (self.meter.cpu() - before) / self.args.idle
            runs: list[dict[str, list[float]]] = []
            with FlameGraph(server.proc.pid, profile, gil=self.args.gil):
                for run in range(self.args.runs):
                    self.meter.samples.clear()
                    replay_once(self.platform, self.session, f"replay-{run}", self.weights)
                    kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
                    for kind, wall, cpu in self.meter.samples:
                        kinds[kind][0] += 1
                        kinds[kind][1] += wall
                        kinds[kind][2] += cpu
                    runs.append(dict(kinds))
            return {"runs": runs, "idle": idle_rate}
        finally:
            self.meter.server = None
            for running in servers:
                running.stop()


def baseline_tree(root: Path, revision: str) -> Path:
    """``lanner/`` as it was at ``revision`` (``git archive``), for the baseline server's PYTHONPATH."""
    tree = root / f"lanner-{revision}"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", revision, "lanner"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def replay(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="lanner-replay-"))
    try:
        replayer = Replayer(args, root)
        measured: dict[str, list[Measured]] = defaultdict(list)
        labels = ["after"]
        trees = {"after": None}
        if args.baseline:
            labels = ["before", "after"]
            trees["before"] = str(baseline_tree(root, args.baseline))
        for round_ in range(args.rounds):
            for label in labels if round_ % 2 == 0 else labels[::-1]:  # alternated: drift falls on both
                profile = args.profile if label == "after" and round_ == 0 else None
                if label == "before" and args.profile and round_ == 0 and args.profile_before:
                    profile = args.profile_before
                measured[label].append(replayer.measure(f"{label}-{round_}", trees[label], profile))
                print(f"round {round_ + 1} {label}: {summary(measured[label][-1])}", file=sys.stderr)
        text = report(args, measured)
        print(text)
        if args.json:
            args.json.write_text(json.dumps(measured))
        if not (args.no_doc or args.stub):
            write_part(PART, text)
            print(f"Wrote {PART!r} in {DOC.relative_to(ROOT)}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def totals(measured: list[Measured]) -> dict[str, Any]:
    """Per run over every round: calls and wall (the median run's), server CPU (the mean over the runs: ``/proc``
    counts in 10 ms ticks, which only a sum over many requests evens out), per kind and in all."""
    runs = [run for m in measured for run in m["runs"]]

    def per_run(kind: str | None, index: int) -> float:
        values = [sum(v[index] for k, v in run.items() if kind is None or k == kind) for run in runs]
        return statistics.fmean(values) if index == 2 else statistics.median(values)

    kinds = {k for run in runs for k in run}
    return {"runs": len(runs), "idle": statistics.fmean(m["idle"] for m in measured),
            "kinds": {k: (per_run(k, 0), per_run(k, 2), per_run(k, 1)) for k in kinds},
            "cpu": per_run(None, 2), "wall": per_run(None, 1),
            "waited": statistics.median(sum(v[1] for k, v in run.items() if k in SYNC) for run in runs)}


def summary(one: Measured) -> str:
    total = totals([one])
    return (f"server CPU {total['cpu'] * 1000:.0f} ms per run, the trainer waits {total['waited'] * 1000:.0f} ms, "
            f"idle {total['idle'] * 1000:.1f} ms/s")


def report(args: argparse.Namespace, measured: dict[str, list[Measured]]) -> str:
    labels = list(measured)
    total = {label: totals(measured[label]) for label in labels}
    kinds = sorted(total["after"]["kinds"], key=lambda k: -total["after"]["kinds"][k][1])
    head = " | ".join(f"{label}: CPU ms, wall ms" for label in labels)
    rows = [f"| request | per run | {head} |", "|---|---:|" + "---:|" * len(labels)]
    for kind in kinds:
        cells = " | ".join("{:.1f}, {:.1f}".format(total[label]["kinds"].get(kind, (0, 0.0, 0.0))[1] * 1000,
                                                   total[label]["kinds"].get(kind, (0, 0.0, 0.0))[2] * 1000)
                           for label in labels)
        rows.append(f"| {kind}{' (the trainer waits)' if kind in SYNC else ''} | "
                    f"{total['after']['kinds'][kind][0]:.0f} | {cells} |")
    rows.append("| **all** | | " + " | ".join(f"**{total[label]['cpu'] * 1000:.0f}**, {total[label]['wall'] * 1000:.0f}"
                                              for label in labels) + " |")
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    against = (f"`lanner/` at {args.baseline} (before) and at this commit (after), alternated over {args.rounds} "
               "rounds" if args.baseline else f"{args.rounds} round(s)")
    lines = [
        PART,
        "",
        f"The {sum(1 for _ in SESSION.read_text().splitlines())} calls of one recorded streamed run "
        "(`benchmarks/stream_session.jsonl`) made by the trainer's own platform code (a new client and "
        "connection per call, as the trainer makes them) against a fresh `lanner serve`, one at a time, "
        f"{args.runs} runs back to back per round (2 more first, not counted), {against}. The server's CPU is "
        "measured around each request (`/proc`, all its threads, so its background loops are in it too). "
        "Per run: wall, the median run's; CPU, the mean over the runs (`/proc` counts 10 ms ticks). On a shared "
        "machine the absolute numbers move by ±20 % with the load from other work (CPU seconds too: caches and "
        "frequency); compare columns of one table.",
        "",
        f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {ram_bytes() / 2**30:.1f} GiB RAM",
        f"- Date: {date}; commit {git_revision()}; load average after: {load}",
        f"- Command: `.venv/bin/python benchmarks/stream_replay.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        *rows,
        "",
    ]
    for label in labels:
        t = total[label]
        lines.append(f"{label.capitalize()}: **{t['cpu'] * 1000:.0f} ms** of server CPU per streamed run; the "
                     f"training thread waits **{t['waited'] * 1000:.0f} ms** on the server (the requests marked); "
                     f"the idle server spends {t['idle'] * 1000:.1f} ms of CPU per second (in both arms of the "
                     "end-to-end ratio).")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="Server cost of one streamed training run, replayed.")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds the idle server's CPU is measured")
    parser.add_argument("--baseline", help="a git revision: its lanner/ serves alternate rounds (before)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds (each: a fresh server per revision)")
    parser.add_argument("--profile", type=Path, help="py-spy flame graph of the server (this commit's, first round)")
    parser.add_argument("--profile-before", type=Path, help="the same of the baseline's server")
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
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be positive")
    sys.stdout.reconfigure(line_buffering=True)
    return capture(args) if args.capture else replay(args)


if __name__ == "__main__":
    sys.exit(main())
