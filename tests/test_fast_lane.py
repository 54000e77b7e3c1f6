"""The fast lane (``lanner.http.direct_route.FastLane``): API clients' requests to the metrics webhook skip the app's
middleware stack and router, and must be answered as the stack answers them. Any cookie sends a request the
whole way (a browser's may be a session, which the CSRF check guards), so every case here is sent both ways and
the two answers compared: status, body and the headers the middlewares add."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.config import Settings
from lanner.http.direct_route import FastLane
from tests.test_protocol import start

WEBHOOK = "/api/webhooks/training/metrics"
LIMIT = 64 * 1024
WHOLE_WAY = {"Cookie": "unrelated=1"}  # not a session: the CSRF check passes a bearer request either way
HEADERS = ("content-type", "x-content-type-options", "referrer-policy", "retry-after", "connection")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"max_body_bytes": LIMIT})


@pytest.fixture
def both_ways(app: Any) -> Iterator[TestClient]:
    """A client that shows a server error as its 500, the way a trainer sees it."""
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _scope(method: str = "POST", path: str = WEBHOOK, **headers: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "",
            "headers": [(name.encode(), value.encode()) for name, value in headers.items()]}


def test_it_takes_api_clients_on_the_webhook_only(app: Any) -> None:
    lane: FastLane = app.fast_lane
    assert lane.match(_scope(authorization="Bearer ul_x")) is not None
    assert lane.match(_scope(authorization="bearer ul_x", **{"content-type": "application/json"})) is not None
    assert lane.match(_scope()) is None  # no key: the 401 comes from the stack
    assert lane.match(_scope(authorization="Basic dTpw")) is None
    assert lane.match(_scope(authorization="Bearer ul_x", cookie="lanner_session=s")) is None  # a browser
    assert lane.match(_scope("GET", authorization="Bearer ul_x")) is None
    assert lane.match(_scope(path="/api/projects", authorization="Bearer ul_x")) is None
    assert lane.match(_scope(path=WEBHOOK + "/", authorization="Bearer ul_x")) is None


def _answer(response: Any) -> tuple[int, Any, dict[str, str]]:
    return response.status_code, response.json(), {h: response.headers[h] for h in HEADERS if h in response.headers}


def _both(client: TestClient, headers: dict[str, str], **request: Any) -> tuple[Any, Any]:
    lane = client.post(WEBHOOK, headers=headers, **request)
    whole = client.post(WEBHOOK, headers={**headers, **WHOLE_WAY}, **request)
    return _answer(lane), _answer(whole)


def test_answers_are_the_stacks(both_ways: TestClient, sdk: Any, alice: Any, bob: Any) -> None:
    model_id = start(sdk(alice), epochs=100)["modelId"]
    as_json = {**alice.headers, "Content-Type": "application/json"}
    for epoch in (0, 1):  # a new epoch each way, answered alike
        lane = _answer(both_ways.post(WEBHOOK, headers=alice.headers, json={
            "modelId": model_id, "event": "epoch_end", "data": {"epoch": 2 * epoch}}))
        whole = _answer(both_ways.post(WEBHOOK, headers={**alice.headers, **WHOLE_WAY}, json={
            "modelId": model_id, "event": "epoch_end", "data": {"epoch": 2 * epoch + 1}}))
        assert lane == whole and lane[0] == 200 and lane[2]["x-content-type-options"] == "nosniff", lane
    cases = {
        "not JSON": (as_json, {"content": b"{not json"}),
        "wrong key": ({"Authorization": "Bearer ul_" + "0" * 40}, {"json": {"event": "epoch_end"}}),
        "another user's model": (bob.headers, {"json": {"modelId": model_id, "event": "epoch_end",
                                                        "data": {"epoch": 5}}}),
        "unknown model": (alice.headers, {"json": {"modelId": "nope", "event": "epoch_end", "data": {"epoch": 5}}}),
        "declared length over the limit": (as_json, {"content": json.dumps({
            "modelId": model_id, "event": "console_output", "data": {"chunkId": 1, "content": "x" * LIMIT}})}),
        "chunked body over the limit": (as_json, {"content": iter([b'{"event": "console_output", "data": {"c": "',
                                                                   *[b"x" * 8192] * 10, b'"}}'])}),
    }
    for name, (headers, request) in cases.items():
        if name.startswith("chunked"):  # an iterator is spent by one request
            lane = _answer(both_ways.post(WEBHOOK, headers=headers, **request))
            request = {"content": iter([b'{"event": "console_output", "data": {"c": "', *[b"x" * 8192] * 10,
                                        b'"}}'])}
            whole = _answer(both_ways.post(WEBHOOK, headers={**headers, **WHOLE_WAY}, **request))
        else:
            lane, whole = _both(both_ways, headers, **request)
        assert lane == whole, name
        assert lane[0] >= 400 and isinstance(lane[1]["error"], str), (name, lane)
    stored = sdk(alice).models.retrieve("alice", "shapes", "train")["model"]["trainResults"]
    assert sorted(r["epoch"] for r in stored) == [0, 1, 2, 3]  # the refused events stored nothing


def test_an_unexpected_error_is_the_apis_500(both_ways: TestClient, app: Any, alice: Any, sdk: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    model_id = start(sdk(alice))["modelId"]

    async def broken(*_: Any) -> dict[str, Any]:
        raise RuntimeError("the writer broke")

    monkeypatch.setattr(app.state.training.writer, "submit", broken)
    lane, whole = _both(both_ways, alice.headers, json={"modelId": model_id, "event": "epoch_end",
                                                         "data": {"epoch": 0}})
    assert lane[:2] == whole[:2]
    assert lane[0] == 500 and lane[1] == {"error": "internal server error", "code": "internal"}
    # The stack answers it outside the security headers (Starlette's ServerErrorMiddleware); the lane inside.
    assert lane[2]["x-content-type-options"] == "nosniff" and lane[2]["content-type"] == whole[2]["content-type"]
