"""``agents.list|save|delete`` through the official SDK, on SQLite and PostgreSQL: a workflow document saved,
listed (with its graph by id, found by search), replaced at its version (a stale version is a 409), deleted; the
SDK's shapes checked with typeguard. Block errors come back and the workflow is saved anyway; the collect
template resolves only into a dataset the workspace may write (another user's is refused as missing), and a
second user reaches none of it (404)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics_platform import APIError, Platform

from tests.conftest import Account
from tests.sdk_types import assert_sdk_type

CANVAS = {
    "nodes": [
        {"id": "d1", "type": "agent", "position": {"x": 0.0, "y": 0.0},
         "data": {"label": "Images", "type": "Dataset", "config": {"dataset": "official:coco8", "split": "val",
                                                                    "maxInputs": 20.0}}},
        {"id": "y1", "type": "agent", "position": {"x": 220.0, "y": 0.0},
         "data": {"label": "YOLO", "type": "YOLO", "config": {"model": "ul://ultralytics/yolo26/yolo26n",
                                                               "task": "detect", "conf": 0.25}}},
        {"id": "o1", "type": "agent", "position": {"x": 440.0, "y": 0.0},
         "data": {"label": "Output", "type": "Output", "config": {}}},
    ],
    "edges": [{"id": "e1", "source": "d1", "target": "y1"}, {"id": "e2", "source": "y1", "target": "o1"}],
    "templateId": "",
}


def collect_graph(deployment: str, dataset: str, *, low: float = 0.2, high: float = 0.7, **config: Any
                  ) -> dict[str, Any]:
    """The collect template as the SDK would save it; ``config``: the Dataset block's extra keys."""
    return {
        "nodes": [
            {"id": "dep", "type": "agent", "position": {"x": 0.0, "y": 0.0},
             "data": {"label": "Endpoint", "type": "Deployment", "config": {"deployment": deployment}}},
            {"id": "gate", "type": "agent", "position": {"x": 220.0, "y": 0.0},
             "data": {"label": "Unsure", "type": "Gate", "config": {
                 "kind": "condition", "path": "dep.confidence.*", "op": "between", "value": low, "upper": high}}},
            {"id": "queue", "type": "agent", "position": {"x": 440.0, "y": 0.0},
             "data": {"label": "Queue", "type": "Dataset", "config": {"dataset": dataset, **config}}},
        ],
        "edges": [{"id": "e1", "source": "dep", "target": "gate"}, {"id": "e2", "source": "gate", "target": "queue"}],
        "templateId": "collect-uncertain",
    }


def refused(call: Callable[[], Any]) -> APIError:
    with pytest.raises(APIError) as caught:
        call()
    assert isinstance(caught.value.json, dict) and isinstance(caught.value.json.get("error"), str)
    return caught.value


def test_save_list_replace_delete_round_trip(client: TestClient, alice: Account, bob: Account,
                                             sdk: Callable[[Account], Platform]) -> None:
    platform, other = sdk(alice), sdk(bob)
    assert_sdk_type(platform.agents.list(), "AgentsListResponse")
    assert platform.agents.list()["workflows"] == []

    saved = platform.agents.save(name="Count cars", graph=CANVAS, version=0)
    assert_sdk_type(saved, "AgentsSaveResponse")
    assert saved["version"] == 1 and saved["errors"] == []
    second = platform.agents.save(name="Another", graph={"nodes": [], "edges": [], "templateId": ""}, version=0)

    listed = platform.agents.list()
    assert_sdk_type(listed, "AgentsListResponse")
    assert [w["id"] for w in listed["workflows"]] == [second["id"], saved["id"]]  # most recently updated first
    assert all("graph" not in w and w["username"] == "alice" for w in listed["workflows"])
    one = platform.agents.list(id=saved["id"])
    assert_sdk_type(one, "AgentsListResponse")
    assert one["workflows"][0]["graph"] == CANVAS and one["workflows"][0]["name"] == "Count cars"
    assert [w["id"] for w in platform.agents.list(search="cars")["workflows"]] == [saved["id"]]

    changed = {**CANVAS, "nodes": CANVAS["nodes"][:2], "edges": CANVAS["edges"][:1]}
    replaced = platform.agents.save(id=saved["id"], name="Count trucks", graph=changed, version=1)
    assert replaced == {"id": saved["id"], "version": 2, "errors": []}
    stale = refused(lambda: platform.agents.save(id=saved["id"], name="Late", graph=CANVAS, version=1))
    assert stale.status_code == 409 and stale.json["version"] == 2
    again = platform.agents.list(id=saved["id"])["workflows"][0]
    assert again["graph"] == changed and again["name"] == "Count trucks" and again["version"] == 2
    assert [w["id"] for w in platform.agents.list()["workflows"]][0] == saved["id"]

    # Another user: the 404 of a workspace that does not exist, whatever they name; their own list is empty.
    for call in (lambda: other.agents.list(owner="alice"), lambda: other.agents.list(owner="alice", id=saved["id"]),
                 lambda: other.agents.save(owner="alice", id=saved["id"], name="x", graph=CANVAS, version=2),
                 lambda: other.agents.delete(owner="alice", id=saved["id"])):
        assert refused(call).status_code == 404
    assert refused(lambda: other.agents.list(id=saved["id"])).status_code == 404
    assert refused(lambda: other.agents.delete(id=saved["id"])).status_code == 404
    assert other.agents.list()["workflows"] == []

    deleted = platform.agents.delete(id=saved["id"])
    assert_sdk_type(deleted, "AgentsDeleteResponse")
    assert [w["id"] for w in platform.agents.list()["workflows"]] == [second["id"]]
    assert refused(lambda: platform.agents.list(id=saved["id"])).status_code == 404
    assert refused(lambda: platform.agents.delete(id=saved["id"])).status_code == 404


def test_block_errors_are_answered_and_the_workflow_saved(client: TestClient, alice: Account,
                                                          sdk: Callable[[Account], Platform]) -> None:
    platform = sdk(alice)
    graph = collect_graph("", "queue", rate=2.0)
    graph["edges"].append({"id": "e3", "source": "gate", "target": "ghost"})
    saved = platform.agents.save(name="Broken", graph=graph, version=0)
    assert_sdk_type(saved, "AgentsSaveResponse")
    messages = {(e["id"], e["message"]) for e in saved["errors"]}
    assert ("dep", "name the deployment (its slug)") in messages
    assert ("queue", "rate must be between 0 and 1") in messages
    assert ("e3", "the edge names block 'ghost', which the graph lacks") in messages
    assert platform.agents.list(id=saved["id"])["workflows"][0]["name"] == "Broken"
    shape = client.put("/api/workflows", headers=alice.headers, json={
        "name": "x", "version": 0, "graph": {"nodes": [{"id": "n", "data": {"type": "Robot", "label": "x"}}]}})
    assert shape.status_code == 422 and isinstance(shape.json()["error"], str)


def test_the_collect_template_needs_a_dataset_the_workspace_may_write(
        client: TestClient, alice: Account, bob: Account, sdk: Callable[[Account], Platform]) -> None:
    from lanner.workflows.models import Workflow

    platform = sdk(alice)
    assert client.post("/api/datasets", json={"name": "bobs"}, headers=bob.headers).status_code in (200, 201)
    assert client.post("/api/datasets", json={"name": "mine"}, headers=alice.headers).status_code in (200, 201)
    theirs = platform.agents.save(name="Theirs", graph=collect_graph("cam", "bob/bobs"), version=0)
    assert {"id": "queue", "label": "Dataset", "message": "dataset 'bob/bobs' not found"} in theirs["errors"]
    assert {"id": "dep", "label": "Deployment",
            "message": "deployment 'cam' not found in this workspace"} in theirs["errors"]
    with client.app.state.lanner.db.session() as session:
        row = session.get(Workflow, theirs["id"])
        assert not row.active and row.dataset_id is None
