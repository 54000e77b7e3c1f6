"""What training shows and records: the job and cost views read the operator's catalogue (LANNER_GPU_CATALOGUE),
a run's history starts at its creation, a model's status follows its runs with a StatusEvent for each change,
and an uploaded checkpoint makes only an untrained model a trained one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from lanner.config import Settings
from lanner.projects.models import ModelRecord
from lanner.status import StatusEvent
from lanner.training.models import RunEvent
from lanner.training.state import mark_model_uploaded
from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import credit

LAB_H100 = {"gpus": {"h100-sxm": {"display_name": "Lab H100", "vram_gb": 96}}}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"gpu_catalogue": json.dumps(LAB_H100)})


def model_events(app: Any, model_id: str) -> list[tuple[str | None, str]]:
    with app.state.lanner.db.session() as session:
        return [(e.from_status, e.to_status) for e in session.scalars(select(StatusEvent).where(
            StatusEvent.entity == "models", StatusEvent.entity_id == model_id).order_by(StatusEvent.id))]


def test_job_and_cost_views_use_the_operator_catalogue(shapes, app, alice, client, supervisor):
    credit(app, alice, 100_000_000)
    model_id = new_model(shapes, "lab")
    shapes.training.start(model_id=model_id, gpu_type="h100-sxm", train_args=ARGS)
    supervisor.run_once()
    job = shapes.models.training("alice", "p", "lab")["job"]
    assert job["compute"] == {"gpuType": "h100-sxm", "gpuDisplayName": "Lab H100", "gpuMemoryGb": 96.0}
    model = shapes.models.retrieve("alice", "p", "lab")["model"]
    assert model["computeCost"]["gpuDisplayName"] == "Lab H100"
    assert model["cloudJob"] == {"gpuDisplayName": "Lab H100"}


def test_a_launched_run_starts_its_history_at_creation_and_its_model_follows(shapes, app, alice, supervisor):
    credit(app, alice, 10_000_000)
    model_id = new_model(shapes, "history")
    run_id = shapes.training.start(model_id=model_id, gpu_type="cpu", train_args=ARGS)["runId"]
    supervisor.run_once()
    history = shapes.models.retrieve("alice", "p", "history")["model"]["runHistory"]
    assert [(h["from"], h["to"]) for h in history] == [(None, "pending"), ("pending", "starting")]
    assert history[0]["reason"] == "training.start"
    assert model_events(app, model_id) == [("untrained", "pending"), ("pending", "starting")]
    shapes.models.delete_training("alice", "p", "history")
    assert model_events(app, model_id)[-1] == ("starting", "cancelled")
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(RunEvent.reason).where(RunEvent.run_id == run_id)
                              .order_by(RunEvent.id.desc()).limit(1)) == "cancelled_by_user"


def test_a_reported_run_is_created_with_an_event(client, alice, app):
    response = client.post("/api/webhooks/training/metrics", headers=alice.headers, json={
        "event": "training_started", "project": "alice/outside", "name": "exp",
        "data": {"trainArgs": {"epochs": 3}, "epochs": 3, "device": "cpu"}})
    assert response.status_code == 200, response.text
    body = response.json()
    with app.state.lanner.db.session() as session:
        first = session.scalars(select(RunEvent).where(RunEvent.run_id == body["runId"])).first()
        assert (first.from_status, first.to_status, first.reason) == (None, "starting", "training_started")
        assert session.get(ModelRecord, body["modelId"]).status == "starting"
    assert model_events(app, body["modelId"]) == [("untrained", "starting")]


def test_an_uploaded_checkpoint_makes_only_an_untrained_model_trained(shapes, app, alice):
    model_id = new_model(shapes, "uploaded")
    with app.state.lanner.db.session() as session:
        model = session.get(ModelRecord, model_id)
        assert mark_model_uploaded(session, model) and model.status == "completed"
        assert not mark_model_uploaded(session, model)  # already trained: left as it is
    assert model_events(app, model_id) == [("untrained", "completed")]
