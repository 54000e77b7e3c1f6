"""An estimate and a launch of the same request agree (``training.inputs``: one resolver): the same dataset counts,
the same model profiled, and the run stores the very figures the estimate endpoint answered. For a dataset named
by ``ul://`` and base models from a YAML, from official ``.pt`` weights installed here and from one of the
user's own checkpoints; a quick run's re-estimate resolves the stored arguments the same way. And the model is
profiled (seconds when cold) while no transaction holds SQLite's write lock."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.gpus import advisor
from lanner.projects import official
from lanner.projects.models import ModelRecord
from lanner.training import inputs, quick_run
from lanner.training.models import EpochMetric, Run
from tests.trained import attach_weights
from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import credit

TRAIN_ARGS = {k: v for k, v in ARGS.items() if k not in ("model", "data")}


@pytest.fixture
def advised(monkeypatch: pytest.MonkeyPatch) -> list[advisor.Request]:
    """Every request the advisor is asked, in order."""
    asked: list[advisor.Request] = []
    real = advisor.estimate

    def spy(session: Any, catalogue: Any, request: advisor.Request, **kwargs: Any) -> dict[str, Any]:
        asked.append(request)
        return real(session, catalogue, request, **kwargs)

    monkeypatch.setattr(advisor, "estimate", spy)
    return asked


def _figures(item: dict[str, Any]) -> dict[str, Any]:
    """An estimate item without its availability (the endpoint's comes from the executor's capacity now)."""
    return {k: v for k, v in item.items()
            if k not in ("availability", "availabilityText", "startupSeconds", "doneInSeconds")}


@pytest.mark.parametrize(("base", "trainer", "profiled"), [
    ("yolo11n.yaml", "yolo11n.yaml", "yolo11n.yaml"),
    ("yolo11n.pt", "ul://ultralytics/yolo11/yolo11n", "yolo11n.yaml"),
    ("ul://alice/shapes/tiny", "ul://alice/shapes/tiny", None),
])
def test_an_estimate_and_a_launch_of_the_same_request_agree(shapes, app, alice, client, fake_executor, tiny_weights,
                                                             advised, base, trainer, profiled):
    ctx = app.state.lanner
    official.install_file(ctx.db, ctx.blobs, tiny_weights, name="yolo11n")
    attach_weights(app, alice, tiny_weights, project="shapes", model="tiny")
    credit(app, alice, 10_000_000)

    answer = client.post("/api/training/estimate", headers=alice.headers, json={
        "model": base, "dataset": ARGS["data"], "gpuTypes": ["cpu"], "trainArgs": TRAIN_ARGS})
    assert answer.status_code == 200, answer.text
    estimated = answer.json()
    started = shapes.training.start(model_id=new_model(shapes, "agree"), gpu_type="cpu",
                                    train_args={**ARGS, "model": base})

    asked_estimate, asked_launch = advised[0], advised[-1]
    assert (asked_launch.model, asked_launch.train_images, asked_launch.val_images, asked_launch.nc) == (
        asked_estimate.model, asked_estimate.train_images, asked_estimate.val_images, asked_estimate.nc)
    assert (asked_estimate.train_images, asked_estimate.val_images, asked_estimate.nc) == (12, 6, 2)
    assert asked_estimate.model == (profiled or asked_estimate.model) == estimated["model"]["name"]
    assert estimated["images"] == {"train": 12, "val": 6}

    with ctx.db.session() as session:
        run = session.get(Run, started["runId"])
        assert run.train_args["model"] == trainer and run.train_args["data"] == ARGS["data"]
        assert _figures(run.estimate) == _figures(estimated["estimates"][0])
        # A quick run's re-estimate resolves the run's stored arguments as the estimate resolved the request.
        _, again, _ = quick_run._resolved(session, run, session.get(ModelRecord, run.model_id))
        assert (again.model.profiled, again.train, again.val, again.nc) == (
            asked_estimate.model, asked_estimate.train_images, asked_estimate.val_images, asked_estimate.nc)
    assert started["estimate"] == {k: estimated["estimates"][0][k] for k in started["estimate"]}


def test_start_without_a_model_resolves_the_default_the_estimate_would(shapes, app, alice):
    """No model named: the best pretrained start for the dataset's task, else a YAML (random weights)."""
    with app.state.lanner.db.session() as session:
        principal = Principal.of(session.get(User, alice.user_id))
        resolved = inputs.resolve(session, principal, model=None, data=ARGS["data"], to_train=True)
        assert resolved.model == inputs.BaseModel(trainer="yolo11n.yaml", profiled="yolo11n.yaml")
        assert resolved.dataset is not None and resolved.dataset.task == "detect"


def _write_lock_free(path: str) -> bool:
    """Whether another connection can take SQLite's write lock: a background loop's transaction holds it for
    moments, so it is tried again; a transaction open around the caller would hold it throughout."""
    for _ in range(100):
        probe = sqlite3.connect(path, timeout=0.05, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            continue
        finally:
            probe.close()
    return False


def test_the_model_is_profiled_outside_any_transaction(shapes, app, alice, client, fake_executor, supervisor,
                                                       database_url, monkeypatch):
    if not database_url.startswith("sqlite"):
        pytest.skip("only SQLite locks the whole database for a transaction")
    path = database_url.removeprefix("sqlite:///")
    free: list[bool] = []
    real = inputs.TrainingInputs.profile

    def spy(self: inputs.TrainingInputs, train_args: dict[str, Any]) -> None:
        free.append(_write_lock_free(path))
        real(self, train_args)

    monkeypatch.setattr(inputs.TrainingInputs, "profile", spy)
    credit(app, alice, 10_000_000)
    answer = client.post("/api/training/estimate", headers=alice.headers, json={
        "model": "yolo11n.yaml", "dataset": ARGS["data"], "trainArgs": TRAIN_ARGS})
    assert answer.status_code == 200 and free == [True]

    model_id = new_model(shapes, "quick")
    started = client.post("/api/training/start", headers=alice.headers, json={
        "modelId": model_id, "gpuType": "cpu", "trainArgs": {**ARGS, "fraction": 0.5}, "fullRunEpochs": 50})
    assert started.status_code == 200 and started.json()["smokeRun"] and free == [True, True]

    supervisor.run_once()  # launched; its worker reports two epochs 3 s apart and the end
    worker = {"Authorization": f"Bearer {fake_executor.launched[-1].env['ULTRALYTICS_API_KEY']}"}
    for event, data in (("training_started", {"epochs": 2, "device": "cpu"}),
                        ("epoch_end", {"epoch": 0, "metrics": {"metrics/mAP50(B)": 0.1}, "fitness": 0.1}),
                        ("epoch_end", {"epoch": 1, "metrics": {"metrics/mAP50(B)": 0.1}, "fitness": 0.1})):
        client.post("/api/webhooks/training/metrics", headers=worker,
                    json={"event": event, "modelId": model_id, "data": data}).raise_for_status()
    with app.state.lanner.db.session() as session:
        first = session.scalar(select(EpochMetric.created_at).where(EpochMetric.epoch == 0))
        session.execute(update(EpochMetric).where(EpochMetric.epoch == 1)
                        .values(created_at=first + timedelta(seconds=3)))
    client.post("/api/webhooks/training/metrics", headers=worker, json={
        "event": "training_complete", "modelId": model_id,
        "data": {"results": {"metrics": {"fitness": 0.1}}, "runId": started.json()["runId"]}}).raise_for_status()
    supervisor.run_once()  # settled: the full run re-estimated from the quick run's speed
    assert shapes.models.retrieve("alice", "p", "quick")["model"]["fullRunEstimate"]["epochs"] == 50
    assert free == [True, True, True]
