"""Webhook ingest benchmark (issues 3 and 19): how many ``epoch_end`` events per second Lanner stores, against a
bare FastAPI endpoint that only parses them, and whether any acknowledged event is lost.

    .venv/bin/python benchmarks/webhook_ingest.py [--duration 15] [--rounds 3] [--connections 16]
                                                  [--worker-limit 1000000/minute] [--profile docs/profiles/x.svg]

What it does, all on 127.0.0.1:

1. Makes a throw-away LANNER_HOME (default SQLite database), a user and an API key through the ``lanner`` CLI,
   and starts ``lanner serve`` as a subprocess (request budgets off unless ``--worker-limit`` sets one).
2. Registers one simulated training run per connection (``training_started``, as the trainer sends it).
3. Drives ``epoch_end`` events at it with ``wrk`` (benchmarks/wrk_epoch_end.lua): one wrk thread per connection,
   each owning one model and counting that model's epochs up, so no two events share a (model, epoch) key.
   (``--wrk-threads`` fewer than connections reproduces other set-ups, but then connections share a thread's
   model and its loss accounting no longer holds.)
4. Stops Lanner and runs the same load against benchmarks/bare_app.py (parse only, store nothing), served the same
   way; ``--rounds`` times, alternating, each round's epochs in a range of their own.
5. Reads every model back through the official SDK (``ultralytics_platform.Platform``) and checks that each
   event wrk saw acknowledged with a 2xx is stored once and readable.
6. Prints the rounds and rewrites the "## Webhook ingest (issue 3)" section of docs/benchmarks.md.

``--profile PATH`` records Lanner with py-spy during the first round (and writes nothing to docs: sampling slows
the server). Every subprocess it starts is stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from common import (
    DOC,
    HOST,
    ROOT,
    FlameGraph,
    Server,
    cpu_model,
    free_port,
    local_client,
    ram_bytes,
    run_cli,
    venv_bin,
    verdict,
    write_section,
)

BENCH_DIR = ROOT / "benchmarks"
LUA_SCRIPT = BENCH_DIR / "wrk_epoch_end.lua"
SECTION = "## Webhook ingest (issue 3)"
WEBHOOK = "/api/webhooks/training/metrics"
OWNER = "bench"
PROJECT = "ingest"
RUN_EPOCHS = 1_000_000_000  # planned epochs: an epoch index at or past this would be taken for the final evaluation
ROUND_EPOCHS = 10_000_000  # each round's wrk counts its epochs up from round * ROUND_EPOCHS

# Targets (issue 19; issue 3 asked for 0.25 and 100 ms).
TARGET_RATIO = 0.5
TARGET_P99_MS = 50.0


# --- subprocesses --------------------------------------------------------------------------------------------

def ensure_wrk() -> str:
    found = shutil.which("wrk") or ("/usr/bin/wrk" if Path("/usr/bin/wrk").exists() else None)
    if found:
        return found
    print("wrk not found; installing it with apt-get", file=sys.stderr)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run([*sudo, "apt-get", "install", "-y", "wrk"], check=True)
    found = shutil.which("wrk")
    if not found:
        raise RuntimeError("wrk is not installed and apt-get could not install it")
    return found


# --- the load ------------------------------------------------------------------------------------------------

@dataclass
class Load:
    label: str
    requests_per_s: float
    duration_s: float
    requests: int
    ok: int
    codes: dict[str, int]
    socket_errors: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    threads: list[dict[str, Any]]
    body_bytes: int
    wrk_stdout: str
    server_cpu_s: float = 0.0  # CPU the server process used during the load (all its threads)

    @property
    def cpu_us_per_event(self) -> float:
        """The server's CPU per acknowledged event: what the work costs, however busy the machine is."""
        return self.server_cpu_s / self.ok * 1e6 if self.ok else 0.0

    @property
    def events_per_s(self) -> float:
        """Events acknowledged with a 2xx, per second."""
        return self.ok / self.duration_s if self.duration_s else 0.0

    @property
    def non_2xx(self) -> int:
        return self.requests - self.ok

    @property
    def errors(self) -> int:
        """Non-2xx answers plus socket errors (connect, read, write, timeout)."""
        return self.non_2xx + sum(self.socket_errors.values())

    def error_summary(self) -> str:
        parts = [f"HTTP {code}: {n}" for code, n in sorted(self.codes.items()) if not code.startswith("2")]
        parts += [f"{kind}: {n}" for kind, n in self.socket_errors.items() if n]
        return ", ".join(parts) or "none"


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _wrk_duration_ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not match:
        raise ValueError(f"unreadable wrk duration {text!r}")
    return float(match.group(1)) * _UNITS_MS[match.group(2)]


def parse_wrk(label: str, stdout: str) -> Load:
    result_line = next((line for line in stdout.splitlines() if line.startswith("BENCH_RESULT ")), None)
    if result_line is None:
        raise RuntimeError(f"wrk printed no BENCH_RESULT line:\n{stdout}")
    result = json.loads(result_line.removeprefix("BENCH_RESULT "))
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", stdout, re.M)
    # The --latency distribution, cross-checked against the exact values done() printed.
    dist = dict(re.findall(r"^\s+(50|90|99)(?:\.000)?%\s+(\S+)$", stdout, re.M))
    lat = result["latency_us"]
    p50_ms, p99_ms = lat["p50"] / 1000, lat["p99"] / 1000
    if "50" in dist and "99" in dist:
        for printed, exact in ((dist["50"], p50_ms), (dist["99"], p99_ms)):
            if abs(_wrk_duration_ms(printed) - exact) > max(0.05 * exact, 0.02):
                print(f"note: wrk printed {printed}, done() reported {exact:.3f}ms", file=sys.stderr)
    codes = {str(k): int(v) for k, v in result["codes"].items()}
    ok = sum(n for code, n in codes.items() if code.startswith("2"))
    errors = result["errors"]
    return Load(
        label=label,
        requests_per_s=float(rps.group(1)) if rps else result["requests"] / (result["duration_us"] / 1e6),
        duration_s=result["duration_us"] / 1e6,
        requests=int(result["requests"]),
        ok=ok,
        codes=codes,
        socket_errors={k: int(errors[k]) for k in ("connect", "read", "write", "timeout")},
        p50_ms=p50_ms,
        p90_ms=lat["p90"] / 1000,
        p99_ms=p99_ms,
        max_ms=lat["max"] / 1000,
        threads=result["threads"],
        body_bytes=int(result.get("body_bytes", 0)),
        wrk_stdout=stdout,
    )


def run_wrk(wrk: str, label: str, server: Server, *, connections: int, threads: int, duration: int,
            model_ids: list[str], api_key: str, epoch_start: int = 0, val_prefix: str = "val/") -> Load:
    url = server.url
    assert server.proc is not None
    process = psutil.Process(server.proc.pid)
    env = {**os.environ, "BENCH_MODEL_IDS": ",".join(model_ids), "BENCH_API_KEY": api_key,
           "BENCH_EPOCH_START": str(epoch_start), "BENCH_PATH": WEBHOOK, "BENCH_VAL_PREFIX": val_prefix}
    # One thread per connection: each connection (and its model) is then served strictly in order.
    argv = [wrk, "-t", str(threads or connections), "-c", str(connections), "-d", f"{duration}s", "--timeout", "10s",
            "--latency", "-s", str(LUA_SCRIPT), f"{url}{WEBHOOK}"]
    print(f"[{label}] {' '.join(argv[:-1])} {url}{WEBHOOK}", file=sys.stderr)
    cpu_before = sum(process.cpu_times()[:2])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=duration + 60)
    cpu = sum(process.cpu_times()[:2]) - cpu_before
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    load = parse_wrk(label, done.stdout)
    load.server_cpu_s = cpu
    return load


# --- Lanner setup and verification ---------------------------------------------------------------------------

def train_args(i: int) -> dict[str, str]:
    """``{k: str(v) for k, v in vars(trainer.args).items()}``, abridged, as the trainer sends it."""
    return {
        "task": "detect", "mode": "train", "model": "yolo11n.pt", "data": "ul://bench/datasets/coco8",
        "epochs": str(RUN_EPOCHS), "time": "None", "patience": "100", "batch": "16", "imgsz": "640",
        "save": "True", "save_period": "-1", "cache": "False", "device": "cpu", "workers": "8",
        "project": f"{OWNER}/{PROJECT}", "name": f"run-{i}", "exist_ok": "False", "pretrained": "True",
        "optimizer": "auto", "verbose": "True", "seed": "0", "deterministic": "True", "single_cls": "False",
        "rect": "False", "cos_lr": "False", "close_mosaic": "10", "resume": "False", "amp": "True",
        "fraction": "1.0", "profile": "False", "freeze": "None", "multi_scale": "False", "overlap_mask": "True",
        "mask_ratio": "4", "dropout": "0.0", "val": "True", "split": "val", "save_json": "False",
        "conf": "None", "iou": "0.7", "max_det": "300", "half": "False", "dnn": "False", "plots": "True",
        "lr0": "0.01", "lrf": "0.01", "momentum": "0.937", "weight_decay": "0.0005", "warmup_epochs": "3.0",
        "warmup_momentum": "0.8", "warmup_bias_lr": "0.1", "box": "7.5", "cls": "0.5", "dfl": "1.5",
        "hsv_h": "0.015", "hsv_s": "0.7", "hsv_v": "0.4", "degrees": "0.0", "translate": "0.1", "scale": "0.5",
        "fliplr": "0.5", "mosaic": "1.0", "mixup": "0.0", "copy_paste": "0.0", "auto_augment": "randaugment",
        "erasing": "0.4", "save_dir": f"runs/detect/run-{i}",
    }


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(), "os": platform.platform(), "host": "bench-node",
        "ultralytics": "8.4.190", "torch": "2.7.1+cpu", "cuda": None, "gpus": [],
        "cpu": {"model": cpu_model(), "count": os.cpu_count()}, "ram_gb": round(ram_bytes() / 2**30, 1),
        "git": {"branch": "main", "commit": "0000000", "dirty": False},
    }


def register_runs(url: str, api_key: str, count: int) -> list[dict[str, str]]:
    runs = []
    with local_client(headers={"Authorization": f"Bearer {api_key}"}) as client:
        for i in range(count):
            body = {"event": "training_started", "project": f"{OWNER}/{PROJECT}", "name": f"run-{i}",
                    "data": {"epochs": RUN_EPOCHS, "trainArgs": train_args(i), "device": "cpu",
                             "environment": environment()}}
            resp = client.post(f"{url}{WEBHOOK}", json=body)
            if resp.status_code != 200 or not resp.json().get("modelId"):
                raise RuntimeError(f"training_started {i}: HTTP {resp.status_code} {resp.text[:500]}")
            data = resp.json()
            runs.append({"modelId": data["modelId"], "slug": data["modelSlug"]})
    return runs


@dataclass
class Verification:
    expected: int = 0            # 2xx answers wrk received
    stored: int = 0              # rows in epoch_metrics for the bench models
    readable: int = 0            # trainResults entries the SDK returns
    lost: int = 0                # acknowledged epochs the SDK does not return
    unacked_stored: int = 0      # stored epochs that got no 2xx (requests in flight when wrk stopped)
    unacked_sent: int = 0        # requests sent without a 2xx answer
    foreign: int = 0             # returned epochs that were never sent
    miscounted: int = 0          # models where wrk's 2xx count and the script's own tally disagree
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.foreign == 0 and self.miscounted == 0 and self.readable == self.stored


def stored_count(db_path: Path, model_ids: list[str]) -> int:
    marks = ",".join("?" * len(model_ids))
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        sql = f"SELECT COUNT(*) FROM epoch_metrics WHERE model_id IN ({marks})"
        return int(db.execute(sql, model_ids).fetchone()[0])
    finally:
        db.close()


def settled_count(db_path: Path, model_ids: list[str], quiet_s: float = 1.5, limit_s: float = 30.0) -> int:
    """The stored count once the server has finished the requests wrk left in flight when it stopped (they are
    still queued or running in the server): unchanged for ``quiet_s``."""
    deadline = time.monotonic() + limit_s
    last, since = stored_count(db_path, model_ids), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = stored_count(db_path, model_ids)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def verify(url: str, api_key: str, db_path: Path, runs: list[dict[str, str]], loads: list[Load]) -> Verification:
    """Every epoch any round's wrk saw acknowledged is stored and readable through the SDK, once."""
    from ultralytics_platform import Platform

    check = Verification(expected=sum(load.ok for load in loads))
    by_model: dict[str, list[dict[str, Any]]] = {}
    for load in loads:
        for thread in load.threads:
            by_model.setdefault(thread["model"], []).append(thread)
    ids = [r["modelId"] for r in runs]
    check.stored = settled_count(db_path, ids)
    client = Platform(base_url=url, api_key=api_key, max_retries=0, http_client=local_client())
    try:
        for run in runs:
            results = client.models.retrieve(OWNER, PROJECT, run["slug"])["model"]["trainResults"]
            epochs = {int(r["epoch"]) for r in results}
            check.readable += len(results)
            if len(epochs) != len(results):
                check.foreign += len(results) - len(epochs)
                check.details.append(f"{run['slug']}: an epoch is stored more than once")
            threads = by_model.get(run["modelId"], [])
            sent: set[int] = set()
            unacked: set[int] = set()
            for thread in threads:
                sent_here = set(range(thread["first_epoch"], thread["first_epoch"] + thread["sent"]))
                unacked_here = set(thread["unacked"])
                if len(sent_here - unacked_here) != thread["ok"]:
                    check.miscounted += 1
                    check.details.append(f"{run['slug']}: wrk counted {thread['ok']} 2xx, the script "
                                         f"{len(sent_here - unacked_here)}")
                sent |= sent_here
                unacked |= unacked_here
            acked = sent - unacked
            check.unacked_sent += len(unacked)
            missing = acked - epochs
            check.lost += len(missing)
            check.unacked_stored += len(epochs & unacked)
            check.foreign += len(epochs - sent)
            if missing:
                check.details.append(f"{run['slug']}: {len(missing)} acknowledged epochs missing, "
                                     f"e.g. {sorted(missing)[:5]}")
    finally:
        client.close()
    return check


# --- report --------------------------------------------------------------------------------------------------

def machine_info(wrk: str) -> dict[str, str]:
    import fastapi
    import pydantic
    import sqlalchemy
    import uvicorn

    import lanner

    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or str(os.cpu_count())
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    wrk_version = subprocess.run([wrk, "-v"], capture_output=True, text=True).stdout.splitlines()
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lanner"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    revision = (git.stdout.strip() or "unknown") + (" + uncommitted changes under lanner/" if dirty else "")
    return {
        "nproc": nproc,
        "cpu": cpu_model(),
        "ram": f"{ram_bytes() / 2**30:.1f} GiB",
        "date": date,
        "python": platform.python_version(),
        "uvicorn": uvicorn.__version__,
        "fastapi": fastapi.__version__,
        "pydantic": pydantic.VERSION,
        "sqlalchemy": sqlalchemy.__version__,
        "sqlite": sqlite3.sqlite_version,
        "lanner": getattr(lanner, "__version__", "?"),
        "revision": revision,
        "wrk": " ".join(wrk_version[0].split()[:2]) if wrk_version else "wrk",
    }


def render(info: dict[str, str], command: str, rounds: list[tuple[Load, Load]], check: Verification,
           args: argparse.Namespace, body_bytes: int, loads: tuple[str, str]) -> str:
    ratios = [lanner.events_per_s / bare.events_per_s for lanner, bare in rounds]
    ratio = statistics.median(ratios)
    worst_p99 = max(lanner.p99_ms for lanner, _ in rounds)
    median_cpu = (statistics.median(lanner.cpu_us_per_event for lanner, _ in rounds),
                  statistics.median(bare.cpu_us_per_event for _, bare in rounds))
    rows = [
        "| round | Lanner events/s | p50 ms | p99 ms | CPU µs/event | bare events/s | p50 ms | p99 ms | "
        "CPU µs/event | Lanner / bare |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, (lanner, bare) in enumerate(rounds, 1):
        rows.append(f"| {i} | {lanner.events_per_s:,.0f} | {lanner.p50_ms:.1f} | {lanner.p99_ms:.1f} | "
                    f"{lanner.cpu_us_per_event:.0f} | {bare.events_per_s:,.0f} | {bare.p50_ms:.1f} | "
                    f"{bare.p99_ms:.1f} | {bare.cpu_us_per_event:.0f} | "
                    f"{lanner.events_per_s / bare.events_per_s:.2f} |")
    extra = ""
    if check.unacked_stored:
        extra = (f" The {check.unacked_stored} stored beyond the acknowledged count were requests still in flight "
                 "when wrk stopped: the server stored them, but wrk closed the connection before the answer.")
    limits = "off" if not args.worker_limit else f"`LANNER_WORKER_RATE_LIMIT={args.worker_limit}`"
    errors_lanner = sum(lanner.errors for lanner, _ in rounds)
    errors_bare = sum(bare.errors for _, bare in rounds)
    lines = [
        SECTION,
        "",
        f"Lanner's `POST {WEBHOOK}` against a bare FastAPI endpoint at the same path that parses the same body "
        "into the same pydantic models and stores nothing (`benchmarks/bare_app.py`), both served by one uvicorn "
        "process with `log_level=warning` and no access log. The load is `wrk` with "
        f"`benchmarks/wrk_epoch_end.lua`: {args.connections} connections, {args.wrk_threads or args.connections} "
        f"wrk threads, each connection the trainer of one run ({args.connections} runs registered with "
        "`training_started`) sending `epoch_end` events back to back with its epoch counting up; each body is "
        f"about {body_bytes:,} bytes (losses, mAP, lr, system metrics), as "
        "`ultralytics/utils/callbacks/platform.py` sends it. Rounds alternate Lanner and the bare app, "
        f"{args.duration} s of load each, one server up at a time (Lanner keeps its database between rounds). "
        f"Request budgets (rate limits): {limits}. wrk, the server and the bench share the machine.",
        "",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM",
        f"- Date: {info['date']}; load average before / after: {loads[0]} / {loads[1]}",
        f"- Python {info['python']}, uvicorn {info['uvicorn']}, FastAPI {info['fastapi']}, "
        f"pydantic {info['pydantic']}, SQLAlchemy {info['sqlalchemy']}, SQLite {info['sqlite']}, "
        f"{info['wrk']}, Lanner {info['lanner']} (commit {info['revision']})",
        f"- Command: `{command}`",
        "",
        *rows,
        "",
        f"Lanner / bare, median of {len(rounds)} rounds: **{ratio:.2f}** (range {min(ratios):.2f}–{max(ratios):.2f}). "
        f"CPU per event (the server process, all threads): Lanner {median_cpu[0]:.0f} µs, bare {median_cpu[1]:.0f} µs "
        f"(bare / Lanner {median_cpu[1] / median_cpu[0]:.2f}).",
        "",
        "Targets:",
        "",
        f"- Lanner ≥ {TARGET_RATIO:.2f}× the bare rate (median): {ratio:.2f} — {verdict(ratio >= TARGET_RATIO)}",
        f"- Lanner p99 < {TARGET_P99_MS:.0f} ms (worst round): {worst_p99:.1f} ms — "
        f"{verdict(worst_p99 < TARGET_P99_MS)}",
        f"- No event lost: {check.expected:,} acknowledged (2xx), {check.lost} of them missing; "
        f"{check.readable:,} of {check.stored:,} stored epochs readable through the SDK "
        f"(`Platform.models.retrieve(...)['model']['trainResults']`), none twice — {verdict(check.ok)}.{extra}",
        "",
        f"Errors (Lanner): {errors_lanner}. Errors (bare): {errors_bare}.",
        "",
    ]
    return "\n".join(lines)


def print_round(lanner: Load, bare: Load) -> None:
    ratio = lanner.events_per_s / bare.events_per_s if bare.events_per_s else 0.0
    for load in (lanner, bare):
        print(f"{load.label:<26}{load.events_per_s:>10,.0f} ev/s  p50 {load.p50_ms:6.1f}  p99 {load.p99_ms:6.1f}"
              f"  max {load.max_ms:7.1f} ms  CPU {load.cpu_us_per_event:5.0f} us/event  errors {load.errors} "
              f"({load.error_summary()})")
    cpu_ratio = bare.cpu_us_per_event / lanner.cpu_us_per_event if lanner.cpu_us_per_event else 0.0
    print(f"{'Lanner / bare':<26}{ratio:>10.2f}   (CPU per event, bare / Lanner: {cpu_ratio:.2f})")
    for thread in lanner.threads:
        if thread.get("first_error"):
            print(f"First error ({thread['model']}): {thread['first_error']}")
            break


def print_check(check: Verification) -> None:
    print(f"Expected (2xx):          {check.expected:,}")
    print(f"Stored (epoch_metrics):  {check.stored:,}  (of which in flight at stop, never acknowledged: "
          f"{check.unacked_stored})")
    print(f"Readable through SDK:    {check.readable:,}")
    print(f"Acknowledged but lost:   {check.lost}  -> {verdict(check.ok)}")
    for line in check.details[:10]:
        print(f"  {line}")


# --- main ----------------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description="Webhook ingest benchmark: Lanner vs a bare FastAPI endpoint.")
    parser.add_argument("--duration", type=int, default=15, help="seconds of load per endpoint and round")
    parser.add_argument("--rounds", type=int, default=3, help="Lanner/bare rounds, alternated (default 3)")
    parser.add_argument("--connections", type=int, default=16,
                        help="concurrent connections = simulated runs (default 16)")
    parser.add_argument("--wrk-threads", type=int, default=0,
                        help="wrk threads (default: one per connection; fewer share a model between connections)")
    parser.add_argument("--worker-limit", default="",
                        help="LANNER_WORKER_RATE_LIMIT for the server, e.g. 1000000/minute (default: off)")
    parser.add_argument("--no-val-losses", action="store_true",
                        help="bodies without validation losses, as a run with val=False sends them")
    parser.add_argument("--profile", type=Path, help="record Lanner with py-spy during its first round and write "
                        "this flame graph (the numbers are then not written to docs)")
    parser.add_argument("--gil", action="store_true", help="with --profile: sample only the thread holding the GIL")
    parser.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary LANNER_HOME")
    args = parser.parse_args()
    if args.connections < 1 or args.duration < 1 or args.rounds < 1 or args.wrk_threads < 0:
        parser.error("--duration, --rounds and --connections must be positive")
    if args.wrk_threads and args.connections % args.wrk_threads:
        parser.error("--connections must be a multiple of --wrk-threads")

    sys.stdout.reconfigure(line_buffering=True)  # keep the table after the progress lines on stderr
    wrk = ensure_wrk()
    command = ".venv/bin/python benchmarks/webhook_ingest.py " + " ".join(sys.argv[1:])
    home = Path(tempfile.mkdtemp(prefix="lanner-bench-"))
    servers: list[Server] = []
    try:
        lanner_port, bare_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
        # Throughput, not the rate limits: 16 runs report on one key, far past LANNER_WORKER_RATE_LIMIT.
        env.update(LANNER_API_RATE_LIMIT="", LANNER_WORKER_RATE_LIMIT=args.worker_limit)
        env.update(LANNER_HOME=str(home), LANNER_PUBLIC_URL=f"http://{HOST}:{lanner_port}",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")

        username = run_cli(["users", "create", OWNER], env)
        api_key = run_cli(["keys", "create", username], env)
        lanner = Server("lanner serve", [venv_bin("lanner"), "serve", "--host", HOST, "--port", str(lanner_port)],
                        env, lanner_port, home / "lanner-serve.log")
        bare = Server("bare app", [sys.executable, str(BENCH_DIR / "bare_app.py"), "--host", HOST,
                                   "--port", str(bare_port)], env, bare_port, home / "bare-app.log")
        servers += [lanner, bare]
        load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
        rounds: list[tuple[Load, Load]] = []
        val_prefix = "loss/" if args.no_val_losses else "val/"
        model_ids: list[str] = []
        runs: list[dict[str, str]] = []
        for i in range(args.rounds):
            # A fresh range of epochs per round (the database is kept), far below the planned epochs.
            epoch_start = i * ROUND_EPOCHS
            lanner.start()
            if not runs:
                runs = register_runs(lanner.url, api_key, args.connections)
                model_ids = [r["modelId"] for r in runs]
            assert lanner.proc is not None
            with FlameGraph(lanner.proc.pid, args.profile if i == 0 else None, gil=args.gil):
                lanner_load = run_wrk(wrk, "Lanner (SQLite)", lanner, connections=args.connections,
                                      threads=args.wrk_threads, duration=args.duration, model_ids=model_ids,
                                      api_key=api_key, epoch_start=epoch_start, val_prefix=val_prefix)
            settled_count(home / "lanner.db", model_ids)  # the requests left in flight are finished
            if lanner_load.errors:
                print(f"[lanner] server log tail:\n{lanner.log_tail()}", file=sys.stderr)
            lanner.stop()
            bare.start()
            bare_load = run_wrk(wrk, "Bare FastAPI (parse only)", bare, connections=args.connections,
                                threads=args.wrk_threads, duration=args.duration, model_ids=model_ids,
                                api_key=api_key, epoch_start=epoch_start, val_prefix=val_prefix)
            bare.stop()
            rounds.append((lanner_load, bare_load))
            print(f"\nround {i + 1}:")
            print_round(lanner_load, bare_load)
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
        lanner.start()
        check = verify(lanner.url, api_key, home / "lanner.db", runs, [lanner for lanner, _ in rounds])
        lanner.stop()

        print()
        print_check(check)
        ratios = [lanner.events_per_s / bare.events_per_s for lanner, bare in rounds]
        ratio = statistics.median(ratios)
        worst_p99 = max(lanner.p99_ms for lanner, _ in rounds)
        print(f"Lanner / bare, median of {len(rounds)}: {ratio:.2f} (target >= {TARGET_RATIO}: "
              f"{verdict(ratio >= TARGET_RATIO)}); worst Lanner p99 {worst_p99:.1f} ms (target < {TARGET_P99_MS:.0f})")
        if not args.no_doc and not args.profile:
            section = render(machine_info(wrk), command.strip(), rounds, check, args, rounds[0][0].body_bytes,
                             (load_before, load_after))
            write_section(SECTION, section)
            print(f"\nWrote {SECTION!r} in {DOC.relative_to(ROOT)}")
        passed = check.ok and ratio >= TARGET_RATIO and worst_p99 < TARGET_P99_MS
        return 0 if passed else 1
    finally:
        for server in servers:
            server.stop()
        if args.keep_home:
            print(f"LANNER_HOME kept at {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
