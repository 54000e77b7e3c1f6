"""The model page's endpoints section in-process (the endpoint supervisor is off: nothing is launched): the
owner sees the table, the deploy form and "try it"; the forms create, stop, start and delete through the same
service as the API; htmx gets the table alone; another user gets 404 for every part of it."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.app import create_app
from lanner.config import Settings
from lanner.deployments.places import AREAS
from tests.conftest import Account
from tests.inference.conftest import attach, shapes_detector  # noqa: F401  (a fixture)
from tests.web.pages import PASSWORD, sign_in, soup, text

MODEL_PAGE = "/alice/shapes/tiny"


@pytest.fixture
def quiet_app(settings: Settings) -> Any:
    app = create_app(settings.model_copy(update={"endpoint_poll_seconds": 0, "supervisor_interval_seconds": 0,
                                                 "maintenance_interval_seconds": 0, "export_poll_seconds": 0}))
    yield app
    app.state.lanner.db.dispose()


def _user(app: Any, name: str) -> Account:
    from lanner.accounts import service as accounts_service

    with app.state.lanner.db.session() as session:
        user = accounts_service.create_user(session, username=name, password=PASSWORD)
        key = accounts_service.create_api_key(session, user=user)[1]
    return Account(name, user.id, key, {"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_owner_deploys_stops_starts_and_deletes_from_the_model_page(quiet_app: Any,
                                                                        shapes_detector: Any) -> None:  # noqa: F811
    alice = _user(quiet_app, "alice")
    attach(quiet_app, alice, shapes_detector)
    with TestClient(quiet_app) as client:
        token = sign_in(client)
        page = soup(client.get(MODEL_PAGE))
        assert page.select_one("#deployments-section") and page.select_one("#try-form")
        assert "Not deployed yet" in text(page.select_one("#deployment-list"))
        regions = [o["value"] for o in page.select("#deploy-region option")]
        assert len(regions) == 42 and page.select_one("#deploy-region option[selected]")["value"] == "us-central1"
        assert [g["label"] for g in page.select("#deploy-region optgroup")] == list(AREAS)  # by area, by place
        assert text(page.select_one("#deploy-region option[selected]")) == "Iowa, USA (us-central1)"

        created = client.post(f"{MODEL_PAGE}/deployments", data={"csrf_token": token, "name": "My Endpoint",
                                                                 "region": "europe-west4", "cpu": "2", "memory": "4"},
                              follow_redirects=False)
        assert created.status_code == 303 and created.headers["location"] == f"{MODEL_PAGE}#deployments"
        page = soup(client.get(MODEL_PAGE))
        assert "Deploying my-endpoint with pytorch" in text(page.select_one("#messages"))
        row = page.select_one('#deployments tr[data-slug="my-endpoint"]')
        assert row["data-ready"] == "false" and "creating" in text(row)
        assert "europe-west4" in text(row) and "2 vCPU, 4 GiB" in text(row)
        assert row.select_one("[data-latency]") and not page.select("#try-deployment option")  # nothing ready
        listed = client.get("/api/deployments/alice", headers=alice.headers).json()["deployments"]
        assert [(d["deployment"], d["region"], d["resources"]["cpu"]) for d in listed] == [
            ("my-endpoint", "europe-west4", 2.0)]

        fragment = client.get(f"{MODEL_PAGE}/deployments", headers={"HX-Request": "true"})
        assert fragment.status_code == 200 and fragment.text.lstrip().startswith("<div id=\"deployment-list\"")
        assert 'hx-trigger="every 3s"' in fragment.text  # changing state: polled often

        bad = client.post(f"{MODEL_PAGE}/deployments", data={"csrf_token": token, "region": "mars-north1"},
                          follow_redirects=True)
        assert "not offered" in text(soup(bad).select_one("#messages"))
        assert client.post(f"{MODEL_PAGE}/deployments", data={"region": "us-east1"}).status_code == 403  # no CSRF

        for action, message, status in (("stop", "stopping", "stopping"), ("delete", "deleted", None)):
            done = client.post(f"{MODEL_PAGE}/deployments/my-endpoint/{action}", data={"csrf_token": token},
                               follow_redirects=True)
            assert message in text(soup(done).select_one("#messages"))
            found = client.get("/api/deployments/alice/my-endpoint", headers=alice.headers)
            assert (found.json()["deployment"]["status"] if status else found.status_code) == (status or 404)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_another_user_reaches_no_part_of_it(quiet_app: Any, shapes_detector: Any) -> None:  # noqa: F811
    alice = _user(quiet_app, "alice")
    _user(quiet_app, "bob")
    attach(quiet_app, alice, shapes_detector)
    with TestClient(quiet_app) as client:
        client.post("/api/deployments/alice", headers=alice.headers, json={
            "project": "shapes", "model": "tiny", "deployment": "tiny", "name": "tiny", "region": "us-east1"})
        token = sign_in(client, "bob")
        assert client.get(MODEL_PAGE).status_code == 404
        assert client.get(f"{MODEL_PAGE}/deployments").status_code == 404
        for path in ("deployments", "deployments/tiny/stop", "deployments/tiny/start", "deployments/tiny/delete"):
            assert client.post(f"{MODEL_PAGE}/{path}", data={"csrf_token": token}).status_code == 404
        assert client.get("/api/deployments/alice/tiny", headers=alice.headers).json()["deployment"]["status"] == \
            "creating"
