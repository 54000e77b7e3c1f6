"""Endpoints and shared inference in a team's workspace (endpoint supervisor off: a deployment stays
``creating``): an editor deploys the team's model and the team pays for its time, members read and predict by
role, outsiders see nothing, and a member removed a moment ago is refused at once by the predict proxy."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics_platform import APIError, Platform

from lanner.app import create_app
from lanner.config import Settings
from tests.conftest import TEST_URL, Account
from tests.inference.conftest import attach, encoded, shapes_detector, shapes_image  # noqa: F401  (fixtures)

CREATE = {"project": "shapes", "model": "tiny", "region": "europe-west4"}


@pytest.fixture
def quiet(settings: Settings) -> Settings:
    return settings.model_copy(update={"endpoint_poll_seconds": 0, "supervisor_interval_seconds": 0,
                                       "maintenance_interval_seconds": 0, "export_poll_seconds": 0,
                                       "endpoint_price_per_vcpu_hour": 0.05})


def status_of(call: Any) -> int:
    with pytest.raises(APIError) as caught:
        call()
    body = caught.value.json
    assert isinstance(body, dict) and isinstance(body.get("error"), str), caught.value.body
    return caught.value.status_code


def test_a_teams_endpoints_by_role_and_paid_by_the_team(quiet: Settings, shapes_detector: Path) -> None:  # noqa: F811
    from lanner.accounts import service as accounts
    from lanner.accounts.principal import Principal
    from lanner.billing import service as billing
    from lanner.deployments import metering
    from lanner.deployments.models import Deployment
    from lanner.teams import service as teams

    app = create_app(quiet)
    db = app.state.lanner.db
    try:
        with TestClient(app) as client:
            with db.session() as session:  # short sessions: on SQLite an open transaction holds the write lock
                users = {n: accounts.create_user(session, username=n) for n in ("olga", "ed", "vic", "eve")}
                ids = {n: u.id for n, u in users.items()}
                keys = {n: accounts.create_api_key(session, user=u)[1] for n, u in users.items()}
                for name in ("ed", "eve"):
                    billing.top_up(session, user_id=users[name].id, micros=5_000_000)
                team = teams.create_team(session, name="acme", owner=users["olga"])
                team_id = team.id
                billing.top_up(session, user_id=team.id, micros=5_000_000)
                olga = Principal.of(users["olga"])
                teams.add_member(session, olga, "acme", "ed", "editor")
                teams.add_member(session, olga, "acme", "vic", "viewer")
            attach(app, Account("acme", team_id, "", {}), shapes_detector)  # the team's model acme/shapes/tiny
            sdk = {n: Platform(api_key=k, base_url=TEST_URL, http_client=client, max_retries=0)
                   for n, k in keys.items()}

            made = sdk["ed"].deployments.create("acme", deployment="line", name="Line", **CREATE)
            assert made["deployment"] == "line"
            assert status_of(lambda: sdk["vic"].deployments.create("acme", deployment="v", name="v", **CREATE)) == 403
            assert status_of(lambda: sdk["eve"].deployments.create("acme", deployment="e", name="e", **CREATE)) == 403
            listed = sdk["vic"].deployments.list("acme")
            assert [d["deployment"] for d in listed["deployments"]] == ["line"]
            assert "/acme/" in listed["deployments"][0]["serviceUrl"]
            assert sdk["vic"].deployments.retrieve("acme", "line")["deployment"]["deployment"] == "line"
            assert status_of(lambda: sdk["vic"].deployments.update("acme", "line", body={"action": "stop"})) == 403
            assert status_of(lambda: sdk["vic"].deployments.delete("acme", "line")) == 403
            assert sdk["eve"].deployments.list("acme")["deployments"] == []
            assert status_of(lambda: sdk["eve"].deployments.retrieve("acme", "line")) == 404

            image = encoded(shapes_image())
            path = "/api/deployments/acme/line/predict"
            auth = {n: {"Authorization": f"Bearer {k}"} for n, k in keys.items()}
            assert client.post(path, files={"file": ("a.jpg", image)}, headers=auth["vic"]).status_code == 409
            assert client.post(path, files={"file": ("a.jpg", image)}, headers=auth["eve"]).status_code == 404
            client.delete("/api/teams/acme/members/vic", headers=auth["olga"]).raise_for_status()
            gone = client.post(path, files={"file": ("a.jpg", image)}, headers=auth["vic"])
            assert gone.status_code == 404, gone.text  # at once: a team's route is never cached

            shared = client.post("/api/models/acme/shapes/tiny/predict", files={"file": ("a.jpg", image)},
                                 headers=auth["ed"])
            assert shared.status_code == 200, shared.text  # shared inference on the team's private model
            outside = client.post("/api/models/acme/shapes/tiny/predict", files={"file": ("a.jpg", image)},
                                  headers=auth["eve"])
            assert outside.status_code == 404

            with db.session() as session:
                deployment = session.query(Deployment).filter_by(slug="line").one()
                assert deployment.owner_id == team_id
                metering.start_clock(deployment)
                deployment.billing_since -= timedelta(hours=1)
                metering.meter(session, deployment)
                hour, charged = deployment.price_micros_per_hour, deployment.charged_micros
            assert hour > 0 and hour <= charged < hour * 1.01  # an hour and the test's seconds
            with db.session() as session:
                assert billing.balances(session, user_id=team_id).available == 5_000_000 - charged
                for name in ("ed", "eve"):
                    assert billing.balances(session, user_id=ids[name]).available == 5_000_000

            events = client.get("/api/teams/acme/activity", headers=auth["olga"]).json()["events"]
            assert ("ed", "created", "endpoint acme/line") in [(e["actor"], e["action"], e["target"]) for e in events]
    finally:
        db.dispose()
