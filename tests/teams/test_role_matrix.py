"""Every route of the OpenAPI document, for each role, against a team's resources: the permission table
(``lanner/teams/permissions.py``) as the API answers it.

The team ``acme`` (owner olga) holds one of everything (``tests.world.build`` in its workspace). Each operation
of the route matrix (``tests/test_route_matrix.py``: the same generated requests, so a new route is covered here
without editing this file) needs the least role ``needed()`` says. Then:

- a non-member, and a member removed a moment before, get 403 or 404 from every operation (404 from every read),
  and the team's resources are as they were;
- a viewer gets an answer (not 401, 403, 404 or 5xx) from what a viewer may do, and a 403 naming the role from
  everything else;
- an editor, on a world of its own, gets an answer from everything up to editor (writes and deletes last) and a
  403 naming ``admin`` from the team's management;
- an admin manages members and invitations and reads the activity log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanner.accounts.service import require_user
from lanner.app import create_app
from lanner.billing import service as billing
from tests.conftest import copy_of
from tests.test_route_matrix import MATRIX, request_for, snapshot
from tests.world import Owned, User, build, make_user, quiet_settings

ROLES = ("viewer", "editor", "admin", "owner")
TEAM = "acme"

# POSTs that only read the team's things: a viewer's. (A clone is an editor's here: the generated body names the
# team as the workspace it goes into.)
READS = {
    ("POST", "/api/models/{owner}/{project}/{model}/predict"): "shared inference on a model the caller may read",
    ("POST", "/api/images/{image_id}/predict"): "predictions for an image: nothing is stored",
    ("POST", "/api/deployments/{owner}/{deployment}/predict"): "a prediction from the team's endpoint",
    ("POST", "/api/training/estimate"): "an estimate for a dataset the caller may read",
    ("POST", "/api/images/urls"): "signed links to images the caller may read",
    ("POST", "/api/datasets/{owner}/{dataset}/images"): "images.list with filters in the body",
    ("POST", "/api/datasets/{owner}/{dataset}/bucket-check"): "compares the dataset's bucket images with the bucket: "
                                                              "reports, changes no content",
}
# Operations on something personal of the team's owner (not the team's): nobody else reaches them.
PERSONAL = {
    ("DELETE", "/api/api-keys/{key_id}"): "the owner's own API key",
    ("POST", "/api/upload/complete"): "the owner's own upload session",
    ("POST", "/api/mobile/models/{export_id}"): "a signed import link: its signature is the credential",
    ("GET", "/api/integrations/buckets/{id}/objects"): "the owner's own storage integration (they are personal)",
    ("GET", "/api/integrations/buckets/{id}/scan"): "the owner's own storage integration",
    ("PATCH", "/api/integrations/buckets/{id}"): "the owner's own storage integration",
    ("DELETE", "/api/integrations/buckets/{id}"): "the owner's own storage integration",
    ("PATCH", "/api/users"): "following the owner, a person with nothing public: the 404 of a name nobody has "
                             "(tests/accounts/test_account_sdk.py follows)",
}
# An editor's request the generated call cannot make as the editor's own: each with why, and the answer it gets.
EDITOR_OTHERS = {
    ("POST", "/api/datasets/{owner}/{dataset}/ingest"): (404, "ingests an upload session, which is its uploader's: "
                                                              "tests/training/test_team_runs.py has a member upload "
                                                              "into the team's dataset"),
    ("POST", "/api/datasets/{owner}/{dataset}/proposals"): (404, "past the role check, the generated body's image "
                                                                 "'x' does not exist (the world's weights are 7 bytes, "
                                                                 "no model to run): tests/annotation propose for real"),
    ("POST", "/api/datasets/{owner}/{dataset}/bucket-imports"): (404, "names the owner's storage integration, which "
                                                                        "is personal: an editor imports from one "
                                                                        "of their own"),
    ("POST", "/api/webhooks/models/upload/complete"): (404, "past the role check, the generated uploadPath 'x' "
                                                                "names no checkpoint slot: tests/storage/"
                                                                "test_bucket_worker_uploads.py completes real ones"),
    ("DELETE", "/api/trash"): (404, "the editor restored that dataset a moment before (POST /api/trash); the viewer's "
                                    "403 shows the check"),
}
# A read whose generated query names something the world does not hold: past the role check it is the 404 of a
# missing thing, for a viewer as for an editor.
READ_MISSING = {
    ("GET", "/api/datasets/{owner}/{dataset}/predict/batch/preview"): (404, "the generated jobId 'x' names no "
                                                                            "preview run (the world's weights are 7 "
                                                                            "bytes): tests/autolabel preview for "
                                                                            "real"),
}
EDITOR_OTHERS.update(READ_MISSING)
ADMIN_PATHS = ("/api/teams/{team}/", "/api/datasets/{owner}/{dataset}/transfer",
               "/api/projects/{owner}/{project}/transfer")


def needed(method: str, path: str) -> str | None:
    """The least role the permission table gives this operation on the team's things (None: no member's)."""
    if (method, path) in PERSONAL:
        return None
    if (method, path) == ("GET", "/api/teams/{team}/members"):
        return "viewer"
    if (method, path) == ("DELETE", "/api/teams/{team}"):
        return "owner"
    if path.startswith(ADMIN_PATHS):
        return "admin"
    if method == "GET" or (method, path) in READS:
        return "viewer"
    return "editor"


def allowed(role: str, method: str, path: str) -> bool:
    least = needed(method, path)
    return least is not None and ROLES.index(role) >= ROLES.index(least)


def _world(work: Path, template: Path) -> Iterator[tuple[TestClient, Owned, dict[str, User]]]:
    app = create_app(quiet_settings(work / "home", copy_of(template, work)))
    with TestClient(app, raise_server_exceptions=False) as client:
        olga = make_user(app, "olga", credits_micros=100_000_000)
        assert client.post("/api/teams", json={"name": TEAM}, headers=olga.headers).status_code == 201
        with app.state.lanner.db.session() as session:  # the team pays for the run and export the world starts
            billing.top_up(session, user_id=require_user(session, username=TEAM).id, micros=100_000_000)
        people = {"olga": olga}
        for name, role in (("ada", "admin"), ("ed", "editor"), ("vic", "viewer"), ("rem", "editor")):
            people[name] = make_user(app, name, credits_micros=100_000_000)
            added = client.post(f"/api/teams/{TEAM}/members", json={"username": name, "role": role},
                                headers=olga.headers)
            assert added.status_code == 201, added.text
        people["eve"] = make_user(app, "eve", credits_micros=100_000_000)
        owned = build(app, client, olga, work, team=TEAM)
        assert client.delete(f"/api/teams/{TEAM}/members/rem", headers=olga.headers).status_code == 200
        yield client, owned, people
    app.state.lanner.db.dispose()


@pytest.fixture(scope="module")
def team_world(tmp_path_factory: pytest.TempPathFactory,
               sqlite_template: Path) -> Iterator[tuple[TestClient, Owned, dict[str, User]]]:
    """The world refused callers and the viewer are run against: nothing in it may change."""
    for client, owned, people in _world(tmp_path_factory.mktemp("team-matrix"), sqlite_template):
        before = snapshot(client, owned)
        yield client, owned, people
        assert snapshot(client, owned) == before, "a refused caller or a viewer changed the team's resources"


def call(client: TestClient, owned: Owned, user: User, method: str, path: str) -> Any:
    return client.request(**request_for(method, path, owned), headers=user.headers)


def describe(method: str, path: str, response: Any) -> str:
    return f"{method} {path}: {response.status_code} {response.text[:200]}"


def refused_as_role(response: Any, least: str | None) -> bool:
    """A 403 naming the role needed (or, for what is no member's, the 404 of something that does not exist)."""
    if least is None:
        return response.status_code in (403, 404)
    body = response.json() if response.status_code == 403 else {}
    return body.get("code") == "role_required" and body.get("requiredRole") == least


def answered(response: Any) -> bool:
    """Past the permission check: anything but a refusal or a crash (a 409 or 422 is the request's business)."""
    return response.status_code not in (401, 403, 404) and response.status_code < 500


@pytest.mark.parametrize("who", ["eve", "rem"], ids=["non-member", "removed member"])
def test_outsiders_and_removed_members_reach_nothing(team_world: Any, who: str) -> None:
    client, owned, people = team_world
    wrong = []
    for method, path in MATRIX:
        response = call(client, owned, people[who], method, path)
        ok = response.status_code == 404 if method == "GET" else response.status_code in (403, 404)
        if not ok or not isinstance(response.json().get("error"), str):
            wrong.append(describe(method, path, response))
    assert not wrong, f"{who}:\n" + "\n".join(wrong)


def test_a_viewer_reads_everything_and_changes_nothing(team_world: Any) -> None:
    client, owned, people = team_world
    wrong = []
    for method, path in MATRIX:
        response = call(client, owned, people["vic"], method, path)
        if (method, path) in READ_MISSING:
            ok = response.status_code == READ_MISSING[(method, path)][0] and "not found" in response.json()["error"]
        else:
            ok = answered(response) if allowed("viewer", method, path) else refused_as_role(response,
                                                                                           needed(method, path))
        if not ok:
            wrong.append(describe(method, path, response))
    assert not wrong, "viewer:\n" + "\n".join(wrong)


ROOTS = ("/api/datasets/{owner}/{dataset}", "/api/projects/{owner}/{project}", "/api/models/{owner}/{project}/{model}")


def _editor_order(op: tuple[str, str]) -> tuple[int, int]:
    """Reads, then creations and changes, then deletes, and the datasets, projects and models themselves last
    (an image, an export or an endpoint before what it belongs to); models before projects."""
    method, path = op
    step = {"GET": 0, "POST": 1, "PUT": 1, "PATCH": 2, "DELETE": 3}[method]
    return (step + (1 if method == "DELETE" and path in ROOTS else 0), -len(path))


def test_an_editor_does_everything_but_manage_the_team(tmp_path: Path, sqlite_template: Path) -> None:
    for client, owned, people in _world(tmp_path, sqlite_template):
        wrong = []
        for method, path in sorted(MATRIX, key=_editor_order):
            response = call(client, owned, people["ed"], method, path)
            if (method, path) in EDITOR_OTHERS:
                ok = response.status_code == EDITOR_OTHERS[(method, path)][0]
            elif allowed("editor", method, path):
                ok = answered(response)
            else:
                ok = refused_as_role(response, needed(method, path))
            if not ok:
                wrong.append(describe(method, path, response))
        assert not wrong, "editor:\n" + "\n".join(wrong)


def test_an_admin_manages_members_and_invitations_and_reads_the_activity(team_world: Any) -> None:
    """Last on the shared world: it changes members, not the team's resources."""
    client, owned, people = team_world
    wrong = []
    for method, path in MATRIX:
        if needed(method, path) != "admin" or "/transfer" in path:
            continue  # a transfer would move the world's resources: tests/teams/test_transfers.py moves them
        response = call(client, owned, people["ada"], method, path)
        if "{username}" in path and method == "DELETE":  # the generated member is the team's owner: not an admin's
            if not refused_as_role(response, "owner"):
                wrong.append(describe(method, path, response))
        elif not answered(response):
            wrong.append(describe(method, path, response))
    assert not wrong, "admin:\n" + "\n".join(wrong)
    assert client.get(f"/api/teams/{TEAM}/activity", headers=people["ada"].headers).status_code == 200
