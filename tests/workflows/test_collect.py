"""The collect template end to end, on SQLite and PostgreSQL: a real endpoint serving the tiny trained detector
(``tests/deployments``), a workflow saved through the SDK, and predictions through the real predict route.

Uncertain answers (a box whose confidence is in the band) land in the dataset as unlabelled images, first in
"Label next", with the model's boxes as the editor's proposals and no labels; the daily cap holds and a new
(injected) day starts again; the sampling rate is applied (injected draws); the same image is kept once; a
confident answer, or an empty one unless the workflow says so, is not captured; a deleted workflow stops."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from ultralytics_platform import Platform

from tests.conftest import Account
from tests.deployments.conftest import (  # noqa: F401  (fixtures)
    IMGSZ,
    attach,
    endpoint_app,
    endpoint_client,
    endpoint_settings,
    image_file,
    owner,
    platform,
    shapes_detector,
    wait_status,
)
from tests.workflows.test_workflows_sdk import collect_graph

DAY = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)
QUEUE = "/api/datasets/alice/queue"


def predict(platform: Platform, image: Path, conf: float) -> dict[str, Any]:  # noqa: F811
    with image.open("rb") as handle:
        return platform.deployments.predict("alice", "tiny", body={"file": handle, "conf": conf, "imgsz": IMGSZ})


def queue(client: TestClient, account: Account) -> list[dict[str, Any]]:
    answer = client.get(f"{QUEUE}/label-next", params={"limit": 50}, headers=account.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["images"]


def items(app: Any) -> list[Any]:
    from lanner.datasets.models import Dataset, DatasetItem

    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "queue"))
        rows = session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id)
                               .order_by(DatasetItem.id)).all()
        session.expunge_all()
        return list(rows)


def proposals(app: Any) -> dict[str, list[dict[str, Any]]]:
    from lanner.annotation.models import LabelProposal

    with app.state.lanner.db.session() as session:
        return {p.item_key: p.labels for p in session.scalars(select(LabelProposal))}


def test_uncertain_predictions_fill_the_label_queue_sampled_and_capped(
        endpoint_app: Any, endpoint_client: TestClient, owner: Account, platform: Platform,  # noqa: F811
        shapes_detector: Path, tmp_path: Path) -> None:  # noqa: F811
    collector = endpoint_app.state.workflows
    clock = {"now": DAY}
    collector.clock = lambda: clock["now"]
    attach(endpoint_app, owner, shapes_detector)
    platform.deployments.create("alice", project="shapes", model="tiny", deployment="tiny", name="Tiny",
                                region="us-central1")
    assert endpoint_client.post("/api/datasets", headers=owner.headers, json={
        "name": "queue", "classNames": ["square", "circle"]}).status_code in (200, 201)
    saved = platform.agents.save(name="Collect", graph=collect_graph("tiny", "queue", rate=1.0, dailyCap=2.0,
                                                                     low=0.01, high=0.6), version=0)
    assert saved["errors"] == []
    wait_status(platform, "tiny", "ready")
    images = [image_file(tmp_path, seed) for seed in range(1, 8)]

    first = predict(platform, images[0], conf=0.01)
    boxes = first["images"][0]["results"]
    assert boxes and all(0.01 <= b["confidence"] <= 0.6 for b in boxes)  # uncertain: in the band
    assert [i.labels for i in items(endpoint_app)] == [None]
    predict(platform, images[0], conf=0.01)  # the same bytes again: kept once
    predict(platform, images[1], conf=0.01)
    predict(platform, images[2], conf=0.01)  # over the cap of 2 a day
    captured = items(endpoint_app)
    assert len(captured) == 2 and all(i.labels is None and i.class_id is None for i in captured)
    assert all(i.name.startswith("tiny-20261206-") and i.split == "train" for i in captured)
    assert captured[0].metadata_["capturedFrom"] == "alice/tiny"
    with endpoint_app.state.lanner.blobs.open(captured[0].sha256) as stored:  # the bytes sent, stored as uploads are
        assert stored.read() == images[0].read_bytes()
    assert sorted(i["key"] for i in queue(endpoint_client, owner)) == sorted(i.key for i in captured)
    suggested = proposals(endpoint_app)
    assert set(suggested) == {i.key for i in captured}
    names = {b["name"] for b in boxes}
    first_labels = suggested[captured[0].key]
    assert len(first_labels) == len(boxes) and {lab["classId"] for lab in first_labels} == {
        ["square", "circle"].index(n) for n in names}  # mapped by name onto the dataset's classes
    assert all(len(lab["bbox"]) == 4 and all(0 <= v <= 1 for v in lab["bbox"]) for lab in first_labels)
    page = endpoint_client.get(f"{QUEUE}/annotate/{captured[0].key}", headers=owner.headers)
    assert page.status_code == 200 and page.json()["labels"] in (None, [])  # proposals, never labels
    assert page.json()["suggestions"] == [{"model": "alice/shapes/tiny", "labels": first_labels}]
    assert sorted(lab["confidence"] for lab in first_labels) == sorted(b["confidence"] for b in boxes)

    clock["now"] = DAY + timedelta(days=1)  # a new day: the cap starts again
    predict(platform, images[2], conf=0.01)
    assert len(items(endpoint_app)) == 3

    # Sampling: a rate of 0.5 keeps a draw under 0.5 only.
    updated = platform.agents.save(id=saved["id"], name="Collect", version=1, graph=collect_graph(
        "tiny", "queue", rate=0.5, dailyCap=10.0, low=0.01, high=0.6))
    assert updated["errors"] == []
    draws = iter([0.7, 0.2])
    collector.random = lambda: next(draws)
    predict(platform, images[3], conf=0.01)
    assert len(items(endpoint_app)) == 3
    predict(platform, images[3], conf=0.01)
    assert len(items(endpoint_app)) == 4
    collector.random = lambda: 0.0

    # Confident answers (every box above the band) and empty ones are not captured...
    platform.agents.save(id=saved["id"], name="Collect", version=2, graph=collect_graph(
        "tiny", "queue", rate=1.0, dailyCap=10.0, low=0.01, high=0.05))
    confident = predict(platform, images[4], conf=0.06)
    assert confident["images"][0]["results"] and all(b["confidence"] > 0.05
                                                     for b in confident["images"][0]["results"])
    empty = predict(platform, images[5], conf=0.99)
    assert empty["images"][0]["results"] == []
    assert len(items(endpoint_app)) == 4
    # ... unless the workflow counts an answer with no detection as uncertain.
    platform.agents.save(id=saved["id"], name="Collect", version=3, graph=collect_graph(
        "tiny", "queue", rate=1.0, dailyCap=10.0, low=0.01, high=0.05, includeEmpty=1.0))
    predict(platform, images[5], conf=0.99)
    assert len(items(endpoint_app)) == 5

    from lanner.workflows.models import Workflow

    with endpoint_app.state.lanner.db.session() as session:
        row = session.get(Workflow, saved["id"])
        assert (row.captured_day, row.captured_today, row.captured_total) == ("2026-12-07", 3, 5)
    platform.agents.delete(id=saved["id"])  # deleted: collecting stops
    predict(platform, images[6], conf=0.99)
    assert len(items(endpoint_app)) == 5
