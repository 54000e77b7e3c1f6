"""``training.start`` from official weights: ``ul://ultralytics/yolo11/yolo11n`` (what ``ul cloud train
model=yolo11n.pt`` sends once the lookup succeeds) and the bare ``yolo11n.pt`` both train from the operator's
copy, which the run's own worker key may download; an official name not installed stays bare for the trainer."""

from __future__ import annotations

import pytest
from ultralytics_platform import APIError

from lanner.projects import official
from lanner.training.models import Run
from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import credit

OFFICIAL_URI = "ul://ultralytics/yolo11/yolo11n"


def test_training_starts_from_the_installed_official_weights(shapes, app, alice, client, supervisor,
                                                            fake_executor, tiny_weights):
    ctx = app.state.lanner
    official.install_file(ctx.db, ctx.blobs, tiny_weights, name="yolo11n")
    credit(app, alice, 10_000_000)
    started = {}
    for name, model in (("by-uri", OFFICIAL_URI), ("by-name", "yolo11n.pt"), ("not-here", "yolo11s.pt")):
        started[name] = shapes.training.start(model_id=new_model(shapes, name), gpu_type="cpu",
                                              train_args={**ARGS, "model": model})
        assert started[name]["estimate"]["batch"] == ARGS["batch"]
    for name, expected in (("by-uri", OFFICIAL_URI), ("by-name", OFFICIAL_URI), ("not-here", "yolo11s.pt")):
        model = shapes.models.retrieve("alice", "p", name)["model"]
        assert model["trainArgs"]["model"] == expected and model["baseModel"] == expected, name
        with ctx.db.session() as session:
            assert session.get(Run, started[name]["runId"]).launch["trainArgs"]["model"] == expected

    supervisor.run_once()
    worker = {"Authorization": f"Bearer {fake_executor.launched[0].env['ULTRALYTICS_API_KEY']}"}
    files = client.get("/api/models/ultralytics/yolo11/yolo11n/files", headers=worker)
    assert files.status_code == 200, files.text
    download = client.get(files.json()["files"][0]["downloadUrl"])
    assert download.content == tiny_weights.read_bytes()
    refused = client.post("/api/models/ultralytics/yolo11/yolo11n/clone", headers=worker, json={"project": "x"})
    assert refused.status_code == 403  # a worker's key reads; it never writes


def test_starting_from_an_official_model_not_installed_names_the_command(shapes, app, alice, fake_executor):
    credit(app, alice, 10_000_000)
    with pytest.raises(APIError) as error:
        shapes.training.start(model_id=new_model(shapes, "missing"), gpu_type="cpu",
                              train_args={**ARGS, "model": "ul://ultralytics/yolo11/yolo11m"})
    assert error.value.status_code == 422 and "lanner models add-official yolo11m.pt" in str(error.value)
