"""The supervisor against a fake executor: launch with a run-scoped key, per-second metering, lost workers
relaunched with resume then failed, budget caps and empty accounts stopping runs, cancel killing the worker,
and settlement (charge to the end, refund lost time, release the hold) done exactly once."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from lanner.billing import service as billing
from lanner.billing.metering import charge_for
from lanner.billing.models import LedgerPosting, LedgerTransaction
from lanner.db import utcnow
from lanner.gpus.models import CalibrationPoint
from lanner.training import supervisor as supervisor_module
from lanner.training.executors import Capability, JobState, JobStatus
from lanner.training.models import ConsoleChunk, EpochMetric, Run
from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import backdate, credit

HOUR = 500_000  # cpu: $0.50 an hour, in micro-dollars


def started_run(platform: Any, app: Any, account: Any, name: str = "m", **body: Any) -> int:
    credit(app, account, 10_000_000)
    model_id = new_model(platform, name)
    response = platform.training.start(model_id=model_id, gpu_type="cpu", train_args={**ARGS, **body})
    return int(response["runId"])


def run_row(app: Any, run_id: int) -> Run:
    with app.state.lanner.db.session() as session:
        run = session.get(Run, run_id)
        session.expunge(run)
        return run


def kinds(app: Any, run_id: int) -> dict[str, int]:
    with app.state.lanner.db.session() as session:
        rows = session.execute(select(LedgerTransaction.kind, func.count()).where(LedgerTransaction.run_id == run_id)
                               .group_by(LedgerTransaction.kind)).all()
        return dict(rows)


def charged(app: Any, run_id: int) -> int:
    with app.state.lanner.db.session() as session:
        return billing.run_charged(session, run_id)


@dataclass
class LaunchedRun:
    model_id: str
    started: dict[str, Any]  # the training.start response
    send: Callable[[str, dict[str, Any]], dict[str, Any]]  # report an event as the run's worker (200 asserted)


@pytest.fixture
def launch_run(shapes, app, alice, client, supervisor, fake_executor) -> Callable[..., LaunchedRun]:
    """Start a run on the CPU through the API and let the supervisor launch it; then report as its worker."""

    def launch(name: str, train_args: dict[str, Any], **body: Any) -> LaunchedRun:
        credit(app, alice, 10_000_000)
        model_id = new_model(shapes, name)
        started = client.post("/api/training/start", headers=alice.headers, json={
            "modelId": model_id, "gpuType": "cpu", "trainArgs": {**ARGS, **train_args}, **body}).json()
        supervisor.run_once()
        worker = {"Authorization": f"Bearer {fake_executor.launched[-1].env['ULTRALYTICS_API_KEY']}"}

        def send(event: str, data: dict[str, Any]) -> dict[str, Any]:
            response = client.post("/api/webhooks/training/metrics", headers=worker,
                                   json={"event": event, "modelId": model_id, "data": data})
            assert response.status_code == 200, response.text
            return response.json()

        return LaunchedRun(model_id, started, send)

    return launch


def test_launch_gives_the_worker_a_run_scoped_key_and_a_clean_spec(shapes, app, alice, client, supervisor,
                                                                   fake_executor):
    run_id = started_run(shapes, app, alice)
    assert run_row(app, run_id).status == "pending"
    supervisor.run_once()
    assert run_row(app, run_id).status == "starting"
    spec = fake_executor.launched[0]
    worker = json.loads(spec.env["LANNER_WORKER_SPEC"])
    assert worker["trainArgs"]["data"] == "ul://alice/datasets/shapes" and worker["resume"] is False
    assert worker["project"] == "alice/p" and worker["device"] == "cpu"
    assert not any(k.startswith("PYTEST") for k in spec.env) and spec.env["ULTRALYTICS_PLATFORM_URL"]
    key = {"Authorization": f"Bearer {spec.env['ULTRALYTICS_API_KEY']}"}
    # The worker key may read and report for its own run, nothing else.
    assert client.get("/api/datasets/alice/shapes", headers=key).status_code == 200
    assert client.post("/api/training/start", headers=key, json={"modelId": "x", "trainArgs": {}}).status_code == 403
    assert client.delete("/api/datasets/alice/shapes", headers=key).status_code == 403
    other = new_model(shapes, "other")
    event = {"event": "console_output", "modelId": other, "data": {"chunkId": 1, "content": "x", "lineCount": 1}}
    assert client.post("/api/webhooks/training/metrics", headers=key, json=event).status_code == 403
    started = client.post("/api/webhooks/training/metrics", headers=key, json={
        "event": "training_started", "project": "elsewhere", "name": "whatever",
        "data": {"trainArgs": {"epochs": "2"}, "epochs": 2, "device": "cpu"}}).json()
    assert started["runId"] == run_id and started["modelSlug"] == "m"  # joins its run whatever it calls itself
    listed = client.get("/api/api-keys", headers=alice.headers).json()["keys"]
    assert [k["name"] for k in listed] == ["default"]  # worker keys are not listed


def test_metering_charges_per_second_and_settlement_releases_the_rest(shapes, app, alice, client, supervisor):
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    backdate(app, seconds=3600, alive=True)
    supervisor.run_once()
    hour = charged(app, run_id)
    assert HOUR <= hour <= charge_for(3602, HOUR)  # one hour at $0.50 (a started second counts)
    supervisor.run_once()
    assert charged(app, run_id) <= charge_for(3602, HOUR)  # a repeated pass adds only the new seconds
    client.delete("/api/models/alice/p/m/training", headers=alice.headers)
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "cancelled" and run.settled_at is not None
    assert HOUR <= charged(app, run_id) <= charge_for(3605, HOUR)
    total = charged(app, run_id)
    with app.state.lanner.db.session() as session:
        assert billing.run_held(session, run_id) == 0
        assert billing.balance_micros(session, user_id=alice.user_id) == 10_000_000 - total
    supervisor.run_once()
    supervisor.charging.settle()
    assert kinds(app, run_id).get("release", 0) <= 1  # settled once


def test_lost_worker_is_relaunched_with_resume_and_lost_time_refunded(shapes, app, alice, supervisor,
                                                                      fake_executor):
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    backdate(app, seconds=600)
    with app.state.lanner.db.session() as session:  # last heard from 400 s ago, 200 s into the attempt
        run = session.get(Run, run_id)
        run.last_event_at = run.attempt_started_at + timedelta(seconds=200)
        run.status = "running"
    supervisor.run_once()  # metered up to now: 600 s
    assert charge_for(600, HOUR) <= charged(app, run_id) <= charge_for(602, HOUR)
    fake_executor.set(run_id, 1, JobState.LOST, -9, "worker killed by signal 9")
    supervisor.watch()  # a whole pass would relaunch at once; look in between
    run = run_row(app, run_id)
    assert run.status == "pending" and run.attempt == 1 and 199 <= run.billed_seconds <= 201
    assert charged(app, run_id) == charge_for(run.billed_seconds, HOUR)  # the 400 silent s refunded
    assert kinds(app, run_id)["refund"] == 1
    supervisor.run_once()
    assert run_row(app, run_id).attempt == 2
    assert json.loads(fake_executor.launched[-1].env["LANNER_WORKER_SPEC"])["resume"] is True
    fake_executor.set(run_id, 2, JobState.LOST, None, "worker process is gone")
    supervisor.run_once()
    supervisor.run_once()
    fake_executor.set(run_id, 3, JobState.LOST, None, "node died")
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "failed" and run.error["code"] == "lost" and "3 times" in run.error["message"]
    assert run.settled_at is not None or (supervisor.run_once() or run_row(app, run_id).settled_at is not None)


def test_silent_worker_is_killed_and_relaunched(shapes, app, alice, supervisor, fake_executor):
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    backdate(app, seconds=601)  # no event for longer than run_lost_after_seconds (600)
    supervisor.run_once()
    assert fake_executor.killed == [f"fake-{run_id}-1"]
    assert run_row(app, run_id).status in ("pending", "starting")


def test_worker_that_fails_by_itself_fails_the_run_with_its_log(shapes, app, alice, supervisor, fake_executor,
                                                                monkeypatch):
    monkeypatch.setattr(supervisor_module, "EXIT_GRACE_SECONDS", 0.0)
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    fake_executor.set(run_id, 1, JobState.FAILED, 1, "worker exited with code 1")
    supervisor.run_once()
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "failed" and "exited with code 1" in run.error["message"]
    assert "Traceback" in run.error["message"] and run.attempt == 1  # not relaunched
    model = shapes.models.retrieve("alice", "p", "m")["model"]
    assert model["trainingError"]["code"] == "worker_exited"


def test_budget_cap_cancels_through_the_protocol_and_kills_the_worker(shapes, app, alice, client, supervisor,
                                                                     fake_executor):
    credit(app, alice, 10_000_000)
    model_id = new_model(shapes, "capped")
    started = client.post("/api/training/start", headers=alice.headers, json={
        "modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS, "maxCostCents": 2}).json()
    run_id = started["runId"]
    assert started["holdCents"] <= 2
    supervisor.run_once()
    backdate(app, seconds=3600, alive=True)
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "cancelled" and run.termination_reason == "budget_reached"
    assert charged(app, run_id) == 20_000  # exactly the cap
    worker = {"Authorization": f"Bearer {fake_executor.launched[0].env['ULTRALYTICS_API_KEY']}"}
    reply = client.post("/api/webhooks/training/metrics", headers=worker, json={
        "event": "training_progress", "modelId": model_id, "data": {}}).json()
    assert reply["cancelled"] is True  # the trainer's own key hears it: it stops itself on its next event
    supervisor.run_once()  # grace is 0 in tests: the worker is stopped for certain
    assert fake_executor.stopped == [f"fake-{run_id}-1"]
    assert client.get("/api/datasets/alice/shapes", headers=worker).status_code == 200  # until it is seen gone
    supervisor.run_once()
    assert client.get("/api/datasets/alice/shapes", headers=worker).status_code == 401  # then revoked


def test_empty_account_stops_the_run_and_never_goes_negative(shapes, app, alice, client, supervisor):
    model_id = new_model(shapes, "dry")
    credit(app, alice, 20_000)  # two cents
    client.post("/api/training/start", headers=alice.headers,
                json={"modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS})
    supervisor.run_once()
    backdate(app, seconds=7200, alive=True)
    supervisor.run_once()
    supervisor.run_once()
    with app.state.lanner.db.session() as session:
        assert billing.balances(session, user_id=alice.user_id) == billing.Balances(available=0, held=0)
    assert shapes.models.training("alice", "p", "dry")["job"]["status"] == "cancelled"


def test_ledger_transactions_read_back_through_the_sdk(shapes, app, alice, client, supervisor):
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    backdate(app, seconds=36)
    supervisor.run_once()
    client.delete("/api/models/alice/p/m/training", headers=alice.headers)
    supervisor.run_once()
    from tests.sdk_types import assert_sdk_type

    extras = {"kind", "availableCents", "description"}
    listed = shapes.billing.transactions()["transactions"]
    assert_sdk_type({"transactions": [{k: v for k, v in t.items() if k not in extras} for t in listed]},
                    "BillingTransactionsResponse")
    mine = [t for t in listed if t.get("runId") == str(run_id)]
    assert {t["kind"] for t in mine} >= {"hold", "charge"} and all(t["type"] == "training" for t in mine)
    assert listed[0]["balanceAfter"] == pytest.approx(shapes.billing.usage_summary()["creditsCents"])
    assert_sdk_type({k: v for k, v in shapes.billing.usage_summary().items() if k != "heldCents"},
                    "BillingUsageSummaryResponse")
    assert shapes.account.summary()["creditsCents"] == (10_000_000 - charged(app, run_id)) // 10_000
    early = (utcnow() - timedelta(days=1)).isoformat()
    assert shapes.billing.transactions(to=early)["transactions"] == []


def test_every_transaction_balances(shapes, app, alice, supervisor):
    started_run(shapes, app, alice)
    supervisor.run_once()
    backdate(app, seconds=100)
    supervisor.run_once()
    with app.state.lanner.db.session() as session:
        sums = session.execute(select(LedgerPosting.transaction_id, func.sum(LedgerPosting.amount_micros))
                               .group_by(LedgerPosting.transaction_id)).all()
        assert sums and all(total == 0 for _, total in sums)


def test_quick_run_re_estimates_the_full_run_from_its_measured_speed(shapes, app, supervisor, launch_run):
    run = launch_run("quick", {"fraction": 0.5, "epochs": 2}, fullRunEpochs=50)
    assert run.started["smokeRun"] is True
    send, started = run.send, run.started

    send("training_started", {"trainArgs": {"fraction": "0.5", "epochs": "2"}, "epochs": 2, "device": "cpu"})
    for epoch in (0, 1):
        send("epoch_end", {"epoch": epoch, "metrics": {"train/box_loss": 1.0, "val/box_loss": 1.0,
                                                        "metrics/mAP50(B)": 0.1}, "fitness": 0.1})
    with app.state.lanner.db.session() as session:  # the two epochs ended 3 s apart
        first = session.scalar(select(EpochMetric.created_at).where(EpochMetric.epoch == 0))
        session.execute(update(EpochMetric).where(EpochMetric.epoch == 1)
                        .values(created_at=first + timedelta(seconds=3)))
    send("training_complete", {"results": {"metrics": {"fitness": 0.1}}, "runId": started["runId"]})
    supervisor.run_once()
    estimate = shapes.models.retrieve("alice", "p", "quick")["model"]["fullRunEstimate"]
    assert estimate["epochs"] == 50 and estimate["measuredEpochSeconds"] == 3.0
    assert estimate["correction"] == pytest.approx(3.0 / estimate["predictedQuickEpochSeconds"], rel=1e-2)
    # The full run trains on twice the images (validation stays the same): longer epochs, at most twice.
    assert 3.0 < estimate["epochSeconds"]["value"] <= 2 * 3.0
    assert estimate["costCents"]["value"] == pytest.approx(
        estimate["totalSeconds"]["value"] * 50 / 3600, abs=1.0)  # $0.50/h = 50 cents/h, whole cents


def test_a_run_is_launched_once_even_by_two_supervisors(shapes, app, alice, supervisor, fake_executor):
    from lanner.training.supervisor import Supervisor

    run_id = started_run(shapes, app, alice)
    other = Supervisor(app.state.lanner, fake_executor)  # a second server process's passes
    supervisor.run_once()
    other.run_once()
    assert [s.run_id for s in fake_executor.launched] == [run_id]


def test_a_launch_that_fails_fails_the_run_and_releases_the_hold(shapes, app, alice, supervisor, fake_executor,
                                                                 monkeypatch):
    def broken(spec: Any) -> str:
        raise RuntimeError("no such interpreter")

    monkeypatch.setattr(fake_executor, "launch", broken)
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "failed" and "could not start the worker (RuntimeError)" in run.error["message"]
    assert "no such interpreter" not in run.error["message"]  # internal text stays in the server log
    assert run.settled_at is not None and charged(app, run_id) == 0
    with app.state.lanner.db.session() as session:
        assert billing.balances(session, user_id=alice.user_id).available == 10_000_000


def test_an_executor_not_ready_yet_leaves_the_run_pending_for_the_next_pass(shapes, app, alice, supervisor,
                                                                            fake_executor, monkeypatch):
    """Ray's dashboard answers "No available agent to submit job, please try again later" while its job agent
    starts (seen on a busy machine): that is no reason to fail the run."""
    from lanner.training.executors import LaunchDeferred

    launch = fake_executor.launch
    refusals = iter([LaunchDeferred("No available agent to submit job, please try again later")])

    def not_yet(spec: Any) -> str:
        refusal = next(refusals, None)
        if refusal is not None:
            raise refusal
        return launch(spec)

    monkeypatch.setattr(fake_executor, "launch", not_yet)
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "pending" and run.external_id is None and not fake_executor.launched
    supervisor.run_once()
    run = run_row(app, run_id)
    assert [s.run_id for s in fake_executor.launched] == [run_id] and run.status == "starting"
    assert run.attempt == 1 and run.settled_at is None


def test_a_model_with_an_unsettled_run_cannot_be_deleted(shapes, app, alice, client, supervisor):
    run_id = started_run(shapes, app, alice)
    assert client.delete("/api/models/alice/p/m", headers=alice.headers).status_code == 409
    assert client.delete("/api/projects/alice/p", headers=alice.headers).status_code == 409
    client.delete("/api/models/alice/p/m/training", headers=alice.headers)
    supervisor.run_once()
    assert run_row(app, run_id).settled_at is not None
    assert client.delete("/api/models/alice/p/m", headers=alice.headers).status_code == 200
    with app.state.lanner.db.session() as session:
        assert billing.balances(session, user_id=alice.user_id) == billing.Balances(available=10_000_000, held=0)


def test_a_queued_job_lost_before_it_ran_is_launched_again(shapes, app, alice, supervisor, fake_executor):
    run_id = started_run(shapes, app, alice)
    fake_executor.capabilities = Capability.QUEUES_JOBS  # like Ray: the run stays pending until its job runs

    def queue(spec: Any) -> str:
        fake_executor.launched.append(spec)
        external_id = f"fake-{spec.run_id}-{spec.attempt}"
        fake_executor.states[external_id] = JobStatus(JobState.QUEUED)
        return external_id

    fake_executor.launch = queue
    supervisor.run_once()
    assert run_row(app, run_id).status == "pending"
    fake_executor.set(run_id, 1, JobState.EXPIRED, None, "Job supervisor actor failed to start within 900 s")
    supervisor.run_once()  # expired in Ray's queue: submitted again as the same attempt
    supervisor.run_once()
    assert run_row(app, run_id).attempt == 1 and len(fake_executor.launched) == 2
    fake_executor.set(run_id, 1, JobState.LOST, None, "runtime env setup failed")
    supervisor.run_once()  # noticed: the run goes back to dispatch
    supervisor.run_once()
    assert run_row(app, run_id).attempt == 2 and run_row(app, run_id).status == "pending"
    fake_executor.set(run_id, 2, JobState.RUNNING)
    supervisor.run_once()
    run = run_row(app, run_id)
    assert run.status == "starting" and run.attempt_started_at is not None  # the clock starts when Ray runs it


def test_a_silent_run_whose_status_cannot_be_read_is_lost_not_metered_forever(shapes, app, alice, supervisor,
                                                                              fake_executor):
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    job = f"fake-{run_id}-1"

    def unknown(external_id: str) -> JobStatus:
        raise RuntimeError(f"Job {external_id} does not exist")  # as Ray answers after a head restart

    fake_executor.status = unknown
    supervisor.run_once()
    assert run_row(app, run_id).status in ("starting", "running")  # not silent yet: nothing to conclude
    backdate(app, seconds=3600)
    supervisor.watch()
    run = run_row(app, run_id)
    assert run.status == "pending" and job in fake_executor.killed  # lost: stopped and queued to relaunch
    assert run.attempt_started_at is None and run.billed_seconds is not None
    assert run.billed_seconds < 3600  # the silent hour is not charged


def test_a_one_epoch_quick_run_re_estimates_from_its_only_epoch(shapes, app, supervisor, launch_run):
    run = launch_run("one", {"fraction": 0.5, "epochs": 1}, fullRunEpochs=40)
    assert run.started["smokeRun"] is True
    send, started = run.send, run.started

    send("training_started", {"trainArgs": {"fraction": "0.5", "epochs": "1"}, "epochs": 1, "device": "cpu"})
    send("epoch_end", {"epoch": 0, "metrics": {"train/box_loss": 1.0, "metrics/mAP50(B)": 0.1}, "fitness": 0.1})
    with app.state.lanner.db.session() as session:  # the trainer was ready 4 s before its only epoch ended
        row = session.get(Run, started["runId"])
        ready = utcnow() - timedelta(seconds=4)
        row.launch = {**row.launch, "trainerStartedAt": ready.isoformat()}
        session.execute(update(EpochMetric).where(EpochMetric.run_id == row.id).values(created_at=utcnow()))
    send("training_complete", {"results": {"metrics": {"fitness": 0.1}}, "runId": started["runId"]})
    supervisor.run_once()
    estimate = shapes.models.retrieve("alice", "p", "one")["model"]["fullRunEstimate"]
    assert estimate["epochs"] == 40 and estimate["measuredEpochSeconds"] == pytest.approx(4.0, abs=0.2)
    assert estimate["basis"].startswith("first epoch only")
    epoch = estimate["epochSeconds"]
    assert epoch["low"] <= 0.75 * epoch["value"] + 0.1 < epoch["value"] <= epoch["high"]


def test_a_running_run_feeds_calibration_and_keeps_one_point(app, supervisor, launch_run):
    run = launch_run("learning", {"epochs": 10})
    send, run_id = run.send, run.started["runId"]

    def epochs_every(seconds: float, count: int) -> None:
        for epoch in range(count):
            send("epoch_end", {"epoch": epoch, "metrics": {"train/box_loss": 1.0}, "fitness": 0.1})
        with app.state.lanner.db.session() as session:
            first = session.scalar(select(EpochMetric.created_at).where(EpochMetric.run_id == run_id,
                                                                        EpochMetric.epoch == 0))
            for epoch in range(1, count):
                session.execute(update(EpochMetric).where(EpochMetric.run_id == run_id, EpochMetric.epoch == epoch)
                                .values(created_at=first + timedelta(seconds=seconds * epoch)))

    def points() -> list[CalibrationPoint]:
        with app.state.lanner.db.session() as session:
            return list(session.scalars(select(CalibrationPoint).where(CalibrationPoint.run_id == run_id)))

    send("training_started", {"trainArgs": {"epochs": "10", "imgsz": "64", "batch": "4", "model": "yolo11n.yaml"},
                              "epochs": 10, "device": "cpu"})
    # The real trainer's console, ANSI colours and carriage returns included (recorded from `yolo train ... > file`
    # on 16 + 8 synthetic images: tests/training/recorded/trainer-console.txt).
    recorded = (Path(__file__).parent / "recorded" / "trainer-console.txt").read_text()
    assert "\x1b[34m\x1b[1mtrain: \x1b[0mScanning" in recorded
    send("console_output", {"chunkId": 1, "lineCount": recorded.count("\n"), "content": recorded})
    epochs_every(6.0, 3)
    supervisor.learn(force=True)
    [point] = points()
    assert point.epoch_seconds == pytest.approx(6.0) and point.train_images == 16 and point.val_images == 8
    assert point.gpu_type == "cpu"
    with app.state.lanner.db.session() as session:  # stored plain: the web console shows no escape codes
        [stored] = session.scalars(select(ConsoleChunk.content).where(ConsoleChunk.run_id == run_id))
    assert "\x1b" not in stored and "train: Scanning /tmp/rec/shapes/labels/train... 16 images" in stored
    epochs_every(8.0, 5)  # later epochs, slower: the same run's point is replaced, not duplicated
    supervisor.learn(force=True)
    [point] = points()
    assert point.epoch_seconds == pytest.approx(8.0)
