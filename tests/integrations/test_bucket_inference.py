"""A model run on a bucket image reads the image's pinned object, not Lanner's blob store (where those pixels are
not): ``images.predict`` by image id and ``models.predict`` by signed link, annotation proposals and the
auto-annotate preview, all with the tiny trained detector; a changed or deleted object is a 409 naming it, and the
integration's ``processing`` switch refuses them (409 ``bucket_processing_off``) as it does training."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from lanner.billing import service as billing
from lanner.datasets.items import split_image_id
from tests.inference.conftest import shapes_detector  # noqa: F401  (a fixture, used by the tests here)
from tests.integrations.conftest import Bucket
from tests.integrations.test_bucket_joins import imported
from tests.trained import attach_weights, tiny_weights  # noqa: F401  (shapes_detector's fixture)

MODEL = "ul://alice/detectors/tiny"


@pytest.fixture
def world(client: Any, alice: Any, bucket: Bucket, app: Any, tmp_path: Path,
          shapes_detector: Path) -> dict:  # noqa: F811
    """The imported bucket dataset ``alice/shapes``, its images by key, and alice's tiny detector (its scores
    lifted over the API's minimum ``conf``: ``shapes_detector``)."""
    found = imported(client, alice, bucket, app, tmp_path / "shapes")
    images = client.get("/api/datasets/alice/shapes/images", headers=alice.headers,
                        params={"includeImageUrls": True}).json()["images"]
    by_sha = {hashlib.sha256(data).hexdigest(): key for key, data in found["originals"].items()}
    model_id = attach_weights(app, alice, shapes_detector, project="detectors", model="tiny")
    return {**found, "images": {by_sha[image["hash"]]: image for image in images}, "model_id": model_id}


def _predict(client: Any, alice: Any, image_id: str) -> Any:
    return client.post(f"/api/images/{image_id}/predict", headers=alice.headers,
                       json={"modelId": MODEL, "confidence": 0.01})


def test_predicting_on_a_bucket_image_reads_its_pinned_object(client: Any, alice: Any, bucket: Bucket,
                                                              world: dict) -> None:
    key, image = sorted(world["images"].items())[0]
    answer = _predict(client, alice, image["id"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["predictions"] and answer.json()["modelUsed"] == MODEL

    linked = client.post("/api/models/alice/detectors/tiny/predict", headers=alice.headers,
                         data={"source": image["imageUrl"], "conf": 0.01})  # a signed link to the bucket image
    assert linked.status_code == 200, linked.text
    assert linked.json()["images"][0]["results"]

    bucket.s3.put_object(Bucket="photos", Key=key, Body=b"other pixels")
    for refused in (_predict(client, alice, image["id"]),
                    client.post("/api/models/alice/detectors/tiny/predict", headers=alice.headers,
                                data={"source": image["imageUrl"], "conf": 0.01})):
        assert refused.status_code == 409 and refused.json()["code"] == "bucket_object_changed", refused.text
        assert key in refused.json()["error"] and "changed in the bucket" in refused.json()["error"]

    other_key, other = sorted(world["images"].items())[1]
    bucket.s3.delete_object(Bucket="photos", Key=other_key)
    gone = _predict(client, alice, other["id"])
    assert gone.status_code == 409 and other_key in gone.json()["error"] and "deleted" in gone.json()["error"]


def test_proposals_and_the_auto_annotate_preview_on_bucket_images(client: Any, alice: Any, bucket: Bucket,
                                                                 app: Any, sdk: Any, world: dict) -> None:
    keys = {key: split_image_id(image["id"])[1] for key, image in world["images"].items()}
    item_keys = sorted(keys.values())
    proposals = client.post("/api/datasets/alice/shapes/proposals", headers=alice.headers,
                            json={"model": world["model_id"], "keys": item_keys, "conf": 0.01})
    assert proposals.status_code == 200, proposals.text
    assert all(proposals.json()["images"][k] for k in item_keys)

    with app.state.lanner.db.session() as session:
        billing.top_up(session, user_id=alice.user_id, micros=10_000_000)
    job = sdk(alice).datasets.create_batch("alice", "shapes", body={
        "modelId": MODEL, "confidence": 0.01, "preview": True, "includeAnnotated": True})
    preview = client.get("/api/datasets/alice/shapes/predict/batch/preview", params={"jobId": job["jobId"]},
                         headers=alice.headers)
    assert preview.status_code == 200, preview.text
    assert len(preview.json()["images"]) == 3 and any(i["labels"] for i in preview.json()["images"])

    changed = sorted(keys)[0]
    bucket.s3.put_object(Bucket="photos", Key=changed, Body=b"other pixels")
    refused = client.post("/api/datasets/alice/shapes/proposals", headers=alice.headers,
                          json={"model": world["model_id"], "keys": [keys[changed]], "conf": 0.01})
    assert refused.status_code == 409 and refused.json()["code"] == "bucket_object_changed", refused.text
    assert changed in refused.json()["error"]


def test_processing_off_refuses_predictions_on_bucket_images(client: Any, alice: Any, sdk: Any,
                                                             world: dict) -> None:
    platform = sdk(alice)
    platform.storage_integrations.update(world["integration"]["id"], processing=False)
    image = next(iter(world["images"].values()))
    for refused in (_predict(client, alice, image["id"]),
                    client.post("/api/models/alice/detectors/tiny/predict", headers=alice.headers,
                                data={"source": image["imageUrl"], "conf": 0.01}),
                    client.post("/api/datasets/alice/shapes/predict/batch", headers=alice.headers,
                                json={"modelId": MODEL, "preview": True, "includeAnnotated": True})):
        assert refused.status_code == 409 and refused.json()["code"] == "bucket_processing_off", refused.text
        assert world["integration"]["id"] in refused.json()["error"]
    platform.storage_integrations.update(world["integration"]["id"], processing=True)
    assert _predict(client, alice, image["id"]).status_code == 200


def test_the_assistant_scores_bucket_images_and_skips_a_changed_one(client: Any, alice: Any, bucket: Bucket,
                                                                    app: Any, world: dict) -> None:
    """A round's scoring reads each unlabelled image from its pinned object; a changed one is left unscored (its
    pin records why) rather than scored on other pixels, and the round still completes."""
    from sqlalchemy import select, update

    from lanner.assistant.models import SCORING, Assistant, AssistantRound, AssistantScore
    from lanner.datasets.models import Dataset, DatasetItem
    from lanner.integrations.models import BucketObject

    assert client.put("/api/datasets/alice/shapes/assistant", headers=alice.headers,
                      json={"enabled": False}).status_code == 200
    keys = {key: split_image_id(image["id"])[1] for key, image in world["images"].items()}
    with app.state.lanner.db.session() as session:  # the imported images come labelled: make them unlabelled
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        session.execute(update(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id)
                        .values(labels=None, class_id=None))
        assistant_id = session.scalar(select(Assistant.id).where(Assistant.dataset_id == dataset.id))
        session.add(AssistantRound(assistant_id=assistant_id, round=1, labelled=0, status=SCORING,
                                   model_id=world["model_id"]))
    app.state.assistant.score(assistant_id, 1)  # or the app's own loop did, first: the same either way
    with app.state.lanner.db.session() as session:
        assert set(session.scalars(select(AssistantScore.item_key))) == set(keys.values())

    changed = sorted(keys)[0]
    bucket.s3.put_object(Bucket="photos", Key=changed, Body=b"other pixels")
    with app.state.lanner.db.session() as session:
        session.add(AssistantRound(assistant_id=assistant_id, round=2, labelled=0, status=SCORING,
                                   model_id=world["model_id"]))
    app.state.assistant.score(assistant_id, 2)
    with app.state.lanner.db.session() as session:
        assert set(session.scalars(select(AssistantScore.item_key))) == {keys[k] for k in keys if k != changed}
        assert session.scalar(select(BucketObject.state).where(BucketObject.key == changed)) == "changed"
