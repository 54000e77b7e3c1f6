"""Shared steps of the orchestration end-to-end tests: a server with credit, a dataset, and waiting on runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import select
from ultralytics_platform import Platform

from lanner.billing.metering import charge_for
from lanner.db.leases import LeaseRow
from lanner.synthetic import make_detection_dataset
from lanner.training.models import Run
from tests.datasets.helpers import package, upload_dataset
from tests.servers import Server, lanner_cli, start_server, wait_for

TRAIN_ARGS = {"model": "yolo11n.yaml", "data": "ul://alice/datasets/shapes", "imgsz": 128, "batch": 8,
              "workers": 0, "plots": False}

# Lanner's additions to the SDK's TrainingStartResponse (the SDK's TypedDicts are closed).
LANNER_START_EXTRAS = frozenset({"runId", "gpuCount", "queued", "smokeRun", "holdCents", "estimate", "datasetVersion"})


def without(value: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in keys}


def server_with_credit(tmp_path: Path, usd: str = "5", tier: str = "free", **settings: str) -> tuple[Server, str]:
    home = tmp_path / "home"
    home.mkdir()
    lanner_cli(home, "users", "create", "alice", "--tier", tier)
    key = lanner_cli(home, "keys", "create", "alice")
    lanner_cli(home, "credits", "add", "alice", usd)
    server = start_server(home, LANNER_SUPERVISOR_INTERVAL_SECONDS="0.5", **settings)
    return server, key


def add_dataset(tmp_path: Path, platform: Platform, *, train: int = 16, val: int = 8) -> dict[str, Any]:
    archive = package(make_detection_dataset(tmp_path / "shapes", train=train, val=val, size=128).parent,
                      tmp_path / "zip")
    with httpx.Client(timeout=60) as http:
        dataset = upload_dataset(platform, http, "alice", "shapes", archive, timeout=60)
    assert dataset["status"] == "ready", dataset
    return dataset


def new_model(platform: Platform, project: str, name: str) -> dict[str, Any]:
    try:
        platform.projects.retrieve("alice", project)
    except Exception:
        platform.projects.create(owner="alice", project=project, name=project, visibility="private")
    return platform.models.create(body={"project": project, "model": name, "name": name})


def job(platform: Platform, project: str, model: str) -> dict[str, Any]:
    return platform.models.training("alice", project, model)["job"]


def settled(platform: Platform, project: str, model: str) -> dict[str, Any] | None:
    record = platform.models.retrieve("alice", project, model)["model"]
    cost = record.get("computeCost")
    return record if cost and cost.get("settled") else None


def run_ledger(platform: Platform, run_id: int) -> dict[str, list[float]]:
    """Amounts per ledger kind for one run, in micro-dollars (fractional cents x 10,000)."""
    out: dict[str, list[float]] = {}
    for tx in platform.billing.transactions()["transactions"]:
        if tx.get("runId") == str(run_id):
            amount = tx["availableCents"] if tx["kind"] in ("hold", "release", "refund") else tx["amountCents"]
            out.setdefault(tx["kind"], []).append(round(amount * 10_000))
    return out


def balance_micros(platform: Platform) -> int:
    return round(platform.billing.usage_summary()["creditsCents"] * 10_000)


def workers_alive(stand_in: Path) -> int:
    """The stand-in workers alive now (``LANNER_WORKER_PYTHON`` names it), whichever process launched them."""
    return sum(1 for process in psutil.process_iter(["cmdline", "status"])
               if str(stand_in) in (process.info["cmdline"] or []) and process.info["status"] != psutil.STATUS_ZOMBIE)


def eight_runs_at_once(db: Any, platforms: list[Platform], models: list[dict[str, Any]], stand_in: Path, *,
                       imgsz: int, on_started: Callable[[], None] | None = None) -> tuple[int, set[str], list[Any]]:
    """Start a run of each of 8 models at once, spread over ``platforms`` (several server processes), and sample
    the workers alive every 50 ms until every run ran and settled: the most alive at once, the supervisor's
    leaders seen (a lease that moved explains a second meter row) and the runs. ``on_started``: called once all
    8 were started."""
    peak, leaders, started = 0, set[str](), list[int]()
    sampling = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not sampling.is_set():
            peak = max(peak, workers_alive(stand_in))
            with db.session() as session:
                row = session.get(LeaseRow, "lanner-supervisor")
                leaders.add(row.holder if row else "")
            time.sleep(0.05)

    def start(n: int) -> None:
        response = platforms[n % len(platforms)].training.start(
            model_id=models[n]["id"], gpu_type="cpu",
            train_args={"model": "yolo11n.yaml", "epochs": 1, "imgsz": imgsz, "data": "ul://alice/datasets/shapes"})
        started.append(int(response["runId"]))

    def runs() -> list[Any]:
        with db.session() as session:
            return list(session.scalars(select(Run).where(Run.id.in_(started))))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        starters = [threading.Thread(target=start, args=(n,)) for n in range(8)]
        for thread in starters:
            thread.start()
        for thread in starters:
            thread.join()
        assert len(started) == 8
        if on_started is not None:
            on_started()
        wait_for(lambda: all(run.settled_at is not None and run.worker_exited_at is not None for run in runs()),
                 timeout=600, what="all 8 runs to run and settle", every=0.5)
    finally:
        sampling.set()
        sampler.join()
    return peak, leaders, runs()


def assert_metered_once(platform: Platform, runs: list[Any], leaders: set[str]) -> None:
    """Each run launched once, and metered by one process: at most one meter row in a 600 s meter interval plus
    the settlement's, the net charge exactly its billed seconds' price."""
    assert all(run.attempt == 1 and run.status == "failed" for run in runs)  # each launched once
    for run in runs:
        ledger = run_ledger(platform, run.id)
        assert len(ledger["charge"]) <= 2, (run.id, ledger, leaders)
        expected = charge_for(run.billed_seconds or 0.0, run.price_micros_per_hour or 0, run.gpu_count)
        assert expected > 0 and -sum(ledger["charge"]) - sum(ledger.get("refund", [0])) == expected, (run.id, ledger)
