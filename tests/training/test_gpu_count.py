"""``gpuCount``: a run on several GPUs of one type on one node. Refused outside 1-8, as a non-integer, on the CPU
and above what this server's machine has; priced, held, metered and settled as that many one-GPU runs (the ledger
to the micro-dollar); estimated per count; scheduled with all its devices at once, the trainer told
``device=0,1,...``."""

from __future__ import annotations

import json
import math
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from lanner.billing import service as billing
from lanner.billing.metering import charge_for
from lanner.billing.models import LedgerPosting
from lanner.config import Settings
from lanner.db import utcnow
from lanner.training import charging as charging_module
from lanner.training.executors.local import LocalExecutor
from lanner.training.models import Run
from tests.sdk_types import assert_sdk_type
from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import credit

H100 = 3_290_000  # h100-sxm: $3.29 per GPU-hour, in micro-dollars


def start(client: Any, account: Any, model_id: str, **body: Any) -> Any:
    return client.post("/api/training/start", headers=account.headers,
                       json={"modelId": model_id, "gpuType": "h100-sxm", "trainArgs": ARGS, **body})


def run_of(app: Any, run_id: int) -> Run:
    with app.state.lanner.db.session() as session:
        run = session.get(Run, run_id)
        session.expunge(run)
        return run


@pytest.mark.parametrize("count", [0, 9, 2.5, 2.0, "2", True, None])
def test_a_count_outside_one_to_eight_or_not_an_integer_is_422_naming_it(shapes, app, alice, client, fake_executor,
                                                                          count):
    credit(app, alice, 100_000_000)
    model_id = new_model(shapes, "bad")
    response = start(client, alice, model_id, gpuCount=count)
    assert response.status_code == 422 and response.json()["code"] == "invalid"
    assert response.json()["error"].startswith("gpuCount: ")
    estimate = client.post("/api/training/estimate", headers=alice.headers, json={
        "model": "yolo11n.yaml", "imageCount": {"train": 100}, "gpuCount": count})
    assert estimate.status_code == 422 and estimate.json()["error"].startswith("gpuCount: ")
    with app.state.lanner.db.session() as session:  # nothing held, nothing queued
        assert session.scalar(select(func.count()).select_from(Run)) == 0


def test_the_cpu_trains_on_one_device(shapes, app, alice, client, fake_executor):
    credit(app, alice, 100_000_000)
    response = start(client, alice, new_model(shapes, "host"), gpuType="cpu", gpuCount=2)
    assert response.status_code == 422
    assert response.json()["error"] == "gpuCount: CPU (host) trains on one device; give gpuCount 1"


def test_two_gpus_are_held_metered_and_settled_as_exactly_two_runs_of_one(shapes, app, alice, client, supervisor,
                                                                          fake_executor, monkeypatch):
    topup = 100_000_000
    credit(app, alice, topup)
    one = start(client, alice, new_model(shapes, "one")).json()
    two = start(client, alice, new_model(shapes, "two"), gpuCount=2).json()
    assert (one["gpuCount"], two["gpuCount"]) == (1, 2)
    assert one["estimatedCost"]["pricePerHour"] == 3.29 and two["estimatedCost"]["pricePerHour"] == 6.58
    assert run_of(app, one["runId"]).price_micros_per_hour == H100
    assert run_of(app, two["runId"]).price_micros_per_hour == 2 * H100 and run_of(app, two["runId"]).gpu_count == 2
    # The hold is the 2-GPU estimate's high end; twice the price for under half the epochs' time.
    with app.state.lanner.db.session() as session:
        held_two = billing.run_held(session, two["runId"])
        held_one = billing.run_held(session, one["runId"])
    assert held_two == billing.cents_to_micros(math.ceil(two["estimate"]["costCents"]["high"]))
    assert two["holdCents"] == math.ceil(two["estimate"]["costCents"]["high"])
    assert held_one < held_two < 2 * held_one

    supervisor.run_once()  # both launch; the fake executor records what each asked for
    specs = {spec.run_id: spec for spec in fake_executor.launched}
    assert (specs[one["runId"]].gpu_count, specs[two["runId"]].gpu_count) == (1, 2)
    assert json.loads(specs[one["runId"]].env["LANNER_WORKER_SPEC"])["device"] == "auto"
    assert json.loads(specs[two["runId"]].env["LANNER_WORKER_SPEC"])["device"] == "0,1"

    # The same seconds for both. 1205 s and 1805 s at $3.29 are where rounding the 2-GPU price as one amount
    # would bill a micro-dollar less than two runs of one: the ledger must say exactly twice.
    began = utcnow() - timedelta(seconds=2000)
    with app.state.lanner.db.session() as session:
        session.execute(update(Run).where(Run.id.in_([one["runId"], two["runId"]]))
                        .values(attempt_started_at=began, last_event_at=utcnow()))
    monkeypatch.setattr(charging_module, "utcnow", lambda: began + timedelta(seconds=1205))
    supervisor.charging.meter()
    assert charged(app, one["runId"]) == charge_for(1205, H100)
    assert charged(app, two["runId"]) == 2 * charge_for(1205, H100)
    assert charge_for(1205, 2 * H100) == 2 * charge_for(1205, H100) - 1  # the one amount's rounding, avoided

    for name in ("one", "two"):
        assert client.delete(f"/api/models/alice/p/{name}/training", headers=alice.headers).status_code == 200
    with app.state.lanner.db.session() as session:
        session.execute(update(Run).where(Run.id.in_([one["runId"], two["runId"]]))
                        .values(completed_at=began + timedelta(seconds=1805)))
    supervisor.run_once()  # settle: charged to the end, the rest of each hold released
    assert run_of(app, two["runId"]).settled_at is not None and run_of(app, two["runId"]).billed_seconds == 1805
    assert charged(app, one["runId"]) == charge_for(1805, H100)
    assert charged(app, two["runId"]) == 2 * charge_for(1805, H100) == charge_for(1805, 2 * H100) + 1
    with app.state.lanner.db.session() as session:
        assert billing.run_held(session, one["runId"]) == billing.run_held(session, two["runId"]) == 0
        assert billing.balances(session, user_id=alice.user_id).available == topup - 3 * charge_for(1805, H100)
        assert session.scalar(select(func.sum(LedgerPosting.amount_micros))) == 0  # double entry balances


def charged(app: Any, run_id: int) -> int:
    with app.state.lanner.db.session() as session:
        return billing.run_charged(session, run_id)


def test_the_job_and_the_model_show_the_count(shapes, app, alice, client, supervisor):
    credit(app, alice, 100_000_000)
    start(client, alice, new_model(shapes, "pair"), gpuCount=2)
    start(client, alice, new_model(shapes, "solo"))
    supervisor.run_once()
    solo = assert_sdk_type(shapes.models.training("alice", "p", "solo"), "ModelsTrainingResponse")["job"]
    assert "gpuCount" not in solo["compute"]  # one GPU: the SDK's exact shape
    assert shapes.models.retrieve("alice", "p", "solo")["model"]["computeCost"]["gpuCount"] == 1
    job = shapes.models.training("alice", "p", "pair")["job"]
    assert job["compute"] == {"gpuType": "h100-sxm", "gpuDisplayName": "NVIDIA H100 SXM5", "gpuMemoryGb": 80.0,
                              "gpuCount": 2}
    cost = shapes.models.retrieve("alice", "p", "pair")["model"]["computeCost"]
    assert cost["pricePerHour"] == 6.58 and cost["gpuCount"] == 2


def test_the_estimate_endpoint_answers_for_the_count(shapes, app, alice, client, fake_executor):
    body = {"model": "yolo11n.yaml", "dataset": "ul://alice/datasets/shapes", "gpuTypes": ["h100-sxm"],
            "trainArgs": {"epochs": 10, "imgsz": 96, "batch": 8}}
    one = client.post("/api/training/estimate", headers=alice.headers, json=body).json()["estimates"][0]
    four = client.post("/api/training/estimate", headers=alice.headers,
                       json={**body, "gpuCount": 4}).json()["estimates"][0]
    assert (one["gpuCount"], four["gpuCount"], four["batchPerGpu"]) == (1, 4, 2)
    assert four["pricePerHour"] == 13.16 and four["scaling"]["speedup"] == 3.4
    assert "an assumption until runs on several NVIDIA H100 SXM5 GPUs are measured" in four["scaling"]["assumption"]
    assert four["epochSeconds"]["value"] < one["epochSeconds"]["value"]
    refused = client.post("/api/training/estimate", headers=alice.headers,
                          json={**body, "gpuCount": 2, "trainArgs": {"batch": -1}})
    assert refused.status_code == 400 and refused.json()["error"].startswith("trainArgs.batch: AutoBatch")


# ------------------------------------------------------------------- the local executor, with its real processes


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    """The worker program is a stand-in that prints what the executor gave it and waits: the real worker would
    start ``yolo train`` on GPUs this machine does not have."""
    stand_in = tmp_path / "worker-stand-in"
    stand_in.write_text('#!/bin/sh\necho "visible=$CUDA_VISIBLE_DEVICES spec=$LANNER_WORKER_SPEC"\nexec sleep 60\n')
    stand_in.chmod(0o755)
    return settings.model_copy(update={"worker_python": str(stand_in)})


@pytest.fixture
def local(app: Any, tmp_path: Path) -> Any:
    """The real local executor on a machine with three H100s (NVML's answer, as ``discover_gpus`` gives it)."""
    executor = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={"h100-sxm": ["0", "1", "2"]})
    app.state.training.use_executor(executor)
    yield executor
    with app.state.lanner.db.session() as session:  # no worker outlives its test
        for external_id in session.scalars(select(Run.external_id).where(Run.external_id.is_not(None))):
            executor.kill(external_id)


def test_the_local_executor_reserves_the_runs_devices_together(shapes, app, alice, client, local):
    supervisor = app.state.training.supervisor
    credit(app, alice, 100_000_000)
    refused = start(client, alice, new_model(shapes, "four"), gpuCount=4)
    assert refused.status_code == 422 and refused.json()["gpuCountAvailable"] == 3
    assert refused.json()["error"] == "gpuCount: this server has 3 NVIDIA H100 SXM5 on one machine, not 4"

    pair = start(client, alice, new_model(shapes, "pair"), gpuCount=2).json()
    supervisor.run_once()
    run = run_of(app, pair["runId"])
    # devices 0 and 1 reserved
    assert run.status == "starting" and run.external_id.partition("@")[0].endswith(":h100-sxm:0,1")
    assert local.capacity()["h100-sxm"].free == 1 and local.free_devices("h100-sxm") == ["2"]
    deadline = time.time() + 30
    while "visible=" not in local.log_tail(run.external_id) and time.time() < deadline:
        time.sleep(0.1)
    line = local.log_tail(run.external_id)
    assert line.startswith("visible=0,1 spec=")
    assert json.loads(line.split("spec=", 1)[1])["device"] == "0,1"  # indices of the visible devices

    # Another pair does not fit in the one device left: it waits, its attempt not counted, until the first ends.
    waiting = start(client, alice, new_model(shapes, "second"), gpuCount=2).json()
    supervisor.run_once()
    assert (run_of(app, waiting["runId"]).status, run_of(app, waiting["runId"]).attempt) == ("pending", 0)
    single = start(client, alice, new_model(shapes, "single")).json()
    supervisor.run_once()
    assert run_of(app, single["runId"]).external_id.partition("@")[0].endswith(":h100-sxm:2")
    # The first pair is cancelled and its worker stopped: its two devices go to the pair that waited.
    assert client.delete("/api/models/alice/p/pair/training", headers=alice.headers).status_code == 200
    deadline = time.time() + 30
    while run_of(app, waiting["runId"]).external_id is None and time.time() < deadline:
        supervisor.run_once()
        time.sleep(0.2)
    assert run_of(app, waiting["runId"]).external_id.partition("@")[0].endswith(":h100-sxm:0,1")
