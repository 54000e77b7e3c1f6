"""End to end on the local executor: ``training.start`` through the SDK runs the real trainer in a worker
subprocess, and the ledger settles to exactly the model's ``computeCost``."""

from __future__ import annotations

import pytest
from ultralytics_platform import Platform

from tests.sdk_types import assert_sdk_type
from tests.servers import wait_for
from tests.training.orchestration import (
    LANNER_START_EXTRAS,
    TRAIN_ARGS,
    add_dataset,
    balance_micros,
    job,
    new_model,
    run_ledger,
    server_with_credit,
    settled,
    without,
)

pytestmark = pytest.mark.e2e


def test_training_start_runs_to_completion_and_settles_exactly(tmp_path):
    server, key = server_with_credit(tmp_path)
    try:
        platform = Platform(base_url=server.url, api_key=key, timeout=60)
        add_dataset(tmp_path, platform)
        target = new_model(platform, "orch", "local")
        before = balance_micros(platform)
        started = platform.training.start(model_id=target["id"], gpu_type="cpu",
                                          train_args={**TRAIN_ARGS, "epochs": 2})
        assert_sdk_type(without(started, LANNER_START_EXTRAS), "TrainingStartResponse")
        assert started["gpuType"] == "cpu" and started["estimatedCost"]["pricePerHour"] == 0.5
        assert started["billing"]["estimatedCostCents"] > 0

        done = wait_for(lambda: (j := job(platform, "orch", "local"))["status"] in ("completed", "failed") and j,
                        timeout=400, what="the run to finish", every=1)
        assert done["status"] == "completed", (done, (server.home / "runs").glob("*/attempt-1.log"))
        assert_sdk_type({"job": done}, "ModelsTrainingResponse")
        assert done["compute"]["gpuType"] == "cpu" and done["progress"]["currentEpoch"] == 2

        model = wait_for(lambda: settled(platform, "orch", "local"), timeout=60, what="settlement")
        assert model["hasWeights"] and len(model["trainResults"]) == 2
        files = platform.models.files("alice", "orch", "local")["files"]
        assert files and files[0]["name"].endswith(".pt")

        cost = round(model["computeCost"]["totalCost"] * 1_000_000)
        assert cost > 0 and model["computeCost"]["pricePerHour"] == 0.5
        # Per-second billing: each started second at $0.50/h, rounded up to the micro-dollar.
        seconds = model["computeCost"]["billedSeconds"]
        assert seconds == -(-model["computeCost"]["durationMs"] // 1000)
        assert cost == -(-seconds * 500_000 // 3600)
        ledger = run_ledger(platform, started["runId"])
        hold, release = -sum(ledger["hold"]), sum(ledger.get("release", [0]))
        assert -sum(ledger["charge"]) == cost
        assert hold - release == cost
        assert before - balance_micros(platform) == cost
        assert "refund" not in ledger
    finally:
        server.stop()
