"""A run that captured a dataset version trains on exactly that version: the trainer resolves ``ul://`` data
through the export endpoint with its run key, at its first launch and at every relaunch."""

from __future__ import annotations

from typing import Any

from tests.training.conftest import ARGS, new_model
from tests.training.test_start_api import credit


def _images_in_export(client: Any, headers: dict[str, str], **params: Any) -> int:
    response = client.get("/api/datasets/alice/shapes/export", headers=headers, params=params)
    assert response.status_code == 200, response.text
    body = client.get(response.json()["downloadUrl"])
    assert body.status_code == 200
    return sum(1 for line in body.text.splitlines() if '"type": "image"' in line or '"type":"image"' in line)


def _start(client: Any, alice: Any, shapes: Any, name: str, **extra: Any) -> dict[str, Any]:
    model_id = new_model(shapes, name)
    response = client.post("/api/training/start", headers=alice.headers,
                           json={"modelId": model_id, "gpuType": "cpu", "trainArgs": ARGS, **extra})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_captured_version_is_what_the_worker_trains_on(shapes, app, alice, client, supervisor, fake_executor):
    credit(app, alice, 10_000_000)
    live = _images_in_export(client, alice.headers)
    assert live == 18
    _start(client, alice, shapes, "pinned", captureDatasetVersion=True)
    _start(client, alice, shapes, "floating")
    supervisor.run_once()
    pinned, floating = ({"Authorization": f"Bearer {spec.env['ULTRALYTICS_API_KEY']}"}
                        for spec in fake_executor.launched)

    # The owner edits the dataset while the runs are queued or training.
    image = shapes.datasets.images("alice", "shapes", limit=1)["images"][0]
    assert client.delete(f"/api/images/{image['id']}", headers=alice.headers).status_code == 200

    assert _images_in_export(client, alice.headers) == 17  # the owner sees the live dataset
    assert _images_in_export(client, floating) == 17  # a run without a capture follows it
    assert _images_in_export(client, pinned) == 18  # the captured run still gets its version
    explicit = client.get("/api/datasets/alice/shapes/export", headers=pinned, params={"v": 1}).json()
    assert explicit["version"] == 1
