"""Moving a person's dataset and project into a team (and back): the same ids under a new owner, the old address
still answering for whoever may read the new one, the roles it takes on both sides, refusals that change
nothing, and a line in the team's activity log."""

from __future__ import annotations

from typing import Any


def test_a_dataset_and_a_project_move_into_a_team_and_keep_their_addresses(client: Any, make_account: Any,
                                                                            sdk: Any) -> None:
    alice, olga, vic, eve = (make_account(n) for n in ("alice", "olga", "vic", "eve"))
    assert client.post("/api/teams", json={"name": "acme"}, headers=olga.headers).status_code == 201
    for name, role in (("alice", "editor"), ("vic", "viewer")):
        client.post("/api/teams/acme/members", json={"username": name, "role": role},
                    headers=olga.headers).raise_for_status()
    dataset_id = client.post("/api/datasets", json={"name": "parts"}, headers=alice.headers).json()["id"]
    client.post("/api/projects", json={"name": "line"}, headers=alice.headers).raise_for_status()
    model_id = client.post("/api/models", json={"project": "line", "model": "m1", "name": "m1"},
                           headers=alice.headers).json()["id"]

    # Refusals first, each changing nothing: an outsider, a viewer, an unknown team, the same workspace, a bad body.
    move = "/api/datasets/alice/parts/transfer"
    assert client.post(move, json={"owner": "acme"}, headers=eve.headers).status_code == 404
    assert client.post(move, json={"owner": "nowhere"}, headers=alice.headers).status_code == 404
    assert client.post(move, json={"owner": "alice"}, headers=alice.headers).status_code == 400
    assert client.post(move, json={"owner": ""}, headers=alice.headers).status_code == 422
    assert client.post(move, json={}, headers=alice.headers).status_code == 422
    client.post("/api/datasets", json={"name": "bolts"}, headers=alice.headers).raise_for_status()
    client.post("/api/datasets", json={"name": "bolts", "owner": "acme"}, headers=olga.headers).raise_for_status()
    taken = client.post("/api/datasets/alice/bolts/transfer", json={"owner": "acme"}, headers=alice.headers)
    assert taken.status_code == 409 and "already has a dataset named 'bolts'" in taken.json()["error"]
    client.delete("/api/datasets/acme/bolts", headers=olga.headers).raise_for_status()  # trashed: name still taken
    assert client.post("/api/datasets/alice/bolts/transfer", json={"owner": "acme"},
                       headers=alice.headers).status_code == 409
    client.post("/api/projects/acme/line/transfer", json={"owner": "acme"}, headers=vic.headers)
    assert client.get("/api/projects/acme/line", headers=olga.headers).status_code == 404  # vic moved nothing

    moved = client.post("/api/projects/alice/line/transfer", json={"owner": "acme"}, headers=alice.headers)
    assert moved.status_code == 200, moved.text
    assert moved.json() == {"success": True, "owner": "acme", "project": "line", "id": moved.json()["id"]}
    for who in (alice, vic, olga):  # every member reads it at both addresses, and the model through either
        for owner in ("acme", "alice"):
            found = client.get(f"/api/projects/{owner}/line", headers=who.headers)
            assert found.status_code == 200, (who.username, owner, found.text)
            found = client.get(f"/api/models/{owner}/line/m1", headers=who.headers).json()["model"]
            assert (found["id"], found["owner"]) == (model_id, "acme")
    for owner in ("acme", "alice"):
        assert client.get(f"/api/projects/{owner}/line", headers=eve.headers).status_code == 404
    assert [p["project"] for p in sdk(vic).projects.list("acme")["projects"]] == ["line"]
    assert sdk(alice).projects.list("alice")["projects"] == []
    for owner in ("acme", "alice"):
        models = client.get(f"/api/models/{owner}/line", headers=vic.headers).json()["models"]
        assert [(m["id"], m["owner"]) for m in models] == [(model_id, "acme")]

    # Out of the team takes an admin there: alice (an editor) cannot take it back; made admin, she can.
    back = client.post("/api/projects/acme/line/transfer", json={"owner": "alice"}, headers=alice.headers)
    assert back.status_code == 403 and back.json()["requiredRole"] == "admin"
    client.patch("/api/teams/acme/members/alice", json={"role": "admin"}, headers=olga.headers).raise_for_status()
    assert client.post("/api/projects/acme/line/transfer", json={"owner": "alice"},
                       headers=alice.headers).status_code == 200
    assert client.get("/api/projects/acme/line", headers=vic.headers).status_code == 404  # no longer the team's
    assert client.get("/api/projects/alice/line", headers=alice.headers).status_code == 200

    assert client.post(move, json={"owner": "acme"}, headers=alice.headers).json()["owner"] == "acme"
    for owner in ("acme", "alice"):
        found = client.get(f"/api/datasets/{owner}/parts", headers=vic.headers).json()
        assert (found["dataset"]["id"], found["dataset"]["owner"]) == (dataset_id, "acme"), found
        assert client.get(f"/api/datasets/{owner}/parts", headers=eve.headers).status_code == 404
    assert [d["dataset"] for d in sdk(vic).datasets.list("acme")["datasets"]] == ["parts"]
    events = client.get("/api/teams/acme/activity", headers=olga.headers).json()["events"]
    assert [(e["actor"], e["action"], e["target"], e["detail"]) for e in events
            if e["action"].startswith("moved")] == [
        ("alice", "moved_in", "dataset parts", {"from": "alice", "to": "acme"}),
        ("alice", "moved_out", "project line", {"from": "acme", "to": "alice"}),
        ("alice", "moved_in", "project line", {"from": "alice", "to": "acme"})]
