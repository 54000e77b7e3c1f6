"""Images this server already holds, on SQLite and PostgreSQL: ``images.predict`` auto-annotates a dataset image
the caller may read (dataset labels, classes mapped, hosted model names refused with the reason), and
``models.predict`` reads a ``source`` link only when this server signed it, never another host."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from ultralytics_platform import APIError, Platform

from lanner.datasets.imports.ingest import ingest_path
from lanner.synthetic import make_detection_dataset
from tests.inference.conftest import attach
from tests.sdk_types import assert_sdk_type

MODEL = "ul://alice/shapes/tiny"


def _dataset_image(app: Any, platform: Platform, owner: str, tmp_path: Path, *, slug: str = "pictures",
                   visibility: str = "private") -> str:
    """A dataset of a few synthetic shapes (imported in-process, as ``lanner datasets import`` does); returns the
    id of one of its images, as the SDK lists them."""
    created = platform.datasets.create(dataset=slug, name=slug, visibility=visibility)
    ctx = app.state.lanner
    root = make_detection_dataset(tmp_path / slug, train=2, val=1, size=96).parent
    with ctx.db.session() as session:
        ingest_path(session, blobs=ctx.blobs, settings=ctx.settings, dataset_id=created["id"], source=root,
                    queued=False)
        session.commit()
    return platform.datasets.images(owner, slug, limit=1)["images"][0]["id"]


def _refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(APIError) as refused:
        call()
    return refused.value.status_code, refused.value.json["error"]


def test_images_predict_labels_a_dataset_image(app, alice, bob, sdk, shapes_detector, tmp_path) -> None:
    attach(app, alice, shapes_detector)
    platform = sdk(alice)
    image_id = _dataset_image(app, platform, "alice", tmp_path)
    answer = assert_sdk_type(platform.images.predict(image_id, model_id=MODEL, confidence=0.01, iou=0.6),
                             "ImagesPredictResponse")
    assert answer["success"] is True and answer["modelUsed"] == MODEL and answer["inferenceTime"] > 0
    labels = answer["predictions"]
    assert labels and len(answer["confidences"]) == len(labels)
    for label in labels:  # the dataset's label shape: normalised cx, cy, w, h and its classes (circle, square)
        assert label["classId"] in (0, 1) and len(label["bbox"]) == 4 and all(0 <= v <= 1 for v in label["bbox"])
    saved = platform.images.update(image_id, body={"labels": labels})  # they can be saved back as they are
    assert saved["labelCount"] == len(labels)

    squares = platform.images.predict(image_id, model_id=MODEL, confidence=0.01, iou=0.6, class_mapping=[None, 0])
    assert {p["classId"] for p in squares["predictions"]} <= {0}
    assert len(squares["predictions"]) == sum(1 for p in labels if p["classId"] == 1)  # circles dropped

    hosted = _refusal(lambda: platform.images.predict(image_id, model_id="sam3"))
    assert hosted[0] == 422 and "hosted model" in hosted[1] and "ul://owner/project/model" in hosted[1]
    assert _refusal(lambda: platform.images.predict(image_id, model_id=MODEL, class_mapping=[0]))[0] == 422
    assert _refusal(lambda: platform.images.predict(image_id, model_id=MODEL, class_mapping=[0, 7]))[0] == 422
    prompts = _refusal(lambda: platform.images.predict(image_id, model_id=MODEL, visual_prompts=[
        {"classId": 0, "bbox": [0.5, 0.5, 0.2, 0.2]}]))
    assert prompts[0] == 422 and "yoloe26x" in prompts[1]
    assert _refusal(lambda: platform.images.predict(image_id, model_id="ul://alice/shapes/nope"))[0] == 404
    assert _refusal(lambda: platform.images.predict(f"{image_id}x", model_id=MODEL))[0] == 404

    bob_sdk = sdk(bob)
    assert _refusal(lambda: bob_sdk.images.predict(image_id, model_id=MODEL))[0] == 404  # alice's private image
    own = _dataset_image(app, bob_sdk, "bob", tmp_path, slug="bobs")
    assert _refusal(lambda: bob_sdk.images.predict(own, model_id=MODEL))[0] == 404  # alice's private model
    attach(app, alice, shapes_detector, project="open", model="public", visibility="public")
    shared = bob_sdk.images.predict(own, model_id="ul://alice/open/public", confidence=0.01)
    assert shared["modelUsed"] == "ul://alice/open/public" and shared["predictions"]


def test_a_source_link_must_be_one_this_server_signed(app, alice, sdk, client, shapes_detector, tmp_path) -> None:
    attach(app, alice, shapes_detector)
    platform = sdk(alice)
    image_id = _dataset_image(app, platform, "alice", tmp_path)
    link = platform.images.urls(image_ids=[image_id])["urls"][image_id]
    assert link.startswith("http://testserver/api/storage/blobs/")
    by_link = platform.models.predict("alice", "shapes", "tiny", body={"source": link, "conf": 0.01, "imgsz": 64})
    image = client.get(link).content
    by_file = platform.models.predict("alice", "shapes", "tiny", body={"file": ("a.jpg", image), "conf": 0.01,
                                                                        "imgsz": 64})
    assert by_link["images"][0]["results"] == by_file["images"][0]["results"]
    both = client.post("/api/models/alice/shapes/tiny/predict", files={"file": ("a.jpg", image)},
                       data={"source": "https://example.com/ignored.jpg", "imgsz": "64"}, headers=alice.headers)
    assert both.status_code == 200  # a file wins over a source (the SDK's types allow both)

    relative = platform.models.predict("alice", "shapes", "tiny", body={
        "source": link.removeprefix("http://testserver"), "conf": 0.01, "imgsz": 64})
    assert relative["images"][0]["results"] == by_link["images"][0]["results"]

    refusals = {
        "http://169.254.169.254/latest/meta-data": "not this server",
        "https://example.com/cat.jpg": "not this server",
        link.replace("signature=", "signature=0"): "signature",
        link.split("?")[0]: "signature",
        "http://testserver/api/datasets/alice/pictures": "not an image file of this server",
        "ftp://testserver/a.jpg": "not read",
        "file:///etc/passwd": "not read",
    }
    for source, words in refusals.items():
        status, message = _refusal(lambda source=source: platform.models.predict(
            "alice", "shapes", "tiny", body={"source": source}))
        assert status == 422 and words in message, (source, message)
    data_uri = "data:image/jpeg;base64," + base64.b64encode(image).decode()
    assert platform.models.predict("alice", "shapes", "tiny", body={"source": data_uri, "imgsz": 64})["images"]
