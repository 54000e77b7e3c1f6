"""The generic upload slots (``upload.signed_url`` -> signed PUT -> ``upload.complete``), as the SDK and ``ul``
use them: a slot takes one file, under its announced size, only with its signature, and only its owner completes
it; what a refused PUT sent is not kept."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.usefixtures("app")


def _slot(client: TestClient, account: Any, **body: Any) -> dict[str, Any]:
    response = client.post("/api/upload/signed-url", headers=account.headers,
                           json={"assetType": "datasets", "filename": "shapes.zip", **body})
    assert response.status_code == 200, response.text
    return response.json()


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_a_slot_takes_one_file_and_its_owner_completes_it(client: TestClient, alice: Any, bob: Any) -> None:
    data = b"PK\x05\x06" + b"\x00" * 18  # an empty zip: the slot does not read what it stores
    slot = _slot(client, alice, totalBytes=len(data))
    complete = {"sessionId": slot["sessionId"]}
    early = client.post("/api/upload/complete", headers=alice.headers, json=complete)
    assert early.status_code == 409 and "error" in early.json()  # nothing uploaded yet

    stored = client.put(_path(slot["uploadUrl"]), content=data)
    assert stored.status_code == 200, stored.text
    assert stored.json() == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    again = client.put(_path(slot["uploadUrl"]), content=data)
    assert again.status_code == 409 and "already used" in again.json()["error"]  # single use

    assert client.post("/api/upload/complete", headers=bob.headers, json=complete).status_code == 404
    done = client.post("/api/upload/complete", headers=alice.headers, json=complete)
    assert done.status_code == 200 and done.json()["file"]["size"] == len(data)


def test_a_put_without_its_signature_or_over_its_size_is_refused_and_frees_nothing(client: TestClient,
                                                                                   alice: Any) -> None:
    slot = _slot(client, alice, totalBytes=10)
    url = _path(slot["uploadUrl"])
    forged = url.replace("signature=", "signature=0")
    assert client.put(forged, content=b"x" * 10).status_code in (401, 403)
    too_big = client.put(url, content=b"x" * 11)
    assert too_big.status_code == 413 and "error" in too_big.json()
    announced = client.post("/api/upload/complete", headers=alice.headers, json={"sessionId": slot["sessionId"]})
    assert announced.status_code == 409  # the refused PUT left nothing to complete


@pytest.mark.parametrize(("body", "words"), [
    ({"assetType": "images"}, "assetType"),
    ({"filename": "photo.jpg"}, "archive"),
    ({"assetType": "models", "filename": "weights.onnx"}, ".pt"),
    ({"assetType": "datasets", "assetId": "0" * 20}, "not found"),
])
def test_bad_slot_requests_get_a_clear_error(client: TestClient, alice: Any, body: dict[str, Any],
                                             words: str) -> None:
    response = client.post("/api/upload/signed-url", headers=alice.headers,
                           json={"assetType": "datasets", "filename": "shapes.zip", **body})
    assert 400 <= response.status_code < 500 and words in response.json()["error"], response.text
