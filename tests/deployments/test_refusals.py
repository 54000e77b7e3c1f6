"""What ``deployments.*`` refuses, on SQLite and PostgreSQL, with the endpoint supervisor off (nothing is
launched, so a deployment stays ``creating``): another user sees nothing of alice's deployments (404, and 403
to create in her workspace), and every bad request is a clear 4xx (``{"error": ...}``) that changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics_platform import APIError, Platform

from lanner.app import create_app
from lanner.config import Settings
from tests.conftest import TEST_URL, Account
from tests.deployments.conftest import attach, attach_onnx


@pytest.fixture
def quiet(settings: Settings) -> Settings:
    return settings.model_copy(update={"endpoint_poll_seconds": 0, "supervisor_interval_seconds": 0,
                                       "maintenance_interval_seconds": 0, "export_poll_seconds": 0})


def refused(call: Any, status: int) -> str:
    with pytest.raises(APIError) as caught:
        call()
    assert caught.value.status_code == status, caught.value.body
    body = caught.value.json
    assert isinstance(body, dict) and isinstance(body.get("error"), str), caught.value.body
    return body["error"]


def test_other_users_see_nothing_and_bad_requests_are_refused(quiet: Settings, shapes_detector: Any) -> None:
    app = create_app(quiet)
    try:
        with TestClient(app) as client:
            from lanner.accounts import service as accounts_service

            keys = {}
            with app.state.lanner.db.session() as session:
                for name in ("alice", "bob"):
                    user = accounts_service.create_user(session, username=name)
                    keys[name] = (user.id, accounts_service.create_api_key(session, user=user)[1])
            alice = Account("alice", keys["alice"][0], keys["alice"][1], {})
            model_id = attach(app, alice, shapes_detector)
            a = Platform(api_key=keys["alice"][1], base_url=TEST_URL, http_client=client, max_retries=0)
            b = Platform(api_key=keys["bob"][1], base_url=TEST_URL, http_client=client, max_retries=0)
            _refusals(app, client, a, b, keys, model_id)
    finally:
        app.state.lanner.db.dispose()


def _refusals(app: Any, client: TestClient, a: Platform, b: Platform, keys: dict[str, Any], model_id: str) -> None:
    create = {"project": "shapes", "model": "tiny", "region": "europe-west4"}
    first = a.deployments.create("alice", deployment="tiny", name="Tiny", **create)
    second = a.deployments.create("alice", deployment="Tiny", name="Tiny again", **create)
    assert (first["deployment"], second["deployment"]) == ("tiny", "tiny-2")  # a taken name gets -2

    # Another user: nothing of alice's exists for bob; he cannot create in her workspace.
    assert "your own workspace" in refused(lambda: b.deployments.create("alice", deployment="x", name="x",
                                                                        **create), 403)
    assert b.deployments.list("alice") == {"deployments": [], "total": 0.0, "region": "us"}
    for call in (lambda: b.deployments.retrieve("alice", "tiny"), lambda: b.deployments.health("alice", "tiny"),
                 lambda: b.deployments.logs("alice", "tiny"), lambda: b.deployments.metrics("alice", "tiny"),
                 lambda: b.deployments.update("alice", "tiny", body={"action": "stop"}),
                 lambda: b.deployments.delete("alice", "tiny"),
                 lambda: b.deployments.predict("alice", "tiny", body={"file": b"x"})):
        assert "not found" in refused(call, 404)
    prometheus = client.get("/metrics", headers={"Authorization": f"Bearer {keys['bob'][1]}"})
    assert prometheus.status_code == 200 and "tiny" not in prometheus.text
    assert 'deployment="tiny"' in client.get("/metrics", headers={"Authorization": f"Bearer {keys['alice'][1]}"}).text
    assert client.get("/metrics").status_code == 401

    # Bad requests.
    assert "not offered" in refused(lambda: a.deployments.create("alice", deployment="x", name="x", project="shapes",
                                                                 model="tiny", region="mars-north1"), 422)
    refused(lambda: a.deployments.create("alice", deployment="x", name="x", cpu=3, **create), 422)
    refused(lambda: a.deployments.create("alice", deployment="!!!", name="x", **create), 422)
    assert "not found" in refused(lambda: a.deployments.create("alice", deployment="x", name="x", project="shapes",
                                                               model="nope", region="europe-west4"), 404)
    client.post("/api/models", json={"project": "shapes", "model": "empty", "name": "empty"},
                headers={"Authorization": f"Bearer {keys['alice'][1]}"})
    assert "no weights" in refused(lambda: a.deployments.create("alice", deployment="x", name="x", project="shapes",
                                                                model="empty", region="europe-west4"), 409)
    onnx = client.post("/api/deployments/alice", headers={"Authorization": f"Bearer {keys['alice'][1]}"},
                       json={"deployment": "x", "name": "x", "runtime": "onnx", **create})
    assert onnx.status_code == 409 and "ONNX export" in onnx.json()["error"]
    assert "exactly one" in refused(lambda: a.deployments.update("alice", "tiny", body={"name": "n",
                                                                                        "metadata": {}}), 400)
    assert "resize takes" in refused(lambda: a.deployments.update("alice", "tiny", body={"action": "resize"}), 400)
    assert "replace takes" in refused(lambda: a.deployments.update("alice", "tiny", body={"action": "replace"}), 400)
    camera = client.patch("/api/deployments/alice/tiny", json={"action": "camera", "url": "rtsp://cam/1"},
                          headers={"Authorization": f"Bearer {keys['alice'][1]}"})
    assert camera.status_code == 501 and camera.json()["code"] == "not_implemented"
    assert "already exists" in refused(lambda: a.deployments.update("alice", "tiny-2", body={"name": "tiny"}), 409)
    refused(lambda: a.deployments.logs("alice", "tiny", severity="LOUD"), 422)
    refused(lambda: a.deployments.logs("alice", "tiny", page_token="abc"), 422)

    assert "is creating" in refused(lambda: a.deployments.predict("alice", "tiny", body={"file": b"x"}), 409)

    # An ONNX export of the model's weights is served by ONNX Runtime; a deleted name is free again.
    assert a.deployments.retrieve("alice", "tiny")["deployment"]["runtime"] == "pytorch"
    export_id = attach_onnx(app, model_id, _onnx_placeholder(app))
    a.deployments.delete("alice", "tiny")
    renewed = a.deployments.retrieve("alice", a.deployments.create("alice", deployment="tiny", name="Tiny",
                                                                   **create)["deployment"])["deployment"]
    assert renewed["deployment"] == "tiny" and renewed["runtime"] == "onnx"
    from lanner.deployments.models import Deployment

    with app.state.lanner.db.session() as session:
        assert session.get(Deployment, renewed["id"]).export_id == export_id
    pinned = client.post("/api/deployments/alice", headers={"Authorization": f"Bearer {keys['alice'][1]}"},
                         json={"deployment": "pt", "name": "pt", "runtime": "pytorch", **create})
    assert pinned.status_code == 201
    assert a.deployments.retrieve("alice", "pt")["deployment"]["runtime"] == "pytorch"


def _onnx_placeholder(app: Any) -> Any:
    """Bytes standing in for an ONNX file: nothing is launched here, only the choice of runtime is checked."""
    path = app.state.lanner.settings.resolved_home / "placeholder.onnx"
    path.write_bytes(b"onnx placeholder")
    return path


def test_dedicated_endpoints_spend_no_request_budget(quiet: Settings, shapes_detector: Any) -> None:
    """The hosted "no rate limits" (LANNER_ENDPOINT_PATHS): with 2 API requests a minute, a create and any
    number of predicts (409 here: nothing is launched) leave one request for the rest of the API."""
    app = create_app(quiet.model_copy(update={"api_rate_limit": "2/minute"}))
    try:
        with TestClient(app) as client:
            from lanner.accounts import service as accounts_service

            with app.state.lanner.db.session() as session:
                user = accounts_service.create_user(session, username="alice")
                key = accounts_service.create_api_key(session, user=user)[1]
            attach(app, Account("alice", user.id, key, {}), shapes_detector)
            a = Platform(api_key=key, base_url=TEST_URL, http_client=client, max_retries=0)
            a.deployments.create("alice", deployment="tiny", name="Tiny", project="shapes", model="tiny",
                                 region="us-east1")
            for _ in range(5):
                refused(lambda: a.deployments.predict("alice", "tiny", body={"file": b"x"}), 409)
            assert a.deployments.retrieve("alice", "tiny")["deployment"]["status"] == "creating"
            assert "too many API requests" in refused(lambda: a.deployments.list("alice"), 429)
    finally:
        app.state.lanner.db.dispose()


def test_regions_are_the_operators(settings: Settings) -> None:
    from lanner.deployments.service import offered_regions

    assert len(offered_regions(settings)) == 42 and set(offered_regions(settings).values()) == {"local"}
    listed = settings.model_copy(update={"deploy_regions": "us-central1, europe-west4"})
    assert offered_regions(listed) == {"us-central1": "local", "europe-west4": "local"}
    mapped = settings.model_copy(update={"deploy_regions": '{"us-central1": "ray", "europe-west4": "local"}'})
    assert offered_regions(mapped) == {"us-central1": "ray", "europe-west4": "local"}
    for bad in ("mars-north1", '{"us-central1": "moon"}', "{not json"):
        with pytest.raises(ValueError, match="LANNER_DEPLOY_REGIONS"):
            offered_regions(settings.model_copy(update={"deploy_regions": bad}))
    with pytest.raises(ValueError, match="LANNER_RAY_ADDRESS"):
        create_app(mapped, migrate=False)
