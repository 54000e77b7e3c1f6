"""The training protocol, driven with the SDK calls the trainer itself makes (simulated events)."""

from __future__ import annotations

import time

import pytest
from ultralytics_platform import APIError

from tests.sdk_types import assert_sdk_type

METRICS = {"train/box_loss": 1.5, "metrics/mAP50(B)": 0.25, "val/box_loss": 1.7, "lr": 0.001}


def start(platform, project="alice/shapes", name="train", epochs=2, **data):
    response = platform.training.metrics(event="training_started", project=project, name=name,
                                         data={"epochs": epochs, "trainArgs": {"model": "yolo11n.yaml",
                                                                               "epochs": str(epochs)}, **data})
    return assert_sdk_type(response, "TrainingMetricsResponse")


def send(platform, model_id, event, data):
    return assert_sdk_type(platform.training.metrics(event=event, model_id=model_id, data=data),
                           "TrainingMetricsResponse")


def test_training_started_creates_project_and_unique_model_slugs(sdk, alice):
    platform = sdk(alice)
    first = start(platform)
    assert first["modelSlug"] == "train" and first["modelUrl"].endswith("/alice/shapes/train")
    assert isinstance(first["runId"], int)
    second = start(platform, system={"cpu": 1})
    assert second["modelSlug"] == "train-2" and second["modelId"] != first["modelId"]
    third = start(platform, project="shapes", name="My Run")  # bare slug: the caller's workspace
    assert third["modelSlug"] == "my-run"
    project = platform.projects.retrieve("alice", "shapes")
    assert sorted(m["model"] for m in project["models"]) == ["my-run", "train", "train-2"]
    assert all(m["status"] == "starting" for m in project["models"])


def test_a_retried_training_started_does_not_create_a_second_model(sdk, alice):
    platform = sdk(alice)
    first = start(platform, system={"cpu": 3})
    again = start(platform, system={"cpu": 3})
    assert again["modelId"] == first["modelId"] and again["runId"] == first["runId"]


def test_full_run_lifecycle(sdk, alice, client):
    platform = sdk(alice)
    started = start(platform)
    model_id, run_id = started["modelId"], started["runId"]
    send(platform, model_id, "console_output", {"chunkId": 1002, "content": "second\n", "lineCount": 1})
    send(platform, model_id, "console_output", {"chunkId": 1001, "content": "first\n", "lineCount": 1})
    send(platform, model_id, "console_output", {"chunkId": 1001, "content": "first\n", "lineCount": 1})  # retry
    assert platform.models.retrieve("alice", "shapes", "train")["model"]["status"] == "running"
    for epoch in range(2):
        send(platform, model_id, "epoch_end", {"epoch": epoch, "metrics": {**METRICS, "lr": 0.001 * (epoch + 1)},
                                               "system": {"cpu": 50.0}, "fitness": 0.1 * epoch,
                                               "best_fitness": 0.1 * epoch,
                                               **({"modelInfo": {"parameters": 10, "gflops": 6.4}} if not epoch
                                                  else {})})
    send(platform, model_id, "epoch_end", {"epoch": 1, "metrics": {**METRICS, "lr": 0.002}, "fitness": 0.1})  # retry
    send(platform, model_id, "system_metrics", {"cpu": 12.5, "memory": {"used": 1}})
    send(platform, model_id, "training_progress", {"step": 3})
    # the trainer's final evaluation of best.pt arrives as one more epoch_end at index `epochs`
    send(platform, model_id, "epoch_end", {"epoch": 2, "metrics": {"metrics/mAP50(B)": 0.3}, "fitness": 0.3})

    upload = assert_sdk_type(platform.models.upload_checkpoint(filename="best.pt", model_id=model_id, run_id=run_id),
                             "ModelsUploadCheckpointResponse")
    put = client.put(upload["uploadUrl"], content=b"weights-bytes",
                     headers={"Content-Type": "application/octet-stream"})
    assert put.status_code == 200
    send(platform, model_id, "checkpoint_saved", {"modelPath": upload["gcsPath"], "runId": run_id,
                                                  "uploadPath": upload["uploadPath"]})
    done = send(platform, model_id, "training_complete", {
        "results": {"metrics": {"metrics/mAP50(B)": 0.3, "fitness": 0.3}, "bestEpoch": 1, "bestFitness": 0.3,
                    "modelPath": upload["gcsPath"], "modelSize": 13},
        "classNames": ["circle", "square"], "plots": [{"type": "pr_curve", "x": [0, 1], "y": [1, 0]}],
        "runId": run_id})
    assert "cancelled" not in done
    send(platform, model_id, "training_complete", {"results": {"bestEpoch": 1}, "runId": run_id})  # retry: harmless

    model = assert_sdk_type(platform.models.retrieve("alice", "shapes", "train"), "ModelsRetrieveResponse")["model"]
    assert model["status"] == "completed"
    assert [r["epoch"] for r in model["trainResults"]] == [0, 1]
    assert model["trainResults"][1]["metrics"]["lr"] == 0.002
    assert [c["content"] for c in model["consoleChunks"]] == ["first\n", "second\n"]
    assert model["hasWeights"] is True and model["file"]["size"] == 13.0
    assert model["classNames"] == ["circle", "square"] and model["bestEpoch"] == 1
    assert model["metrics"]["metrics/mAP50(B)"] == 0.3
    files = assert_sdk_type(platform.models.files("alice", "shapes", "train"), "ModelsFilesResponse")["files"]
    assert files[0]["name"] == "best.pt"
    assert client.get(files[0]["downloadUrl"]).content == b"weights-bytes"
    job = assert_sdk_type(platform.models.training("alice", "shapes", "train"), "ModelsTrainingResponse")["job"]
    assert job["status"] == "completed"
    assert job["progress"]["currentEpoch"] == 2 and job["progress"]["percentage"] == 100
    listed = assert_sdk_type(platform.projects.retrieve("alice", "shapes"), "ProjectsRetrieveResponse")
    assert listed["models"][0]["epochCount"] == 2


def test_signed_urls_reject_tampering_and_expiry(sdk, alice, client, app):
    platform = sdk(alice)
    started = start(platform)
    upload = platform.models.upload_checkpoint(filename="last.pt", model_id=started["modelId"],
                                               run_id=started["runId"])
    url = upload["uploadUrl"]
    assert client.put(url.replace("signature=", "signature=0"), content=b"x").status_code == 403
    assert client.put(url.split("?")[0], content=b"x").status_code == 403
    signer = app.state.lanner.signer
    path = url.split("http://testserver")[1].split("?")[0]
    expired = signer.sign("PUT", path, ttl_seconds=-5)
    response = client.put(expired, content=b"x")
    assert response.status_code == 403 and "expired" in response.json()["error"]
    assert client.get(url).status_code in (403, 405)  # a PUT signature does not allow GET


def test_cancel_is_returned_on_the_next_event(sdk, alice, tmp_path, monkeypatch, app):
    from typer.testing import CliRunner

    from lanner.cli import app as cli_app

    platform = sdk(alice)
    started = start(platform)
    send(platform, started["modelId"], "epoch_end", {"epoch": 0, "metrics": METRICS})
    settings = app.state.lanner.settings
    monkeypatch.setenv("LANNER_HOME", str(settings.home))
    monkeypatch.setenv("LANNER_DATABASE_URL", settings.resolved_database_url)
    from lanner.config import get_settings

    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli_app, ["runs", "cancel", "alice/shapes/train"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(started["runId"])
    reply = send(platform, started["modelId"], "epoch_end", {"epoch": 1, "metrics": METRICS})
    assert reply["cancelled"] is True
    send(platform, started["modelId"], "training_complete", {"results": {"bestEpoch": 0}})
    model = platform.models.retrieve("alice", "shapes", "train")["model"]
    assert model["status"] == "cancelled" and len(model["trainResults"]) == 2
    job = platform.models.training("alice", "shapes", "train")["job"]
    assert job["status"] == "cancelled"
    # a resume of a cancelled model is told so, and the trainer then tracks it as a new model
    resumed = platform.training.metrics(event="training_started", model_id=started["modelId"],
                                        data={"epochs": 2})
    assert resumed["cancelled"] is True


def test_cancel_through_the_api(sdk, alice):
    platform = sdk(alice)
    started = start(platform)
    response = assert_sdk_type(platform.models.delete_training("alice", "shapes", "train"),
                               "ModelsDeleteTrainingResponse")
    assert response["status"] == "cancelled"
    assert send(platform, started["modelId"], "training_progress", {})["cancelled"] is True
    with pytest.raises(APIError) as exc:
        platform.models.delete_training("alice", "shapes", "train")
    assert exc.value.status_code == 409


def test_resume_continues_the_same_model(sdk, alice):
    platform = sdk(alice)
    started = start(platform, epochs=3)
    send(platform, started["modelId"], "epoch_end", {"epoch": 0, "metrics": METRICS})
    resumed = platform.training.metrics(event="training_started", model_id=started["modelId"],
                                        data={"epochs": 3, "trainArgs": {"resume": "True"}})
    assert resumed["modelId"] == started["modelId"] and resumed["runId"] != started["runId"]
    send(platform, started["modelId"], "epoch_end", {"epoch": 1, "metrics": METRICS})
    send(platform, started["modelId"], "epoch_end", {"epoch": 2, "metrics": METRICS})
    model = platform.models.retrieve("alice", "shapes", "train")["model"]
    assert [r["epoch"] for r in model["trainResults"]] == [0, 1, 2]
    assert model["status"] == "running"


def test_training_failed(sdk, alice):
    platform = sdk(alice)
    started = start(platform)
    send(platform, started["modelId"], "training_failed", {"error": "CUDA out of memory", "code": "oom"})
    model = assert_sdk_type(platform.models.retrieve("alice", "shapes", "train"), "ModelsRetrieveResponse")["model"]
    assert model["status"] == "failed" and model["trainingError"]["message"] == "CUDA out of memory"
    job = assert_sdk_type(platform.models.training("alice", "shapes", "train"), "ModelsTrainingResponse")["job"]
    assert job["error"]["code"] == "oom"


@pytest.mark.parametrize("body, fragment", [
    ({"event": "epoch_end", "data": {"epoch": "x", "metrics": {}}}, "epoch"),
    ({"event": "epoch_end", "data": {"epoch": -1}}, "epoch"),
    ({"event": "epoch_end", "data": {"epoch": 1, "metrics": [1, 2]}}, "metrics"),
    ({"event": "console_output", "data": {"content": "x"}}, "chunkId"),
    ({"event": "checkpoint_saved", "data": {}}, "modelPath"),
    ({"event": "no_such_event", "data": {}}, "event"),
    ({"event": "epoch_end", "data": "not an object"}, "data"),
])
def test_malformed_events_get_422_never_500(client, sdk, alice, body, fragment):
    started = start(sdk(alice))
    response = client.post("/api/webhooks/training/metrics", json={"modelId": started["modelId"], **body},
                           headers=alice.headers)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["error"]


def test_events_for_a_model_the_key_may_not_write(client, sdk, alice, bob):
    started = start(sdk(alice))
    for event, data in (("epoch_end", {"epoch": 0, "metrics": {}}), ("console_output",
                                                                     {"chunkId": 1, "content": "x"})):
        response = client.post("/api/webhooks/training/metrics",
                               json={"modelId": started["modelId"], "event": event, "data": data},
                               headers=bob.headers)
        assert response.status_code == 404
    response = client.post("/api/webhooks/models/upload", json={"modelId": started["modelId"], "filename": "best.pt"},
                           headers=bob.headers)
    assert response.status_code == 404
    response = client.post("/api/webhooks/training/metrics",
                           json={"project": "alice/shapes", "event": "training_started", "data": {}},
                           headers=bob.headers)
    assert response.status_code == 403
    model = sdk(alice).models.retrieve("alice", "shapes", "train")["model"]
    assert model.get("trainResults") == [] and model.get("consoleChunks") == []


def test_unknown_model_and_missing_identity(client, alice):
    response = client.post("/api/webhooks/training/metrics",
                           json={"modelId": "nope", "event": "epoch_end", "data": {"epoch": 0}}, headers=alice.headers)
    assert response.status_code == 404
    response = client.post("/api/webhooks/training/metrics", json={"event": "epoch_end", "data": {"epoch": 0}},
                           headers=alice.headers)
    assert response.status_code == 422
    response = client.post("/api/webhooks/training/metrics", json={"event": "training_started", "data": {}},
                           headers=alice.headers)
    assert response.status_code == 422 and "project" in response.json()["error"]


def test_checkpoint_saved_before_upload_is_a_conflict(sdk, alice):
    platform = sdk(alice)
    started = start(platform)
    upload = platform.models.upload_checkpoint(filename="best.pt", model_id=started["modelId"],
                                               run_id=started["runId"])
    with pytest.raises(APIError) as exc:
        send(platform, started["modelId"], "checkpoint_saved", {"modelPath": upload["gcsPath"],
                                                                "runId": started["runId"]})
    assert exc.value.status_code == 409
    with pytest.raises(APIError) as bad_name:
        platform.models.upload_checkpoint(filename="../../etc/passwd", model_id=started["modelId"])
    assert bad_name.value.status_code == 422


def test_timestamps_are_utc_iso(sdk, alice):
    platform = sdk(alice)
    start(platform)
    created = platform.projects.retrieve("alice", "shapes")["project"]["createdAt"]
    assert created.endswith("Z")
    assert abs(time.time() - time.mktime(time.strptime(created[:19], "%Y-%m-%dT%H:%M:%S")) + time.timezone) < 120


def test_legacy_identity_by_project_and_name(sdk, alice, client):
    platform = sdk(alice)
    start(platform, name="trainer")
    started = start(platform, name="train", system={"x": 1})
    start(platform, name="train", system={"x": 2})  # train-2, newest
    response = client.post("/api/webhooks/training/metrics", headers=alice.headers, json={
        "project": "alice/shapes", "name": "train", "event": "epoch_end", "data": {"epoch": 0, "metrics": METRICS}})
    assert response.status_code == 200
    assert response.json()["modelId"] != started["modelId"]
    assert platform.models.retrieve("alice", "shapes", "train-2")["model"]["trainResults"][0]["epoch"] == 0
    assert platform.models.retrieve("alice", "shapes", "trainer")["model"]["trainResults"] == []
