"""Shared steps of the orchestration end-to-end tests: a server with credit, a dataset, and waiting on runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from ultralytics_platform import Platform

from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset
from tests.servers import Server, lanner_cli, start_server

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
