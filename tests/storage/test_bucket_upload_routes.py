"""``upload.signed_url`` and ``upload.complete`` are served by direct handlers (``lanner.uploads.router``: one
thread hop, no middleware for API clients), as every file uploaded into a bucket calls both. Each case here runs
twice on the same app: through the fast lane and the handlers, and through the documented endpoints mounted under
``/fastapi`` as plain FastAPI routes (dependencies, the whole middleware stack). Both must answer the same status,
JSON body (ids aside) and headers, for the errors too (401, 404, 409, 413, 400, 422), and leave the same records."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

from lanner.config import Settings
from lanner.http.direct_route import DirectRoute
from lanner.status import StatusEvent
from lanner.storage.models import UploadSession
from lanner.uploads import router as uploads_router
from tests.conftest import GENEROUS_LIMITS, TEST_URL, copy_of
from tests.storage.moto import s3_settings

SIGNED_URL, COMPLETE = "/api/upload/signed-url", "/api/upload/complete"
FASTAPI = "/fastapi"
BAD_KEY = {"Authorization": "Bearer ul_" + "0" * 40}
VARYING = re.compile(r"[0-9a-f]{20,}|\d{4}-\d\d-\d\dT[\d:.]+Z?")  # ids, times


@pytest.fixture
def settings(tmp_path: Path, sqlite_template: Path, moto_endpoint: str, bucket: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=copy_of(sqlite_template, tmp_path), public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, blob_grace_seconds=0, upload_settle_seconds=0,
                    max_upload_bytes=1000, **GENEROUS_LIMITS, **s3_settings(moto_endpoint, bucket))


@pytest.fixture
def documented(app: Any) -> None:
    """The documented endpoints under ``/fastapi``, served FastAPI's way (``APIRoute``, not ``DirectRoute``)."""
    reference = APIRouter()
    for route in uploads_router.router.routes:
        if route.path in (SIGNED_URL, COMPLETE):
            reference.add_api_route(route.path, route.endpoint, methods=list(route.methods))
    app.include_router(reference, prefix=FASTAPI)


def test_both_routes_are_served_directly_and_take_the_fast_lane(app: Any) -> None:
    for path, handler in ((SIGNED_URL, uploads_router._serve_signed_url), (COMPLETE, uploads_router._serve_complete)):
        route = next(r for r in uploads_router.router.routes if getattr(r, "path", None) == path)
        assert isinstance(route, DirectRoute) and route.endpoint.direct_handler is handler
        scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"authorization", b"Bearer ul_x")]}
        assert app.fast_lane.match(scope) is handler
    paths = app.openapi()["paths"]
    assert paths[SIGNED_URL]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SignedUrlRequest"}
    assert paths[COMPLETE]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/UploadCompleteRequest"}


def _answer(response: httpx.Response) -> tuple[int, Any, dict[str, str]]:
    headers = {name: value for name, value in response.headers.items() if name not in ("date", "content-length")}
    body = response.json()
    if "uploadUrl" in body:  # the signature's query varies with the time too
        body["uploadUrl"] = body["uploadUrl"].split("?")[0]
    return response.status_code, {key: VARYING.sub("…", value) if isinstance(value, str) else value
                                  for key, value in body.items()}, headers


def _cases(client: TestClient, alice: Any, bob: Any, bobs_dataset: str, base: str) -> list[Any]:
    """Every answer of one pass through both calls, under ``base`` ("" or ``FASTAPI``)."""
    answers: list[Any] = []

    def post(path: str, headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        response = client.post(base + path, headers=headers or {}, **kwargs)
        answers.append((path, _answer(response)))
        return response

    def slot(**body: Any) -> dict[str, Any]:
        response = post(SIGNED_URL, alice.headers, json={"assetType": "datasets", "filename": "a.zip", **body})
        assert response.status_code == 200, response.text
        return response.json()

    zip_body = {"assetType": "datasets", "filename": "a.zip"}
    post(SIGNED_URL, json=zip_body)  # no key: 401
    post(SIGNED_URL, BAD_KEY, json=zip_body)  # a wrong key: 401
    as_json = {**alice.headers, "Content-Type": "application/json; charset=utf-8"}
    post(SIGNED_URL, as_json, content=b"{not json")  # 422
    post(SIGNED_URL, alice.headers)  # 422: no body
    post(SIGNED_URL, alice.headers, content=orjson.dumps(zip_body))  # 422: JSON, but not said to be
    post(SIGNED_URL, {**alice.headers, "Content-Type": "text/plain"}, content=orjson.dumps(zip_body))  # 422
    post(SIGNED_URL, {**alice.headers, "Content-Type": "application/vnd.x+json"}, content=orjson.dumps(zip_body))
    post(SIGNED_URL, alice.headers, json={"assetType": "datasets"})  # 422, no filename
    post(SIGNED_URL, alice.headers, json={**zip_body, "totalBytes": -1})  # 422
    post(SIGNED_URL, alice.headers, json={**zip_body, "assetType": "videos"})  # 400
    post(SIGNED_URL, alice.headers, json={**zip_body, "filename": "a.jpg"})  # 400
    post(SIGNED_URL, alice.headers, json={**zip_body, "totalBytes": 1001})  # 400, over the server's limit
    post(SIGNED_URL, alice.headers, json={**zip_body, "assetId": bobs_dataset})  # 404: not alice's
    post(SIGNED_URL, alice.headers, json={**zip_body, "assetType": "models", "filename": "w.pt",
                                          "assetId": "nope"})  # 404
    exact = slot(totalBytes=3, contentType="application/zip")

    post(COMPLETE, json={"sessionId": exact["sessionId"]})  # 401
    post(COMPLETE, BAD_KEY, json={"sessionId": exact["sessionId"]})  # 401
    post(COMPLETE, alice.headers, json={})  # 422
    post(COMPLETE, alice.headers)  # 422: no body
    post(COMPLETE, alice.headers, json={"sessionId": "missing"})  # 404
    post(COMPLETE, alice.headers, json={"sessionId": exact["sessionId"]})  # 409: nothing PUT yet
    assert httpx.put(exact["uploadUrl"], content=b"abc").status_code == 200
    post(COMPLETE, bob.headers, json={"sessionId": exact["sessionId"]})  # 404: not bob's
    post(COMPLETE, alice.headers, json={"sessionId": exact["sessionId"]})  # 200
    post(COMPLETE, alice.headers, json={"sessionId": exact["sessionId"]})  # 200 again, nothing changes

    over = slot(totalBytes=3)
    assert httpx.put(over["uploadUrl"], content=b"abcd").status_code == 200
    post(COMPLETE, alice.headers, json={"sessionId": over["sessionId"]})  # 413, the object goes
    post(COMPLETE, alice.headers, json={"sessionId": over["sessionId"]})  # 409
    short = slot(totalBytes=5)
    assert httpx.put(short["uploadUrl"], content=b"ab").status_code == 200
    post(COMPLETE, alice.headers, json={"sessionId": short["sessionId"]})  # 400: not the size announced
    unannounced = slot()
    assert httpx.put(unannounced["uploadUrl"], content=b"x" * 1001).status_code == 200
    post(COMPLETE, alice.headers, json={"sessionId": unannounced["sessionId"]})  # 413, the server's limit
    return answers


def _records(app: Any, user_id: str) -> list[Any]:
    with app.state.lanner.db.read_session() as session:
        uploads = session.query(UploadSession).filter_by(owner_id=user_id).order_by(UploadSession.created_at).all()
        rows = [(u.status, u.filename, u.content_type, u.total_bytes, u.size, u.staged, u.sha256) for u in uploads]
        events = session.query(StatusEvent).filter(StatusEvent.entity_id.in_([u.id for u in uploads])).all()
        return [rows, sorted((e.from_status or "", e.to_status, e.reason or "") for e in events)]


def test_the_handlers_answer_as_the_documented_endpoints(app: Any, client: TestClient, documented: None,
                                                          alice: Any, bob: Any, make_account: Callable[..., Any],
                                                          sdk: Callable[[Any], Any]) -> None:
    bobs_dataset = sdk(bob).datasets.create(dataset="bobs", name="bobs")["id"]
    direct = _cases(client, alice, bob, bobs_dataset, "")
    direct_records = _records(app, alice.user_id)
    carol = make_account("carol")  # the same cases again, for a user with no records yet
    fastapi = _cases(client, carol, bob, bobs_dataset, FASTAPI)
    assert [status for _, (status, _, _) in direct] == [
        401, 401, 422, 422, 422, 422, 200, 422, 422, 400, 400, 400, 404, 404, 200,
        401, 401, 422, 422, 404, 409, 404, 200, 200, 200, 413, 409, 200, 400, 200, 413]
    for (path, answer), (_, expected) in zip(direct, fastapi, strict=True):
        assert answer == expected, path
        if answer[0] >= 400:
            assert set(answer[1]) >= {"error"}, answer
    assert _records(app, carol.user_id) == direct_records
