"""``exports.*`` through the official SDK against the in-process app (SQLite and PostgreSQL): what is refused up
front and why, reuse, cancel and delete, the worker's upload slot, signed downloads and mobile links. No worker
runs here (the queue is off); the upload a worker makes is made by the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from ultralytics_platform import APIError

from lanner.exports import jobs
from lanner.exports.models import ModelExport
from tests.exports.conftest import fake_weights, simulate_worker
from tests.sdk_types import assert_sdk_type
from tests.trained import attach_weights

E = "/api/models/alice/shapes/tiny/exports"


@pytest.fixture
def platform(app: Any, alice: Any, sdk: Any, tmp_path: Path) -> Any:
    attach_weights(app, alice, fake_weights(tmp_path))
    return sdk(alice)


def _error(call: Any) -> tuple[int, str]:
    with pytest.raises(APIError) as caught:
        call()
    body = caught.value.response.json() if hasattr(caught.value, "response") else None
    message = body["error"] if body else str(caught.value)
    assert isinstance(message, str)
    return caught.value.status_code, message


def test_export_is_queued_reused_uploaded_downloaded_and_deleted(app, client, alice, platform) -> None:
    created = platform.exports.create("alice", "shapes", "tiny", format="onnx", args={"imgsz": 64, "half": False})
    assert_sdk_type(created, "ExportsCreateResponse")
    assert created["status"] == "queued" and "gpuType" not in created
    again = client.post(E, json={"format": "onnx", "args": {"imgsz": [64, 64], "batch": 1, "simplify": True}},
                        headers=alice.headers)
    assert again.status_code == 200 and again.json()["id"] == created["id"]  # the same export in other words

    listed = platform.exports.list("alice", "shapes", "tiny")
    assert_sdk_type(listed, "ExportsListResponse")
    assert [e["id"] for e in listed["exports"]] == [created["id"]]
    job = platform.exports.retrieve("alice", "shapes", "tiny", created["id"])["export"]
    assert job["status"] == "queued" and job["args"] == {"imgsz": 64} and "file" not in job

    slot = simulate_worker(app, created["id"])
    url = app.state.lanner.signer.upload_url(slot)
    assert client.put(url, content=b"onnx bytes").status_code == 200
    assert client.put(url, content=b"again").status_code == 409  # one artefact per attempt
    done = platform.exports.retrieve("alice", "shapes", "tiny", created["id"])
    assert_sdk_type(done, "ExportsRetrieveResponse")
    file = done["export"]["file"]
    assert done["export"]["status"] == "completed" and file["downloadFilename"] == "tiny.onnx" and file["size"] == 10
    assert client.get(file["downloadUrl"]).content == b"onnx bytes"  # signed: no key needed
    assert platform.exports.list("alice", "shapes", "tiny", status="running")["exports"] == []

    deleted = platform.exports.delete("alice", "shapes", "tiny", created["id"])
    assert_sdk_type(deleted, "ExportsDeleteResponse")
    assert deleted["action"] == "deleted"
    assert client.get(file["downloadUrl"]).status_code == 404  # nothing refers to the bytes any more
    assert _error(lambda: platform.exports.retrieve("alice", "shapes", "tiny", created["id"]))[0] == 404


def test_an_active_export_is_cancelled_then_deleted(app, client, platform) -> None:
    created = platform.exports.create("alice", "shapes", "tiny", format="torchscript")
    slot = simulate_worker(app, created["id"])
    assert platform.exports.delete("alice", "shapes", "tiny", created["id"]) == {"success": True,
                                                                                  "action": "cancelled"}
    job = platform.exports.retrieve("alice", "shapes", "tiny", created["id"])["export"]
    assert job["status"] == "cancelled" and job["error"]["message"] and job["completedAt"]
    assert client.put(app.state.lanner.signer.upload_url(slot), content=b"late").status_code == 409
    again = platform.exports.create("alice", "shapes", "tiny", format="torchscript")
    assert again["id"] != created["id"]  # a cancelled export is not reused
    assert platform.exports.delete("alice", "shapes", "tiny", created["id"])["action"] == "deleted"


def test_what_is_refused_up_front(app, platform, sdk, bob, make_account) -> None:
    create = platform.exports.create
    status, message = _error(lambda: sdk(bob).exports.create("alice", "shapes", "tiny", format="onnx"))
    assert status == 404
    assert _error(lambda: sdk(bob).exports.list("alice", "shapes", "tiny"))[0] == 404
    with app.state.lanner.db.session() as session:
        from lanner.projects.models import ModelRecord

        session.query(ModelRecord).update({"weights_sha256": None})
    status, message = _error(lambda: create("alice", "shapes", "tiny", format="onnx"))
    assert status == 409 and "no weights" in message


@pytest.mark.parametrize("body, words", [
    ({"format": "edgetpu"}, "Edge TPU compiler"),
    ({"format": "hailo"}, "Dataflow Compiler"),
    ({"format": "saved_model"}, "not installed on this server"),
    ({"format": "tflite"}, "format"),
    ({"format": "engine"}, "gpuType"),
    ({"format": "onnx", "gpuType": "h100-sxm"}, "gpuType"),
    ({"format": "onnx", "args": {"imgsz": 8}}, "args.imgsz"),
    ({"format": "onnx", "args": {"imgsz": "large"}}, "args.imgsz"),
    ({"format": "torchscript", "args": {"opset": 12}}, "not supported for format 'torchscript'"),
    ({"format": "onnx", "args": {"quantize": 8}}, "calibration"),
    ({"format": "onnx", "args": {"int8": True}}, "calibration"),
    ({"format": "onnx", "args": {"data": "coco8.yaml"}}, "calibration"),
    ({"format": "torchscript", "args": {"half": True}}, "GPU"),
    ({"format": "paddle", "args": {"quantize": 16}}, "quantize"),
    ({"format": "onnx", "args": {"lr0": 0.1}}, "args.lr0"),
    ({"format": "onnx", "args": {"dynamic": "maybe"}}, "args.dynamic"),
])
def test_unavailable_formats_and_bad_arguments_are_422_with_the_reason(client, alice, platform, body, words) -> None:
    response = client.post(E, json=body, headers=alice.headers)
    assert response.status_code == 422, response.text
    assert words in response.json()["error"]


def test_the_same_weights_elsewhere_reuse_a_finished_export(app, client, alice, platform, tmp_path) -> None:
    first = platform.exports.create("alice", "shapes", "tiny", format="onnx")
    client.put(app.state.lanner.signer.upload_url(simulate_worker(app, first["id"])), content=b"artefact")
    attach_weights(app, alice, fake_weights(tmp_path), model="copy")
    copy = platform.exports.create("alice", "shapes", "copy", format="onnx")
    assert copy["id"] != first["id"] and copy["status"] == "completed"  # no work: the same bytes
    file = platform.exports.retrieve("alice", "shapes", "copy", copy["id"])["export"]["file"]
    assert file["downloadFilename"] == "copy.onnx" and client.get(file["downloadUrl"]).content == b"artefact"
    platform.exports.delete("alice", "shapes", "tiny", first["id"])
    assert client.get(file["downloadUrl"]).content == b"artefact"  # still referred to by the copy's export


def test_mobile_import_links_resolve_without_a_key_until_they_expire(app, client, platform, sdk, bob) -> None:
    onnx = platform.exports.create("alice", "shapes", "tiny", format="onnx")
    with app.state.lanner.db.session() as session:  # a Core ML export (coremltools may be absent here)
        twin = session.get(ModelExport, onnx["id"])
        job = jobs.create(session, ModelExport(model_id=twin.model_id, owner_id=twin.owner_id, format="coreml",
                                               args={}, fingerprint="f" * 64, status="queued",
                                               filename="tiny.mlpackage.zip"), reason="test")
        coreml_id = job.id
    client.put(app.state.lanner.signer.upload_url(simulate_worker(app, coreml_id)), content=b"mlpackage")
    assert _error(lambda: platform.exports.mobile("alice", "shapes", "tiny", onnx["id"]))[0] == 422
    assert _error(lambda: sdk(bob).exports.mobile("alice", "shapes", "tiny", coreml_id))[0] == 404

    link = platform.exports.mobile("alice", "shapes", "tiny", coreml_id)
    assert_sdk_type(link, "ExportsMobileResponse")
    fragment = dict(parse_qsl(urlsplit(link["importUrl"]).fragment))
    anonymous = client.post(f"/api/mobile/models/{coreml_id}", json={"expires": int(fragment["expires"]),
                                                                      "signature": fragment["signature"]})
    assert anonymous.status_code == 200, anonymous.text
    descriptor = assert_sdk_type(anonymous.json(), "ExportsResolveMobileResponse")
    assert descriptor["format"] == "coreml" and descriptor["task"] == "detect" and descriptor["size"] == 9
    assert client.get(descriptor["downloadUrl"]).content == b"mlpackage"
    for tampered in ({"expires": int(fragment["expires"]) + 1, "signature": fragment["signature"]},
                     {"expires": int(fragment["expires"]), "signature": "0" * 64},
                     {"expires": 1, "signature": fragment["signature"]}):
        answer = client.post(f"/api/mobile/models/{coreml_id}", json=tampered)
        assert answer.status_code == 403 and isinstance(answer.json()["error"], str)
