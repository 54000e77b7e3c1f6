"""``POST /api/datasets/{o}/{d}/embeddings`` with a model the caller names (``modelId``, Lanner's optional body;
the SDK's call sends none), on SQLite and PostgreSQL: only a model the caller may read (404 for another user's
private one), with weights and a network that can embed (422), and the named model stays the dataset's, so
freshness is judged against it, not against the automatic pick, until someone names another (or ``auto``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from ultralytics import YOLO

from lanner.accounts.principal import Principal
from lanner.accounts.service import get_user_by_username
from lanner.datasets import service as datasets_service
from lanner.embeddings import service
from lanner.embeddings.models import EmbeddingJob
from lanner.projects import service as projects_service
from lanner.projects.models import ModelRecord
from tests.embeddings.conftest import drive_worker, finish, launch
from tests.embeddings.test_embeddings_api import shapes, trained_on_shapes  # noqa: F401 (a fixture)
from tests.trained import attach_weights

URL = "/api/datasets/alice/shapes/embeddings"


def other_weights(tiny_weights: Path, tmp_path: Path, name: str) -> Path:
    """The tiny detector's bytes and one more: other weights (another vector key) that load the same."""
    copy = tmp_path / f"{name}.pt"
    shutil.copyfile(tiny_weights, copy)
    with copy.open("ab") as handle:
        handle.write(name.encode())
    return copy


def freshness(app: Any) -> str:
    with app.state.lanner.db.session() as session:
        principal = Principal.of(get_user_by_username(session, username="alice"))
        dataset = datasets_service.get_dataset(session, principal, owner="alice", slug="shapes")
        return service.freshness(session, principal, dataset)


def job_of(app: Any, job_id: str) -> tuple[str | None, str, bool]:
    with app.state.lanner.db.session() as session:
        job = session.get(EmbeddingJob, job_id)
        return job.model_id, job.model_label, job.chosen


def test_a_named_model_is_checked_used_and_stays_the_datasets(app, client, shapes, alice, make_account,  # noqa: F811
                                                              tiny_weights, tmp_path):
    automatic = trained_on_shapes(app, alice, tiny_weights)
    chosen = attach_weights(app, alice, other_weights(tiny_weights, tmp_path, "chosen"), project="other",
                            model="chosen")
    bob = make_account("bob")
    secret = attach_weights(app, bob, other_weights(tiny_weights, tmp_path, "secret"), project="secret", model="m")
    semantic = attach_weights(app, alice, other_weights(tiny_weights, tmp_path, "sem"), project="other", model="sem")
    with app.state.lanner.db.session() as session:
        session.get(ModelRecord, semantic).task = "semantic"
        principal = Principal.of(get_user_by_username(session, username="alice"))
        project = projects_service.get_project(session, principal, owner="alice", slug="other")
        empty = projects_service.create_model(session, project, name="empty").id
        session.commit()

    def post(model_id: str) -> Any:
        return client.post(URL, json={"modelId": model_id}, headers=alice.headers)

    for other in (secret, "ul://bob/secret/m"):  # another user's private model: as if it did not exist
        refused = post(other)
        assert refused.status_code == 404 and "error" in refused.json(), refused.text
    assert post(empty).json()["error"].startswith("this model has no weights") and post(empty).status_code == 422
    assert post(semantic).status_code == 422 and "cannot embed" in post(semantic).json()["error"]
    assert post("a/b").status_code == 422
    assert client.post(URL, json={"modelId": chosen, "other": 1}, headers=alice.headers).status_code == 422
    assert client.get(URL, headers=alice.headers).json()["activeJob"] is None  # nothing was started

    started = post("ul://alice/other/chosen")
    assert started.status_code == 200, started.text
    job_id = started.json()["jobId"]
    assert job_of(app, job_id) == (chosen, "ul://alice/other/chosen", True)
    spec = launch(app, job_id)
    assert drive_worker(client, spec, YOLO(str(tiny_weights))) == 18
    finish(app, job_id)
    assert freshness(app) == "fresh"  # the automatic pick (alice/shapes/tiny) has no vectors: the choice counts

    again = client.post(URL, headers=alice.headers)  # the SDK's call, no body: the dataset's model, the named one
    assert job_of(app, again.json()["jobId"]) == (chosen, "ul://alice/other/chosen", True)
    assert client.delete(URL, headers=alice.headers).json() == {"cancelled": again.json()["jobId"]}
    assert freshness(app) == "fresh"

    auto = post("auto")  # back to the automatic pick: another model, so the dataset is stale until it runs
    assert job_of(app, auto.json()["jobId"]) == (automatic, "ul://alice/shapes/tiny", False)
    client.delete(URL, headers=alice.headers)
    assert freshness(app) == "stale"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_sdk_call_without_a_body_still_picks_automatically(app, client, shapes, alice, tiny_weights):  # noqa: F811
    automatic = trained_on_shapes(app, alice, tiny_weights)
    job_id = shapes.datasets.create_embeddings("alice", "shapes")["jobId"]
    assert job_of(app, job_id) == (automatic, "ul://alice/shapes/tiny", False)
