"""The trainer's checkpoint upload slot (``/api/webhooks/models/upload``) is served by a ``DirectRoute`` handler
in one thread hop (the trainer waits for it at the end of training). What FastAPI's dependencies did for it is
checked here: documented as before, the same key rules, the API's 422 for a bad body, the slot committed before
the answer, and the answer the documented endpoint gives."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from lanner.accounts import service as accounts_service
from lanner.http.direct_route import DirectRoute
from lanner.training import router as training_router
from lanner.training.models import StagedUpload
from lanner.training.schemas import UploadCheckpointRequest
from tests.test_protocol import start

SLOT = "/api/webhooks/models/upload"


def test_it_is_served_directly_and_documented_by_its_signature(app):
    route = next(r for r in training_router.router.routes if getattr(r, "path", None) == SLOT)
    assert isinstance(route, DirectRoute) and route.endpoint.direct_handler is training_router._serve_upload_slot
    operation = app.openapi()["paths"][SLOT]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/UploadCheckpointRequest"}


def test_the_slot_is_staged_before_the_answer_and_takes_the_upload(client, sdk, alice, app):
    started = start(sdk(alice))
    response = client.post(SLOT, headers=alice.headers, json={"modelId": started["modelId"],
                                                                "runId": started["runId"], "filename": "best.pt"})
    assert response.status_code == 200, response.text
    slot = response.json()
    assert set(slot) == {"uploadUrl", "gcsPath", "uploadPath", "modelId"}
    assert slot["modelId"] == started["modelId"] and slot["gcsPath"] == slot["uploadPath"]
    with app.state.lanner.db.session() as session:
        staged = session.get(StagedUpload, slot["gcsPath"])
        assert staged is not None and staged.run_id == started["runId"] and staged.filename == "best.pt"
    url = urlsplit(slot["uploadUrl"])
    put = client.put(f"{url.path}?{url.query}", content=b"weights")
    assert put.status_code == 200 and put.json()["size"] == 7, put.text


def test_its_answer_is_the_documented_endpoints(sdk, alice, app):
    """The endpoint (still a correct implementation, FastAPI's way) and the handler build the same answer."""
    started = start(sdk(alice))
    ctx = app.state.lanner
    body = UploadCheckpointRequest(filename="last.pt", modelId=started["modelId"])
    with ctx.db.session() as session:
        principal = accounts_service.authenticate_key(session, key=alice.key, cache={}, ttl=0)
        documented = training_router.upload_checkpoint(body, principal, session, ctx)
    assert documented["modelId"] == started["modelId"] and documented["gcsPath"].endswith("/last.pt")
    assert documented["uploadUrl"].startswith(ctx.settings.public_url)


@pytest.mark.parametrize("body, error", [
    (b"{not json", "request body is not valid JSON"),
    (b'{"modelId": "m"}', "filename: Field required"),
    (b'{"filename": "best.pt", "runId": 0}', "runId: Input should be greater than or equal to 1"),
])
def test_bad_bodies_get_the_apis_422(client, alice, body, error):
    response = client.post(SLOT, content=body, headers={**alice.headers, "Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid" and response.json()["error"].startswith(error), response.text


def test_keys_and_owners_are_checked_as_before(client, sdk, alice, bob):
    started = start(sdk(alice))
    body = {"modelId": started["modelId"], "filename": "best.pt"}
    assert client.post(SLOT, json=body).status_code == 401
    assert client.post(SLOT, json=body, headers={"Authorization": "Bearer ul_" + "0" * 40}).status_code == 401
    assert client.post(SLOT, json=body, headers=bob.headers).status_code == 404  # as if it did not exist
    refused = client.post(SLOT, json={**body, "filename": "notes.txt"}, headers=alice.headers)
    assert refused.status_code == 422 and "checkpoint file name" in refused.json()["error"]
