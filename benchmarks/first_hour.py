"""The first hour (issue 27) on this machine's CPU: how long ``lanner demo``'s starting model takes to train through
the normal queue, and how good a newcomer's first fine-tune of it is on the demo dataset.

    PYTHONPATH=. .venv/bin/python -m benchmarks.first_hour --epochs 30

Each run: a fresh ``LANNER_HOME``, ``lanner demo`` (the ``shapes`` dataset: 24 train and 8 val images of 160 px,
two classes; and the starting model queued: yolo11n on 200 other synthetic images of one class), ``lanner serve``
from this tree (local executor, CPU), the starting model's run awaited; then ``training.start`` through the SDK on
``ul://demo/datasets/shapes`` naming no model (so the server picks the starting model, as the dialog does),
``gpuType: cpu``, the given epochs at imgsz 160, batch 8. Reported: the starting model's run (wall seconds from
queue to completion, billed seconds, its own mAP50 on its validation images), and the fine-tune's billed seconds
(the trainer's time from its first report to its last, what "minutes of CPU training" means on the bill) and its
final mAP50 and mAP50-95 on the demo dataset's 8 validation images, as the trainer computed them.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from ultralytics_platform import Platform

from tests.servers import lanner_cli, start_server, wait_for


def _model(platform: Platform, project: str, slug: str) -> dict[str, Any]:
    return platform.models.retrieve("demo", project, slug)["model"]


def _done(platform: Platform, project: str, slug: str) -> dict[str, Any] | None:
    model = _model(platform, project, slug)
    return model if model["status"] in ("completed", "failed", "cancelled") and model.get("computeCost") else None


def run_once(epochs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="first-hour-") as folder:
        home = Path(folder) / "home"
        home.mkdir()
        printed = lanner_cli(home, "demo")
        key = re.search(r"API key:\s+(\S+)", printed).group(1)  # type: ignore[union-attr]
        queued = time.time()
        server = start_server(home)
        try:
            platform = Platform(base_url=server.url, api_key=key, timeout=60)
            starter = wait_for(lambda: _done(platform, "starter", "shapes-base"), timeout=3600,
                               what="the starting model", every=2)
            starter_wall = time.time() - queued
            platform.projects.create(owner="demo", project="first", name="first", visibility="private")
            model_id = platform.models.create(body={"project": "first", "model": "shapes", "name": "shapes"})["id"]
            platform.training.start(model_id=model_id, gpu_type="cpu", train_args={
                "data": "ul://demo/datasets/shapes", "epochs": epochs, "imgsz": 160, "batch": 8})
            tuned = wait_for(lambda: _done(platform, "first", "shapes"), timeout=3600, what="the fine-tune", every=2)
        finally:
            server.stop()
    return {
        "starter": {"status": starter["status"], "wallSeconds": round(starter_wall, 1),
                    "billedSeconds": starter["computeCost"]["billedSeconds"],
                    "mAP50": starter["metrics"].get("metrics/mAP50(B)")},
        "fineTune": {"status": tuned["status"], "startedFrom": tuned["trainArgs"]["model"], "epochs": epochs,
                     "billedSeconds": tuned["computeCost"]["billedSeconds"],
                     "mAP50": tuned["metrics"].get("metrics/mAP50(B)"),
                     "mAP50-95": tuned["metrics"].get("metrics/mAP50-95(B)")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.runs):
        print(json.dumps(run_once(args.epochs)), flush=True)


if __name__ == "__main__":
    main()
