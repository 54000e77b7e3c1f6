"""The team endpoints with real keys: a person creates a team, adds and invites members, changes roles and
budgets, members leave; ``account.summary`` lists the teams with the caller's role (the SDK's shape) and
``billing.usage_summary`` says teams are on; an outsider gets 404 everywhere, a member whose role is too low
403 naming the role."""

from __future__ import annotations

from typing import Any


def test_a_team_through_the_api(client: Any, make_account: Any) -> None:
    olga, ed, vic, eve = (make_account(n) for n in ("olga", "ed", "vic", "eve"))
    created = client.post("/api/teams", json={"name": "Acme", "fullName": "Acme Vision"}, headers=olga.headers)
    assert created.status_code == 201, created.text
    assert created.json()["team"] | {"userId": ""} == {"userId": "", "username": "acme", "fullName": "Acme Vision",
                                                        "plan": "free", "role": "owner"}
    assert client.post("/api/teams", json={"name": "acme"}, headers=ed.headers).status_code == 409
    assert client.post("/api/teams", json={"name": "!!!"}, headers=ed.headers).status_code == 400
    spaced = client.post("/api/teams", json={"name": "Acme Vision"}, headers=make_account("kim").headers)
    assert spaced.status_code == 201 and spaced.json()["team"] | {"userId": ""} == {
        "userId": "", "username": "acme-vision", "fullName": "Acme Vision", "plan": "free", "role": "owner"}

    added = client.post("/api/teams/acme/members", json={"username": "ed", "role": "editor"}, headers=olga.headers)
    assert added.status_code == 201 and added.json() == {"username": "ed", "role": "editor"}
    assert client.post("/api/teams/acme/members", json={"username": "ed", "role": "boss"},
                       headers=olga.headers).status_code == 422
    invited = client.post("/api/teams/acme/invitations", json={"role": "viewer", "days": 2}, headers=olga.headers)
    assert invited.status_code == 201 and invited.json()["role"] == "viewer"
    token = invited.json()["token"]
    joined = client.post("/api/invitations/accept", json={"token": token}, headers=vic.headers)
    assert joined.json() == {"team": "acme", "role": "viewer"}
    assert client.post("/api/invitations/accept", json={"token": token}, headers=eve.headers).status_code == 404

    summary = client.get("/api/account/summary", headers=ed.headers).json()
    assert summary["accountType"] == "personal"
    assert [(t["username"], t["role"], t["plan"]) for t in summary["teams"]] == [("acme", "editor", "free")]
    assert client.get("/api/account/summary", headers=eve.headers).json()["teams"] == []
    usage = client.get("/api/billing/usage-summary", headers=ed.headers).json()
    assert usage["features"]["teams"] is True

    members = client.get("/api/teams/acme/members", headers=vic.headers).json()["members"]
    assert [(m["username"], m["role"], m["monthlyBudgetCents"]) for m in members] == [
        ("olga", "owner", None), ("ed", "editor", None), ("vic", "viewer", None)]
    for method, path, body in (("GET", "/api/teams/acme/members", None),
                               ("POST", "/api/teams/acme/members", {"username": "eve"}),
                               ("PATCH", "/api/teams/acme/members/ed", {"role": "viewer"}),
                               ("DELETE", "/api/teams/acme/members/ed", None),
                               ("POST", "/api/teams/acme/invitations", {}),
                               ("GET", "/api/teams/acme/activity", None)):
        outside = client.request(method, path, json=body, headers=eve.headers)
        assert outside.status_code == 404 and outside.json()["error"] == "team 'acme' not found", (method, path)
    low = client.patch("/api/teams/acme/members/vic", json={"role": "editor"}, headers=ed.headers)
    assert low.status_code == 403 and low.json()["code"] == "role_required" and low.json()["requiredRole"] == "admin"

    budget = client.patch("/api/teams/acme/members/ed", json={"role": "admin", "monthlyBudgetCents": 5000},
                          headers=olga.headers)
    assert budget.json()["role"] == "admin" and budget.json()["monthlyBudgetCents"] == 5000
    for body in ({}, {"role": "viewer"}):  # not a member (eve), or nobody: the 404 of a missing member
        missing = client.patch("/api/teams/acme/members/eve", json=body, headers=olga.headers)
        assert missing.status_code == 404 and "not a member" in missing.json()["error"], missing.text
    cleared = client.patch("/api/teams/acme/members/ed", json={"clearBudget": True}, headers=olga.headers)
    assert cleared.json()["monthlyBudgetCents"] is None
    assert client.delete("/api/teams/acme/members/vic", headers=vic.headers).json() == {"success": True}  # leaves
    assert client.get("/api/teams/acme/members", headers=vic.headers).status_code == 404  # at once
    events = client.get("/api/teams/acme/activity", params={"limit": 3}, headers=ed.headers).json()["events"]
    assert [(e["actor"], e["action"]) for e in events] == [("vic", "member_left"), ("olga", "budget_set"),
                                                           ("olga", "budget_set")]
    assert client.get("/api/teams/acme/activity", params={"limit": 0}, headers=ed.headers).status_code == 422


def test_only_an_owner_deletes_a_team_and_only_an_empty_one(app: Any, client: Any, make_account: Any) -> None:
    from lanner.accounts.service import require_user
    from lanner.billing import service as billing

    olga, ada = make_account("olga"), make_account("ada")
    client.post("/api/teams", json={"name": "acme"}, headers=olga.headers).raise_for_status()
    client.post("/api/teams/acme/members", json={"username": "ada", "role": "admin"},
                headers=olga.headers).raise_for_status()
    refused = client.delete("/api/teams/acme", headers=ada.headers)
    assert refused.status_code == 403 and refused.json()["requiredRole"] == "owner"
    client.post("/api/datasets", json={"name": "parts", "owner": "acme"}, headers=ada.headers).raise_for_status()
    client.delete("/api/datasets/acme/parts", headers=ada.headers).raise_for_status()  # in the trash: still held
    with app.state.lanner.db.session() as session:
        billing.top_up(session, user_id=require_user(session, username="acme").id, micros=1_000_000)
    topped = client.get("/api/teams/acme/activity", headers=ada.headers).json()["events"][0]
    assert (topped["actor"], topped["action"], topped["target"]) == (None, "topped_up", "credit $1.00")  # operator
    full = client.delete("/api/teams/acme", headers=olga.headers)
    assert full.status_code == 409 and full.json()["code"] == "team_not_empty"
    assert "1 datasets" in full.json()["error"] and "credit" in full.json()["error"]
    assert client.get("/api/teams/acme/members", headers=ada.headers).status_code == 200  # nothing changed

    dataset_id = client.get("/api/trash", headers=ada.headers).json()["items"]
    assert dataset_id == []  # a team's trash is not ada's own
    with app.state.lanner.db.session() as session:
        from lanner.datasets.models import Dataset

        trashed = session.query(Dataset).filter_by(slug="parts").one().id
        team_id = require_user(session, username="acme").id
        billing.charge_usage_to(session, user_id=team_id, reference="test:spend", charged_micros=0,
                                target_micros=1_000_000, kind="endpoint", description="spent")
    assert client.request("DELETE", "/api/trash", json={"id": trashed, "type": "dataset"},
                          headers=ada.headers).status_code == 200  # an admin deletes the team's trashed dataset
    assert client.delete("/api/teams/acme", headers=olga.headers).json() == {"success": True}
    assert client.get("/api/teams/acme/members", headers=olga.headers).status_code == 404
    assert client.get("/api/account/summary", headers=ada.headers).json()["teams"] == []
