"""SDK ``projects.*`` and ``models.*``: shapes, slugs, and tenant isolation."""

from __future__ import annotations

import pytest
from ultralytics_platform import APIError

from tests.sdk_types import assert_sdk_type


def test_project_crud_through_the_sdk(sdk, alice):
    platform = sdk(alice)
    created = assert_sdk_type(platform.projects.create(project="shapes", name="Shapes", description="d"),
                              "ProjectsCreateResponse")
    assert created["owner"] == "alice" and created["project"] == "shapes"
    listed = assert_sdk_type(platform.projects.list("alice"), "ProjectsListResponse")
    assert [p["project"] for p in listed["projects"]] == ["shapes"] and listed["total"] == 1
    retrieved = assert_sdk_type(platform.projects.retrieve("alice", "shapes"), "ProjectsRetrieveResponse")
    assert retrieved["isOwner"] is True and retrieved["project"]["description"] == "d"
    updated = assert_sdk_type(platform.projects.update("alice", "shapes", name="Shapes v2"),
                              "ProjectsUpdateResponse")
    assert updated["project"] == "shapes-v2"
    with pytest.raises(APIError) as gone:
        platform.projects.retrieve("alice", "shapes")
    assert gone.value.status_code == 404
    deleted = assert_sdk_type(platform.projects.delete("alice", "shapes-v2"), "ProjectsDeleteResponse")
    assert deleted["cascadedModels"] == 0


def test_duplicate_project_slug_is_409(sdk, alice):
    platform = sdk(alice)
    platform.projects.create(project="p", name="P")
    with pytest.raises(APIError) as exc:
        platform.projects.create(project="p", name="P again")
    assert exc.value.status_code == 409 and "already exists" in exc.value.json["error"]


def test_model_crud_through_the_sdk(sdk, alice):
    platform = sdk(alice)
    platform.projects.create(project="p", name="P")
    created = assert_sdk_type(platform.models.create(body={"project": "p", "name": "My Model"}),
                              "ModelsCreateResponse")
    assert created["model"] == "my-model"
    with pytest.raises(APIError) as dup:
        platform.models.create(body={"project": "p", "name": "My Model"})
    assert dup.value.status_code == 409
    listed = assert_sdk_type(platform.models.list("alice", "p"), "ModelsListResponse")
    assert [m["model"] for m in listed["models"]] == ["my-model"]
    model = assert_sdk_type(platform.models.retrieve("alice", "p", "my-model"), "ModelsRetrieveResponse")
    assert model["model"]["status"] == "untrained" and model["model"]["hasWeights"] is False
    assert_sdk_type(platform.models.update("alice", "p", "my-model", description="x"), "ModelsUpdateResponse")
    renamed = assert_sdk_type(platform.models.update("alice", "p", "my-model", name="Other"), "ModelsUpdateResponse")
    assert renamed["slug"] == "other"
    assert_sdk_type(platform.models.files("alice", "p", "other"), "ModelsFilesResponse")
    assert_sdk_type(platform.models.training("alice", "p", "other"), "ModelsTrainingResponse")
    assert_sdk_type(platform.models.delete("alice", "p", "other"), "ModelsDeleteResponse")
    assert platform.models.list("alice", "p")["models"] == []
    retrieved = platform.projects.retrieve("alice", "p")
    assert_sdk_type(retrieved, "ProjectsRetrieveResponse")


def test_private_resources_of_another_user_are_404(sdk, alice, bob, client):
    sdk(alice).projects.create(project="secret", name="Secret")
    sdk(alice).models.create(body={"project": "secret", "name": "m"})
    intruder = sdk(bob)
    for call in (lambda: intruder.projects.retrieve("alice", "secret"),
                 lambda: intruder.models.list("alice", "secret"),
                 lambda: intruder.models.retrieve("alice", "secret", "m"),
                 lambda: intruder.models.files("alice", "secret", "m"),
                 lambda: intruder.projects.delete("alice", "secret"),
                 lambda: intruder.models.delete("alice", "secret", "m")):
        with pytest.raises(APIError) as exc:
            call()
        assert exc.value.status_code == 404
    assert intruder.projects.list("alice")["projects"] == []
    creating = client.post("/api/models", json={"project": "secret", "owner": "alice", "name": "x"},
                           headers=bob.headers)
    assert creating.status_code == 404
    assert sdk(alice).projects.retrieve("alice", "secret")["project"]["modelCount"] == 1


def test_public_project_is_readable_not_writable(sdk, alice, bob):
    sdk(alice).projects.create(project="open", name="Open", visibility="public")
    assert sdk(bob).projects.retrieve("alice", "open")["isOwner"] is False
    assert [p["project"] for p in sdk(bob).projects.list("alice")["projects"]] == ["open"]
    with pytest.raises(APIError) as exc:
        sdk(bob).projects.update("alice", "open", description="defaced")
    assert exc.value.status_code == 403


def test_bad_input_gets_a_clear_4xx(client, alice):
    response = client.post("/api/projects", json={"project": "x"}, headers=alice.headers)
    assert response.status_code == 422 and "name" in response.json()["error"]
    response = client.post("/api/projects", content=b"{not json", headers={**alice.headers,
                                                                          "content-type": "application/json"})
    assert response.status_code == 422 and "JSON" in response.json()["error"]
    response = client.post("/api/projects", json={"name": "!!!"}, headers=alice.headers)
    assert response.status_code == 400
    response = client.post("/api/projects", json={"name": "v", "visibility": "secret"}, headers=alice.headers)
    assert response.status_code == 400 and "visibility" in response.json()["error"]
    nobody = client.get("/api/projects/nobody", headers=alice.headers)  # like an owner with nothing public
    assert nobody.status_code == 200 and nobody.json()["projects"] == []
