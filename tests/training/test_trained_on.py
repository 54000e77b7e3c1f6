"""``datasets.models``: the models trained on a dataset, in the SDK's shape. A model counts when its trainer
arguments name the dataset (at its address now or one it moved from, never a dataset whose name merely starts
the same) or when a launched run captured one of its versions (which the answer names); only models the caller
may read are listed; a dataset the caller may not read is the 404 of a missing one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset
from lanner.training.models import Run
from tests.ledger import make_run
from tests.sdk_types import assert_sdk_type


def _model(client: Any, who: Any, project: str, model: str, data: str | None, **extra: Any) -> str:
    client.post("/api/projects", json={"name": project, **extra}, headers=who.headers)
    args = {"epochs": 3, **({"data": data} if data else {})}
    made = client.post("/api/models", json={"project": project, "model": model, "name": model, "trainArgs": args},
                       headers=who.headers)
    assert made.status_code == 201, made.text
    return made.json()["id"]


def test_models_trained_on_a_dataset(app: Any, client: Any, make_account: Any) -> None:
    alice, bob, eve = make_account("alice"), make_account("bob"), make_account("eve")
    client.post("/api/datasets", json={"name": "parts", "visibility": "public"},
                headers=alice.headers).raise_for_status()
    client.post("/api/datasets", json={"name": "parts-2"}, headers=alice.headers).raise_for_status()
    first = _model(client, alice, "line", "first", "ul://alice/datasets/parts")
    _model(client, alice, "line", "other", "ul://alice/datasets/parts-2")  # a name that starts the same
    _model(client, alice, "line", "local", "my/data.yaml")
    public = _model(client, bob, "open", "bobs", "ul://ALICE/datasets/parts", visibility="public")
    _model(client, bob, "closed", "hidden", "ul://alice/datasets/parts")  # bob's private project

    db = app.state.lanner.db
    with db.session() as session:  # a run Lanner launched on a captured version, its model naming no data
        dataset = session.query(Dataset).filter_by(slug="parts").one()
        version, _ = datasets_service.create_version(session, dataset, description="for a run")
        version_id, version_number, content_hash = str(version.id), version.version, version.content_hash
        alice_id = dataset.owner_id
    run_id, launched = make_run(db, alice_id, project="line", model="launched")
    with db.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(dataset_version_id=version_id))

    answer = client.get("/api/datasets/alice/parts/models", headers=alice.headers)
    assert answer.status_code == 200, answer.text
    assert_sdk_type(answer.json(), "DatasetsModelsResponse")
    listed = {m["id"]: m for m in answer.json()["models"]}
    assert set(listed) == {first, public, launched} and answer.json()["count"] == 3
    assert listed[launched]["datasetVersion"] == {"version": version_number, "contentHash": content_hash}
    assert "datasetVersion" not in listed[first]
    assert (listed[public]["owner"], listed[public]["project"], listed[public]["model"]) == ("bob", "open", "bobs")
    assert [m["model"] for m in answer.json()["models"]] == ["launched", "bobs", "first"]  # newest first

    as_bob = {m["model"] for m in client.get("/api/datasets/alice/parts/models", headers=bob.headers).json()["models"]}
    assert as_bob == {"bobs", "hidden"}  # alice's private models are not his to see; his own private one is
    private = client.get("/api/datasets/alice/parts-2/models", headers=eve.headers)
    missing = client.get("/api/datasets/alice/nothing/models", headers=eve.headers)
    assert private.status_code == missing.status_code == 404


def test_a_moved_dataset_still_finds_the_models_trained_before_the_move(client: Any, make_account: Any) -> None:
    olga = make_account("olga")
    client.post("/api/teams", json={"name": "acme"}, headers=olga.headers).raise_for_status()
    client.post("/api/datasets", json={"name": "parts"}, headers=olga.headers).raise_for_status()
    before = _model(client, olga, "line", "before", "ul://olga/datasets/parts")
    moved = client.post("/api/datasets/olga/parts/transfer", json={"owner": "acme"}, headers=olga.headers)
    assert moved.status_code == 200, moved.text
    after = _model(client, olga, "line", "after", "ul://acme/datasets/parts")
    for address in ("acme/parts", "olga/parts"):
        listed = client.get(f"/api/datasets/{address}/models", headers=olga.headers).json()["models"]
        assert {m["id"] for m in listed} == {before, after}, address
