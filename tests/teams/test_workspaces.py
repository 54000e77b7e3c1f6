"""A team's workspace through the datasets and projects API: an editor creates in it (``owner`` in the body, as
the SDK sends it), every member reads its private things and lists them, a viewer cannot change them (403 naming
the role), and anyone outside gets the 404 of a thing that does not exist."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def team(client: Any, make_account: Any) -> dict[str, Any]:
    people = {n: make_account(n) for n in ("olga", "ed", "vic", "eve")}
    assert client.post("/api/teams", json={"name": "acme"}, headers=people["olga"].headers).status_code == 201
    for name, role in (("ed", "editor"), ("vic", "viewer")):
        client.post("/api/teams/acme/members", json={"username": name, "role": role},
                    headers=people["olga"].headers)
    return people


@pytest.mark.parametrize("kind, key", [("datasets", "dataset"), ("projects", "project")])
def test_members_share_the_team_workspace(client: Any, team: dict[str, Any], kind: str, key: str) -> None:
    ed, vic, eve = team["ed"], team["vic"], team["eve"]
    made = client.post(f"/api/{kind}", json={"name": "Parts", "owner": "acme"}, headers=ed.headers)
    assert made.status_code == 201 and made.json()["owner"] == "acme", made.text
    refused = client.post(f"/api/{kind}", json={"name": "Mine", "owner": "acme"}, headers=vic.headers)
    assert refused.status_code == 403 and refused.json()["requiredRole"] == "editor"
    assert client.post(f"/api/{kind}", json={"name": "Theirs", "owner": "acme"},
                       headers=eve.headers).status_code == 404
    assert client.post(f"/api/{kind}", json={"name": "Theirs", "owner": "olga"},
                       headers=eve.headers).status_code == 404  # a person's workspace is theirs alone

    path = f"/api/{kind}/acme/parts"
    for member in (ed, vic, team["olga"]):
        assert client.get(path, headers=member.headers).status_code == 200
        listed = client.get(f"/api/{kind}/acme", headers=member.headers).json()[kind]
        assert [item[key] for item in listed] == ["parts"]
    assert client.get(path, headers=eve.headers).status_code == 404
    assert client.get(f"/api/{kind}/acme", headers=eve.headers).json()[kind] == []

    assert client.patch(path, json={"description": "bolts"}, headers=ed.headers).status_code == 200
    viewer = client.patch(path, json={"description": "nuts"}, headers=vic.headers)
    assert viewer.status_code == 403 and viewer.json()["code"] == "role_required"
    assert client.patch(path, json={"description": "nuts"}, headers=eve.headers).status_code == 404
    assert client.get(path, headers=vic.headers).json()[key]["description"] == "bolts"

    client.delete("/api/teams/acme/members/ed", headers=team["olga"].headers)  # removed: locked out at once
    assert client.get(path, headers=ed.headers).status_code == 404
