"""``datasets.create_batch`` / ``batch`` / ``delete_batch`` with the official SDK, on SQLite and PostgreSQL, with
the session's tiny trained detector and the real worker code (in-process: see ``conftest``).

What must hold: the SDK's shapes (typeguard); a version is saved before anything changes; unlabelled images get
the model's boxes ``labelledBy model:<ref>`` and labelled images are untouched; the ledger is charged exactly
images × price; not enough credit is a 402 before anything exists; a cancelled run's worker is refused; a worker
killed mid-batch is relaunched for the remaining images only and no image gets its labels twice."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from ultralytics_platform import APIError

from lanner.autolabel.models import AutolabelImage, AutolabelJob
from lanner.autolabel.worker import Stopped
from lanner.billing import service as billing
from lanner.billing.models import LedgerTransaction
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion
from lanner.training.executors import JobState
from tests.autolabel.conftest import (
    PRICE,
    InProcessHTTP,
    detector,
    launched_spec,
    run_worker,
    shapes_dataset,
    use_fake_executor,
)
from tests.sdk_types import assert_sdk_type

CREDIT = billing.dollars_to_micros(10)


class Killed(BaseException):
    """The worker process dies (not an Exception: nothing in the worker catches it)."""


def _items(app: Any, slug: str = "shapes") -> dict[str, DatasetItem]:
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == slug))
        rows = session.scalars(select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id))
        return {row.key: row for row in rows}


def _available(app: Any, account: Any) -> int:
    with app.state.lanner.db.session() as session:
        return billing.balances(session, user_id=account.user_id).available


@pytest.fixture
def world(app, client, make_account, sdk, tmp_path, tiny_weights):
    alice = make_account("alice", credits_micros=CREDIT)
    shapes_dataset(app, tmp_path, "alice")
    detector(app, alice, tiny_weights)
    return alice, sdk(alice)


def _body(**extra: Any) -> dict[str, Any]:
    return {"modelId": "ul://alice/shapes/tiny", "confidence": 0.001, **extra}


def test_auto_annotation_labels_the_unlabelled_images_once_billed_per_image(app, client, world, monkeypatch,
                                                                              tmp_path):
    alice, platform = world
    before = _items(app)
    unlabelled = {k for k, item in before.items() if item.labels is None}
    assert len(unlabelled) == 5
    assert assert_sdk_type(platform.datasets.batch("alice", "shapes"), "DatasetsBatchResponse") == {
        "activeJob": None, "lastRun": None}
    executor = use_fake_executor(app)

    job_id = assert_sdk_type(platform.datasets.create_batch("alice", "shapes", body=_body()),
                             "DatasetsCreateBatchResponse")["jobId"]
    with app.state.lanner.db.session() as session:  # a version holding the dataset as it was, first
        version = session.scalar(select(DatasetVersion).join(Dataset).where(Dataset.slug == "shapes"))
        assert version is not None and version.version == 1
        assert session.get(AutolabelJob, job_id).version == 1
    status = assert_sdk_type(platform.datasets.batch("alice", "shapes"), "DatasetsBatchResponse")
    assert status["activeJob"]["id"] == job_id and status["activeJob"]["progress"] == {"processed": 0, "total": 5}
    with pytest.raises(APIError) as busy:  # one run per dataset at a time
        platform.datasets.create_batch("alice", "shapes", body=_body())
    assert busy.value.status_code == 409

    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert {image["key"] for image in spec["images"]} == unlabelled
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")

    after = _items(app)
    for key, item in after.items():
        if key in unlabelled:
            assert item.labels, f"image {key} got no boxes from the model at conf 0.001"
            assert item.labelled_by == "model:alice/shapes/tiny"
            assert all(0 <= label["classId"] < 2 and len(label["bbox"]) == 4 for label in item.labels)
        else:  # a labelled image is untouched
            assert (item.labels, item.labelled_by, item.label_rev) == (
                before[key].labels, before[key].labelled_by, before[key].label_rev)
    assert CREDIT - _available(app, alice) == 5 * billing.dollars_to_micros(PRICE)
    last = assert_sdk_type(platform.datasets.batch("alice", "shapes"), "DatasetsBatchResponse")
    assert last["activeJob"] is None
    assert last["lastRun"]["id"] == job_id and not last["lastRun"]["failed"] and not last["lastRun"]["stopped"]
    assert last["lastRun"]["results"]["processed"] == 5
    assert last["lastRun"]["results"]["annotations"] == sum(len(after[k].labels) for k in unlabelled)
    with app.state.lanner.db.session() as session:  # the version still holds the images without labels
        version = session.scalar(select(DatasetVersion).join(Dataset).where(Dataset.slug == "shapes"))
        frozen = {key: labels for key, labels in session.execute(select(DatasetItem.key, DatasetItem.labels).where(
            DatasetItem.manifest_id == version.manifest_id))}
        assert all(frozen[k] is None for k in unlabelled)

    dismissed = assert_sdk_type(platform.datasets.delete_batch("alice", "shapes"), "DatasetsDeleteBatchResponse")
    assert dismissed == {"action": "dismissed", "jobId": job_id}
    assert platform.datasets.batch("alice", "shapes") == {"activeJob": None, "lastRun": None}
    assert assert_sdk_type(platform.datasets.delete_batch("alice", "shapes"), "DatasetsDeleteBatchResponse") == {
        "action": "none", "jobId": None}
    with pytest.raises(APIError) as nothing_left:  # everything is labelled now
        platform.datasets.create_batch("alice", "shapes", body=_body())
    assert nothing_left.value.status_code == 409


def test_include_annotated_adds_to_labelled_images_and_changes_none(app, client, world, monkeypatch, tmp_path):
    alice, platform = world
    before = _items(app)
    executor = use_fake_executor(app)
    platform.datasets.create_batch("alice", "shapes", body=_body(includeAnnotated=True))
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert len(spec["images"]) == 8
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")
    after = _items(app)
    for key, item in before.items():
        if item.labels is not None:  # every existing label kept, first and unchanged
            assert after[key].labels[:len(item.labels)] == item.labels
    assert CREDIT - _available(app, alice) == 8 * billing.dollars_to_micros(PRICE)
    ledger = platform.billing.transactions()["transactions"]  # the SDK's "annotation" type
    charged = [t for t in ledger if t["type"] == "annotation"]
    assert charged and sum(t["amountCents"] for t in charged) == pytest.approx(-8 * PRICE * 100)


def test_not_enough_credit_is_402_before_anything_runs(app, make_account, sdk, tmp_path, tiny_weights):
    bob = make_account("bob", credits_micros=4 * billing.dollars_to_micros(PRICE))  # 5 images to label
    shapes_dataset(app, tmp_path, "bob")
    detector(app, bob, tiny_weights)
    with pytest.raises(APIError) as refused:
        sdk(bob).datasets.create_batch("bob", "shapes", body={"modelId": "ul://bob/shapes/tiny"})
    assert refused.value.status_code == 402
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(AutolabelJob)) == 0
        assert session.scalar(select(func.count()).select_from(DatasetVersion)) == 0


def test_cancel_stops_the_worker_and_refuses_its_labels(app, client, world, monkeypatch, tmp_path):
    alice, platform = world
    executor = use_fake_executor(app)
    job_id = platform.datasets.create_batch("alice", "shapes", body=_body())["jobId"]
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)

    def cancel_after_first_chunk(posts: int) -> None:
        if posts == 1:
            assert platform.datasets.delete_batch("alice", "shapes") == {"action": "cancelled", "jobId": job_id}

    with pytest.raises(Stopped):  # the next chunk is refused: the worker ends (quietly, exit 0, in main)
        run_worker(monkeypatch, InProcessHTTP(client, cancel_after_first_chunk), spec, tmp_path / "worker")
    app.state.autolabel.one_pass()
    assert executor.stopped == [executor._id(executor.launched[0])]
    labelled = [k for k, item in _items(app).items() if item.labelled_by and item.labelled_by.startswith("model:")]
    assert len(labelled) == 2  # the first chunk only
    status = assert_sdk_type(platform.datasets.batch("alice", "shapes"), "DatasetsBatchResponse")
    assert status["activeJob"] is None and status["lastRun"]["stopped"] and status["lastRun"]["results"][
        "processed"] == 2
    assert CREDIT - _available(app, alice) == 2 * billing.dollars_to_micros(PRICE)


def test_a_worker_killed_mid_batch_is_resumed_for_the_rest_without_duplicates(app, client, world, monkeypatch,
                                                                               tmp_path):
    alice, platform = world
    executor = use_fake_executor(app)
    job_id = platform.datasets.create_batch("alice", "shapes", body=_body())["jobId"]
    app.state.autolabel.one_pass()
    first = launched_spec(executor)

    def die(posts: int) -> None:
        if posts == 2:
            raise Killed()

    with pytest.raises(Killed):  # two chunks (4 images) recorded, then the process dies
        run_worker(monkeypatch, InProcessHTTP(client, die), first, tmp_path / "worker")
    labelled_once = {k: list(item.labels) for k, item in _items(app).items()
                     if item.labelled_by and item.labelled_by.startswith("model:")}
    assert len(labelled_once) == 4
    # its second chunk's answer never reached it: the same chunk again (a retry) records nothing twice
    repeat = client.post("/api/autolabel/chunks", headers={"X-Lanner-Autolabel-Token": first["token"]},
                         json={"results": [{"key": image["key"], "labels": [{"classId": 0, "bbox": [0.5, 0.5, .2, .2]}]}
                                           for image in first["images"][2:4]]})
    assert repeat.status_code == 200 and repeat.json()["recorded"] == 0 and repeat.json()["processed"] == 4
    executor.set(job_id, 1, JobState.LOST, -9, "worker killed by signal 9")
    app.state.autolabel.one_pass()  # lost: queued again, and relaunched for what is left
    second = launched_spec(executor)
    assert second["attempt"] == 2 and len(second["images"]) == 1
    assert set(labelled_once).isdisjoint(image["key"] for image in second["images"])

    # the killed attempt's last chunk arrives late (a retry): refused, it is not the current attempt
    stale = InProcessHTTP(client)
    stale_answer = client.post("/api/autolabel/chunks", headers={"X-Lanner-Autolabel-Token": first["token"]},
                               json={"results": [{"key": first["images"][0]["key"], "labels": []}]})
    assert stale_answer.status_code == 404 and stale.posts == 0
    # the new attempt posts its chunk twice (its answer was lost): the second changes nothing
    run_worker(monkeypatch, InProcessHTTP(client), second, tmp_path / "worker")
    again = client.post("/api/autolabel/chunks", headers={"X-Lanner-Autolabel-Token": second["token"]},
                        json={"results": [{"key": second["images"][0]["key"], "labels": [
                            {"classId": 0, "bbox": [0.5, 0.5, 0.2, 0.2]}]}]})
    assert again.status_code == 409  # the run completed with the last image
    after = _items(app)
    for key, labels in labelled_once.items():
        assert after[key].labels == labels and after[key].label_rev == 1
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(AutolabelImage)) == 5
        assert session.get(AutolabelJob, job_id).status == "completed"
        charges = session.scalars(select(LedgerTransaction).where(LedgerTransaction.kind == "autolabel")).all()
        assert len(charges) == 3  # one per chunk: 2 + 2 + 1 images
    assert CREDIT - _available(app, alice) == 5 * billing.dollars_to_micros(PRICE)


def test_a_forged_token_is_404(client):
    answer = client.post("/api/autolabel/chunks", headers={"X-Lanner-Autolabel-Token": "job:slot.forged"},
                         json={"results": []})
    assert answer.status_code == 404


def test_preview_runs_six_images_and_changes_nothing(app, client, world):
    alice, platform = world
    before = _items(app)
    job_id = assert_sdk_type(platform.datasets.create_batch("alice", "shapes", body=_body(preview=True)),
                             "DatasetsCreateBatchResponse")["jobId"]
    answer = client.get("/api/datasets/alice/shapes/predict/batch/preview", params={"jobId": job_id},
                        headers=alice.headers)
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert len(preview["images"]) == 5  # five unlabelled images, at most six
    assert any(image["labels"] for image in preview["images"])
    assert client.get(preview["images"][0]["imageUrl"]).status_code == 200
    assert _items(app) == before or all(
        (a.labels, a.label_rev) == (before[k].labels, before[k].label_rev) for k, a in _items(app).items())
    assert _available(app, alice) == CREDIT
    status = assert_sdk_type(platform.datasets.batch("alice", "shapes"), "DatasetsBatchResponse")
    assert status["lastRun"]["preview"] is True
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(DatasetVersion)) == 0


def test_an_image_deleted_before_its_turn_is_neither_processed_nor_charged(app, client, world, monkeypatch,
                                                                          tmp_path):
    alice, platform = world
    executor = use_fake_executor(app)
    job_id = platform.datasets.create_batch("alice", "shapes", body=_body())["jobId"]
    with app.state.lanner.db.session() as session:
        gone = session.get(AutolabelJob, job_id).keys[0]
        dataset_id = session.get(AutolabelJob, job_id).dataset_id
    platform.images.delete(f"{dataset_id}-{gone}")
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert len(spec["images"]) == 4 and gone not in {image["key"] for image in spec["images"]}
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")
    last = platform.datasets.batch("alice", "shapes")["lastRun"]
    assert last["results"]["processed"] == 4 and not last["failed"]
    assert CREDIT - _available(app, alice) == 4 * billing.dollars_to_micros(PRICE)
