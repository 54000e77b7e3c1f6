"""The metrics webhook is served by a ``DirectRoute`` (``lanner.http.direct_route``): FastAPI does not solve its
dependencies or parse its body, so what they did is checked here: it is documented as before, authenticates
with the same rules (a revoked key stops at once even while cached, the worker budget applies), and answers bad
bodies with the API's 422."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.accounts import service as accounts_service
from lanner.app import ROUTERS, create_app
from lanner.config import Settings
from lanner.http.direct_route import DirectRoute
from tests.test_protocol import start

WEBHOOK = "/api/webhooks/training/metrics"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Keys stay cached for a minute, as in production (the suite's default turns the cache off)."""
    return settings.model_copy(update={"api_key_cache_seconds": 60.0})


def test_it_is_documented_by_its_signature_and_matched_before_every_other_router(app):
    route = next(r for r in ROUTERS[0].routes if getattr(r, "path", None) == WEBHOOK)
    assert isinstance(route, DirectRoute)
    operation = app.openapi()["paths"][WEBHOOK]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/MetricsEvent"}
    assert "422" in operation["responses"]


@pytest.mark.parametrize("body, error", [
    (b"{not json", "request body is not valid JSON"),
    (b"", "request body is not valid JSON"),
    (b'{"event": "nope"}', "event: Input should be"),
    (b'{"event": "epoch_end", "data": []}', "data: Input should be"),
    (b'{"event": "epoch_end", "modelId": "' + b"x" * 65 + b'"}', "modelId: String should have at most 64"),
])
def test_bad_bodies_get_the_apis_422(client, alice, body, error):
    response = client.post(WEBHOOK, content=body, headers={**alice.headers, "Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid" and response.json()["error"].startswith(error), response.text


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "1e400", "9" * 120 + ".5e200", "1" + "0" * 400 + ".0"])
def test_numbers_no_float_can_hold_are_kept_as_null(client, sdk, alice, number):
    """The one-pass parse (pydantic's JSON parser, not Python's) still turns them into null, as the trainer does."""
    model_id = start(sdk(alice), epochs=10)["modelId"]
    metrics = '{"val/box_loss": 1.5, "train/box_loss": ' + number + "}"
    body = f'{{"modelId": "{model_id}", "event": "epoch_end", "data": {{"epoch": 0, "metrics": {metrics}}}}}'.encode()
    response = client.post(WEBHOOK, content=body, headers={**alice.headers, "Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    stored = sdk(alice).models.retrieve("alice", "shapes", "train")["model"]["trainResults"][0]["metrics"]
    assert stored["val/box_loss"] == 1.5 and stored.get("train/box_loss") is None


def test_no_key_or_a_wrong_one_is_a_401(client):
    assert client.post(WEBHOOK, json={"event": "epoch_end"}).status_code == 401
    response = client.post(WEBHOOK, json={"event": "epoch_end"}, headers={"Authorization": "Bearer ul_" + "0" * 40})
    assert response.status_code == 401 and isinstance(response.json()["error"], str)


def test_a_revoked_key_stops_at_once_though_it_is_cached(client, sdk, alice, app):
    model_id = start(sdk(alice))["modelId"]
    event = {"modelId": model_id, "event": "console_output", "data": {"chunkId": 1, "content": "x\n"}}
    assert client.post(WEBHOOK, json=event, headers=alice.headers).status_code == 200  # now cached
    with app.state.lanner.db.session() as session:
        (key,) = accounts_service.list_api_keys(session, user_id=alice.user_id)
        key_id = key.id
    assert client.delete(f"/api/api-keys/{key_id}", headers=alice.headers).status_code == 200
    response = client.post(WEBHOOK, json=event, headers=alice.headers)
    assert response.status_code == 401, response.text


def test_the_worker_budget_applies(settings: Settings, make_account: Any) -> None:
    app = create_app(settings.model_copy(update={"worker_rate_limit": "3/minute"}))
    try:
        with TestClient(app) as client:
            with app.state.lanner.db.session() as session:
                user = accounts_service.create_user(session, username="carol")
                _, key = accounts_service.create_api_key(session, user=user)
            headers = {"Authorization": f"Bearer {key}"}
            started = client.post(WEBHOOK, headers=headers, json={
                "event": "training_started", "project": "carol/p", "name": "t", "data": {"epochs": 3}})
            assert started.status_code == 200, started.text
            for epoch in range(2):
                event = {"modelId": started.json()["modelId"], "event": "epoch_end", "data": {"epoch": epoch}}
                assert client.post(WEBHOOK, headers=headers, json=event).status_code == 200
            refused = client.post(WEBHOOK, headers=headers, json=event)
            assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    finally:
        app.state.lanner.db.dispose()
