"""``models.predict`` through the official SDK, on SQLite and PostgreSQL: the tiny trained detector answers the
boxes ``YOLO(weights).predict`` gives on the same image file, every task answers its hosted shape, every bad
input is a clear 4xx that loses nothing, other users' private models stay invisible, and the per-key inference
limit answers 429 with ``Retry-After``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics import YOLO
from ultralytics_platform import APIError, Platform

from lanner.accounts import service as accounts_service
from lanner.app import create_app
from tests.conftest import TEST_URL, Account
from tests.inference.conftest import TASK_YAMLS, attach, encoded, shapes_image
from tests.sdk_types import assert_sdk_type

TOLERANCE = 1e-3  # pixels and confidence: the server runs the pipeline YOLO.predict runs, on the same pixels
IMGSZ = 64  # the tiny detector's training size


def _predict(platform: Platform, body: dict[str, Any], model: str = "tiny", owner: str = "alice") -> dict:
    return platform.models.predict(owner, "shapes", model, body=body)


def _refused(call: Any) -> APIError:
    with pytest.raises(APIError) as refused:
        call()
    return refused.value


def _error(refusal: APIError) -> str:
    body = refusal.json
    assert isinstance(body, dict) and isinstance(body.get("error"), str), refusal.body  # the one error shape
    return body["error"]


@contextmanager
def _own_app(settings: Any, weights: Path, **overrides: Any) -> Iterator[tuple[TestClient, Account, Platform]]:
    """An app with its own settings (the shared fixtures build the default one), alice with two keys (the second
    in ``account.headers``' place: see the rate-limit test) and the tiny detector attached."""
    app = create_app(settings.model_copy(update=overrides))
    try:
        with TestClient(app) as client:
            with app.state.lanner.db.session() as session:
                user = accounts_service.create_user(session, username="alice")
                _, key = accounts_service.create_api_key(session, user=user)
            alice = Account("alice", user.id, key, {"Authorization": f"Bearer {key}"})
            attach(app, alice, weights)
            yield client, alice, Platform(api_key=key, base_url=TEST_URL, http_client=client, max_retries=0)
    finally:
        app.state.lanner.db.dispose()


def test_the_tiny_detector_gives_the_boxes_yolo_predict_gives(app, alice, sdk, shapes_detector, image_file) -> None:
    attach(app, alice, shapes_detector)
    platform = sdk(alice)
    with image_file.open("rb") as handle:
        response = _predict(platform, {"file": handle, "conf": 0.01, "iou": 0.6, "imgsz": IMGSZ})
    assert_sdk_type(response, "ModelsPredictResponse")
    metadata = response["metadata"]
    assert metadata["task"] == "detect" and metadata["classNames"] == ["circle", "square"]
    assert metadata["model"] == "ul://alice/shapes/tiny" and metadata["imageCount"] == 1
    assert metadata["version"]["ultralytics"] and metadata["functionTimeCall"] > 0
    (entry,) = response["images"]
    expected = YOLO(shapes_detector).predict(str(image_file), conf=0.01, iou=0.6, imgsz=IMGSZ, verbose=False)[0]
    rows = entry["results"]
    assert entry["shape"] == list(expected.orig_shape) and len(rows) == len(expected.boxes) > 0
    for row, box, conf, cls in zip(rows, expected.boxes.xyxy.tolist(), expected.boxes.conf.tolist(),
                                   expected.boxes.cls.tolist(), strict=True):
        assert row["class"] == int(cls) and abs(row["confidence"] - conf) <= TOLERANCE
        assert max(abs(a - b) for a, b in zip(row["box"].values(), box, strict=True)) <= TOLERANCE

    with image_file.open("rb") as handle:  # normalize and decimals as the hosted platform reads them
        normalized = _predict(platform, {"file": handle, "conf": 0.01, "iou": 0.6, "imgsz": IMGSZ,
                                         "normalize": True, "decimals": 3})["images"][0]["results"]
    height, width = expected.orig_shape
    first = normalized[0]["box"]
    assert abs(first["x2"] - rows[0]["box"]["x2"] / width) <= 1e-3 and abs(first["y2"] - rows[0]["box"]["y2"] /
                                                                            height) <= 1e-3


def test_every_task_answers_its_hosted_shape(app, alice, sdk, task_weights) -> None:
    platform = sdk(alice)
    image = encoded(shapes_image(160, 120))
    fields = {"segment": "segments", "pose": "keypoints"}
    for task, weights in task_weights.items():
        attach(app, alice, weights, model=task, task=task)
        response = _predict(platform, {"file": ("a.jpg", image), "conf": 0.01, "imgsz": 128}, model=task)
        assert_sdk_type(response, "ModelsPredictResponse")
        assert response["metadata"]["task"] == task
        rows = response["images"][0]["results"]
        assert rows, task
        if task == "classify":
            assert len(rows) == 3 and set(rows[0]) == {"name", "class", "confidence"}
        else:
            assert len(rows[0]["box"]) == (8 if task == "obb" else 4)
            assert all(fields[task] in row for row in rows) if task in fields else True
    assert set(task_weights) == set(TASK_YAMLS)


def test_bad_images_are_clear_4xx_and_lose_nothing(app, alice, sdk, shapes_detector, image_file) -> None:
    attach(app, alice, shapes_detector)
    platform = sdk(alice)
    good = image_file.read_bytes()
    png = encoded(shapes_image(320, 240), ".png")
    cases = [
        ({"file": ("notes.jpg", b"just some text, named .jpg")}, 415, "not an image"),
        ({"file": ("clip.mp4", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 100)}, 415, "video"),
        ({"file": ("cut.jpg", good[: len(good) // 2])}, 422, "truncated"),
        ({"file": ("cut.png", png[: len(png) // 2])}, 422, "png image is"),
        ({"file": ("bomb.png", _bomb())}, 422, "lanner_inference_max_pixels"),
        ({"file": ("empty.jpg", b"")}, 422, "empty"),
        ({}, 422, "no image"),
        ({"source": "not base64 at all!"}, 422, "neither a link nor base64"),
    ]
    for body, status, words in cases:
        refusal = _refused(lambda body=body: _predict(platform, body))
        assert refusal.status_code == status and words in _error(refusal).lower(), (body.keys(), refusal.body)
    response = _predict(platform, {"file": ("ok.jpg", good), "imgsz": IMGSZ})  # nothing was lost on the way
    assert response["images"][0]["shape"] == [96, 128]


def _bomb() -> bytes:
    from tests.inference.test_images import _png_declaring  # the decode tests' hand-made header

    return _png_declaring(30_000, 30_000)


@pytest.mark.parametrize("field, value, words", [
    ("conf", 0, "conf: input should be greater than or equal to 0.01"), ("conf", 1.5, "conf:"),
    ("conf", "nan", "conf:"), ("iou", 0.99, "iou:"), ("iou", -0.1, "iou:"), ("imgsz", 16, "imgsz:"),
    ("imgsz", 4096, "imgsz:"), ("imgsz", "big", "imgsz:"), ("decimals", 11, "decimals:"), ("bits", 10, "bits:"),
])
def test_bad_parameters_are_422s_naming_the_field(app, alice, sdk, shapes_detector, image_file, field, value,
                                                  words) -> None:
    attach(app, alice, shapes_detector)
    refusal = _refused(lambda: _predict(sdk(alice), {"file": ("a.jpg", image_file.read_bytes()), field: value}))
    assert refusal.status_code == 422 and words in _error(refusal).lower(), refusal.body


def test_unknown_weightless_and_private_models(app, alice, bob, sdk, shapes_detector, image_file, client) -> None:
    attach(app, alice, shapes_detector, model="private")
    attach(app, alice, shapes_detector, project="open", model="public", visibility="public")
    alice_sdk, bob_sdk = sdk(alice), sdk(bob)
    alice_sdk.models.create(body={"project": "shapes", "model": "untrained", "name": "untrained"})
    body = {"file": ("a.jpg", image_file.read_bytes()), "imgsz": IMGSZ}
    unknown = _refused(lambda: _predict(alice_sdk, body, model="nope"))
    assert unknown.status_code == 404
    weightless = _refused(lambda: _predict(alice_sdk, body, model="untrained"))
    assert weightless.status_code == 409 and "no weights" in _error(weightless)
    private = _refused(lambda: _predict(bob_sdk, body, model="private"))
    assert private.status_code == 404 and _error(private) == "project 'alice/shapes' not found"  # as if absent
    assert _refused(lambda: _predict(bob_sdk, body, model="nope")).status_code == 404
    public = bob_sdk.models.predict("alice", "open", "public", body=body)  # read access is enough
    assert public["metadata"]["model"] == "ul://alice/open/public"
    no_key = client.post("/api/models/alice/open/public/predict", files={"file": ("a.jpg", b"x")})
    assert no_key.status_code == 401


def test_an_upload_over_the_inference_limit_is_a_413(settings, shapes_detector, image_file) -> None:
    with _own_app(settings, shapes_detector, inference_max_bytes=4096) as (client, alice, platform):
        big = encoded(shapes_image(640, 480, seed=4), ".png")
        assert len(big) > 4096
        refusal = _refused(lambda: _predict(platform, {"file": ("big.png", big)}))
        assert refusal.status_code == 413 and "LANNER_INFERENCE_MAX_BYTES" in _error(refusal)
        other = client.post("/api/projects", json={"name": "x" * 50, "description": "y" * 5000},
                            headers=alice.headers)
        assert other.status_code == 201  # the other routes keep LANNER_MAX_BODY_BYTES
        assert _predict(platform, {"file": ("ok.jpg", image_file.read_bytes()), "imgsz": IMGSZ})["images"]


def test_the_inference_limit_answers_429_with_retry_after_per_key(settings, shapes_detector, image_file) -> None:
    with _own_app(settings, shapes_detector, inference_rate_limit="2/minute") as (client, alice, _):
        with client.app.state.lanner.db.session() as session:
            user = accounts_service.get_user_by_username(session, username="alice")
            _, second = accounts_service.create_api_key(session, user=user)
        url, upload = "/api/models/alice/shapes/tiny/predict", {"file": ("a.jpg", image_file.read_bytes())}
        for _ in range(2):
            assert client.post(url, files=upload, data={"imgsz": IMGSZ}, headers=alice.headers).status_code == 200
        refused = client.post(url, files=upload, headers=alice.headers)
        assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        image_predict = client.post("/api/images/x-1/predict", json={"modelId": "ul://alice/shapes/tiny"},
                                    headers=alice.headers)
        assert image_predict.status_code == 429  # images.predict spends the same budget
        assert client.get("/api/projects/alice", headers=alice.headers).status_code == 200  # the API budget is apart
        other_key = client.post(url, files=upload, data={"imgsz": IMGSZ},
                                headers={"Authorization": f"Bearer {second}"})
        assert other_key.status_code == 200  # counted per key


def test_the_sdk_urlencoded_source_is_read(app, alice, sdk, shapes_detector, image_file) -> None:
    """Without a file the SDK sends ``application/x-www-form-urlencoded``: base64 and data: URIs work there."""
    import base64  # only this test encodes

    attach(app, alice, shapes_detector)
    data = base64.b64encode(image_file.read_bytes()).decode()
    for source in (data, f"data:image/jpeg;base64,{data}"):
        response = _predict(sdk(alice), {"source": source, "imgsz": IMGSZ, "conf": 0.01})
        assert response["images"][0]["shape"] == [96, 128]
    with image_file.open("rb") as handle:
        by_file = _predict(sdk(alice), {"file": handle, "imgsz": IMGSZ, "conf": 0.01})
    assert by_file["images"][0]["results"] == response["images"][0]["results"]



HOSTILE = {
    "conf": ["inf", "-inf", "1e309", "", "x" * 300, "nul\x00", "99999999999999999999"],
    "iou": ["NaN", "0.95000001", "-0"],
    "imgsz": ["2147483648", "1e3", "-1", "640.5"],
    "normalize": ["maybe", "2"],
    "decimals": ["NaN", "-1", "99999999999999999999999"],
    "bits": ["7", "8.0", "x"],
    "vid_stride": ["0", "9223372036854775808"],
    "source": ["\x00", "x" * 10_000, "http://testserver/api/storage/blobs/zz/../../../etc/passwd",
               "http://testserver:99999/a", "data:,plain", "//evil.example/a.jpg", "/api/storage/blobs/" + "0" * 64],
}


def test_hostile_field_values_are_4xx_never_5xx(app, alice, client, shapes_detector) -> None:
    attach(app, alice, shapes_detector)
    url = "/api/models/alice/shapes/tiny/predict"
    for field, values in HOSTILE.items():
        for value in values:
            response = client.post(url, data={field: value}, headers=alice.headers)
            assert 400 <= response.status_code < 500, (field, value, response.status_code, response.text[:200])
            assert isinstance(response.json().get("error"), str), (field, value)
