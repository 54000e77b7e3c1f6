"""A team's trash through the API: any member lists it (``GET /api/trash?owner=``), an editor restores from it and
empties it, a viewer gets the 403 naming the editor role, and anyone outside the team (or naming another person)
the 404 of a workspace that does not exist; each trash holds only its own workspace's datasets, and emptying the
team's leaves the caller's own alone. The web page is in ``tests/web/test_team_pages.py``."""

from __future__ import annotations

from typing import Any


def test_a_teams_trash_is_its_members_and_only_theirs(client: Any, make_account: Any) -> None:
    olga, ed, vic, eve = (make_account(n) for n in ("olga", "ed", "vic", "eve"))
    client.post("/api/teams", json={"name": "acme"}, headers=olga.headers).raise_for_status()
    for name, role in (("ed", "editor"), ("vic", "viewer")):
        client.post("/api/teams/acme/members", json={"username": name, "role": role},
                    headers=olga.headers).raise_for_status()
    for owner, name in (("acme", "parts"), ("acme", "bolts"), (None, "mine")):
        client.post("/api/datasets", json={"name": name, **({"owner": owner} if owner else {})},
                    headers=ed.headers).raise_for_status()
        client.delete(f"/api/datasets/{owner or 'ed'}/{name}", headers=ed.headers).raise_for_status()

    def trash(who: Any, owner: str | None = None) -> list[str]:
        answer = client.get("/api/trash", params={"owner": owner} if owner else {}, headers=who.headers)
        assert answer.status_code == 200, answer.text
        return sorted(item["slug"] for item in answer.json()["items"])

    assert trash(vic, "acme") == trash(olga, "acme") == trash(ed, "ACME") == ["bolts", "parts"]
    assert trash(ed) == trash(ed, "ed") == ["mine"] and trash(olga) == []
    for owner in ("acme", "ed", "ghost"):
        outside = client.get("/api/trash", params={"owner": owner}, headers=eve.headers)
        assert outside.status_code == 404 and outside.json()["error"] == f"workspace '{owner}' not found"

    refused = client.request("DELETE", "/api/trash", params={"owner": "acme"}, json={"all": True},
                             headers=vic.headers)
    assert refused.status_code == 403 and refused.json()["requiredRole"] == "editor"
    assert client.request("DELETE", "/api/trash", params={"owner": "acme"}, json={"all": True},
                          headers=eve.headers).status_code == 404
    assert trash(vic, "acme") == ["bolts", "parts"]  # nothing went

    parts = next(i["_id"] for i in client.get("/api/trash?owner=acme", headers=vic.headers).json()["items"]
                 if i["slug"] == "parts")
    assert client.post("/api/trash", json={"type": "dataset", "id": parts}, headers=vic.headers).status_code == 403
    assert client.post("/api/trash", json={"type": "dataset", "id": parts}, headers=ed.headers).status_code == 200
    assert client.get("/api/datasets/acme/parts", headers=vic.headers).status_code == 200

    emptied = client.request("DELETE", "/api/trash", params={"owner": "acme"}, json={"all": True},
                             headers=ed.headers)
    assert emptied.json() == {"success": True, "deletedCount": 1}
    assert trash(vic, "acme") == [] and trash(ed) == ["mine"]  # ed's own trash untouched
    assert client.get("/api/datasets/acme/parts", headers=ed.headers).status_code == 200
