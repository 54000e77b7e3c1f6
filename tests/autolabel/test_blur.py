"""``datasets.create_batch {operation: "blur"}`` with the official SDK and the real worker code (in-process, see
``conftest``), on a real photograph of a face (``tests/fixtures/astronaut.jpg``, see its README) and synthetic
images without one, with the cascade OpenCV 4 bundles (nothing downloaded).

What must hold: the face's pixels are blurred and the rest of the photo is not; the other images keep their
bytes; the blurred photo is a new revision of the same image (key, name, labels) while the version saved first
keeps the original bytes; each image is billed once; a preview changes nothing and charges nothing, and
applying it with ``previewJobId`` uses its exact images (never blurred again, never billed twice); a worker
killed mid-run is relaunched for the rest only; a cancelled run's worker is refused; a cascade the operator
names that is not there is a 422 before anything runs, and one that is there (a copy of the bundled cascade
elsewhere) is the one that blurs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from sqlalchemy import func, select
from ultralytics_platform import APIError

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.autolabel import faces
from lanner.autolabel.models import AutolabelImage, AutolabelJob
from lanner.autolabel.worker import Stopped
from lanner.billing import service as billing
from lanner.datasets import service as datasets_service
from lanner.datasets.imports.ingest import commit_import, prepare_import
from lanner.datasets.models import Dataset, DatasetItem, DatasetVersion, ImageBlob
from lanner.synthetic import make_detection_dataset
from lanner.training.executors import JobState
from tests.autolabel.conftest import PRICE, InProcessHTTP, launched_spec, run_worker, use_fake_executor
from tests.sdk_types import assert_sdk_type

PHOTO = Path(__file__).parent.parent / "fixtures" / "astronaut.jpg"
FACE = (109, 40, 61, 61)  # x, y, w, h of Eileen Collins' face in the 320×320 fixture (checked below)
CREDIT = billing.dollars_to_micros(10)
ONE = billing.dollars_to_micros(PRICE)


def _photo_dataset(app: Any, tmp_path: Path, owner: str, others: int = 2) -> None:
    """The astronaut photo (named to sort first) and ``others`` synthetic images without faces, labelled."""
    ctx = app.state.lanner
    root = tmp_path / "faces"
    make_detection_dataset(root, train=others, val=0, size=96, seed=5)
    shutil.copy(PHOTO, root / "images" / "train" / "a_astronaut.jpg")
    (root / "labels" / "train" / "a_astronaut.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=root) as prepared, \
            ctx.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username=owner))
        dataset = datasets_service.create_dataset(session, principal, name="faces", task="detect")
        dataset.class_names = ["circle", "square"]
        commit_import(session, prepared, dataset=dataset, queued=False)


def _items(app: Any) -> dict[str, tuple[str, str, Any]]:
    """key -> (name, sha256, labels) of the dataset's current images."""
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "faces"))
        return {row.key: (row.name, row.sha256, row.labels) for row in session.scalars(
            select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id))}


def _pixels(app: Any, digest: str) -> np.ndarray:
    with app.state.lanner.blobs.open(digest) as handle:
        return faces.decode(handle.read())


def _photo_key(items: dict[str, tuple[str, str, Any]]) -> str:
    return next(k for k, (name, _, _) in items.items() if name == "a_astronaut.jpg")


def _available(app: Any, account: Any) -> int:
    with app.state.lanner.db.session() as session:
        return billing.balances(session, user_id=account.user_id).available


def assert_face_blurred(before: np.ndarray, after: np.ndarray) -> None:
    """The face changed a lot; the photo away from it (outside the face box scaled 1.5×) barely (JPEG re-encoding
    moves a pixel by a level or two, never more on average)."""
    x, y, w, h = FACE
    diff = np.abs(before.astype(np.int16) - after.astype(np.int16)).mean(axis=2)
    face = diff[y + h // 4:y + 3 * h // 4, x + w // 4:x + 3 * w // 4]
    mask = np.ones(diff.shape, bool)
    mask[max(0, y - h // 4):y + h + h // 4, max(0, x - w // 4):x + w + w // 4] = False
    assert face.mean() > 12, f"the face changed by {face.mean():.1f} levels on average"
    assert diff[mask].mean() < 1.5 and np.percentile(diff[mask], 99) < 8, \
        f"the background changed by {diff[mask].mean():.2f} on average"
    inner = (slice(y + h // 4, y + 3 * h // 4), slice(x + w // 4, x + 3 * w // 4))
    sharp = cv2.Laplacian(cv2.cvtColor(before, cv2.COLOR_BGR2GRAY), cv2.CV_64F)[inner].var()
    blurred = cv2.Laplacian(cv2.cvtColor(after, cv2.COLOR_BGR2GRAY), cv2.CV_64F)[inner].var()
    assert blurred < sharp / 10, f"the face keeps {blurred / sharp:.0%} of its detail"


@pytest.fixture
def world(app, make_account, sdk, tmp_path):
    alice = make_account("alice", credits_micros=CREDIT)
    _photo_dataset(app, tmp_path, "alice")
    return alice, sdk(alice)


def test_the_bundled_cascade_finds_the_astronauts_face():
    path = faces.cascade_path(None)
    assert path is not None, "this OpenCV bundles no Haar cascade (OpenCV 5 does not: pyproject pins <5)"
    found = faces.detect(faces.load(path), cv2.imread(str(PHOTO)), 0.25)
    assert len(found) == 1
    assert all(abs(round(v * 320) - want) <= 3 for v, want in zip(found[0], FACE, strict=True)), found


def test_blur_replaces_the_face_pixels_as_a_new_revision_and_the_version_keeps_the_original(
        app, client, world, monkeypatch, tmp_path):
    alice, platform = world
    before = _items(app)
    photo = _photo_key(before)
    executor = use_fake_executor(app)
    job_id = assert_sdk_type(platform.datasets.create_batch("alice", "faces", body={"operation": "blur"}),
                             "DatasetsCreateBatchResponse")["jobId"]
    status = assert_sdk_type(platform.datasets.batch("alice", "faces"), "DatasetsBatchResponse")
    assert status["activeJob"]["operation"] == "blur" and status["activeJob"]["progress"]["total"] == 3

    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert spec["operation"] == "blur" and "weightsUrl" not in spec and len(spec["images"]) == 3
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")

    after = _items(app)
    assert after.keys() == before.keys()
    name, digest, labels = after[photo]
    assert (name, labels) == (before[photo][0], before[photo][2]) and digest != before[photo][1]
    assert_face_blurred(_pixels(app, before[photo][1]), _pixels(app, digest))
    assert all(after[k] == before[k] for k in before if k != photo)  # no face: the same bytes
    with app.state.lanner.db.session() as session:  # the version saved first holds the original bytes
        version = session.scalar(select(DatasetVersion).join(Dataset).where(Dataset.slug == "faces"))
        frozen = {key: sha for key, sha in session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
            DatasetItem.manifest_id == version.manifest_id))}
    assert frozen == {k: sha for k, (_, sha, _) in before.items()}
    assert CREDIT - _available(app, alice) == 3 * ONE
    last = assert_sdk_type(platform.datasets.batch("alice", "faces"), "DatasetsBatchResponse")["lastRun"]
    assert last["id"] == job_id and last["operation"] == "blur" and not last["failed"]
    assert last["results"]["processed"] == 3 and last["results"]["faces"] == 1
    [shown] = last["results"]["previews"]  # the images it blurred, as they are now
    assert shown["imageId"].endswith(f"-{photo}") and client.get(shown["imageUrl"]).content == _read(app, digest)
    assert app.state.lanner.blobs.exists(before[photo][1])


def test_a_preview_changes_nothing_and_its_apply_reuses_its_images(app, client, world, monkeypatch):
    alice, platform = world
    before = _items(app)
    photo = _photo_key(before)
    preview_id = platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "preview": True,
                                                                         "boxScale": 1.2})["jobId"]
    assert _items(app) == before and _available(app, alice) == CREDIT
    last = assert_sdk_type(platform.datasets.batch("alice", "faces"), "DatasetsBatchResponse")["lastRun"]
    assert last["preview"] is True and last["results"]["faces"] == 1 and len(last["results"]["previews"]) == 3
    shown = {p["imageId"].rpartition("-")[2]: p for p in last["results"]["previews"]}
    image = client.get(shown[photo]["imageUrl"])
    assert image.status_code == 200 and client.get(shown[photo]["thumbnailUrl"]).status_code == 200
    assert_face_blurred(_pixels(app, before[photo][1]), faces.decode(image.content))

    with pytest.raises(APIError) as other_settings:  # an apply with other settings is not this preview's
        platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "previewJobId": preview_id})
    assert other_settings.value.status_code == 422

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a previewed image was processed again")

    monkeypatch.setattr(faces, "detect", never)
    monkeypatch.setattr(faces, "blur", never)
    executor = use_fake_executor(app)
    job_id = platform.datasets.create_batch("alice", "faces", body={
        "operation": "blur", "boxScale": 1.2, "previewJobId": preview_id})["jobId"]
    app.state.autolabel.one_pass()
    assert executor.launched == []  # the preview did every image: nothing left for a worker
    after = _items(app)
    assert after[photo][1] != before[photo][1] and client.get(shown[photo]["imageUrl"]).content == \
        _read(app, after[photo][1])
    assert all(after[k] == before[k] for k in before if k != photo)
    assert CREDIT - _available(app, alice) == 3 * ONE  # billed once, at the apply
    last = platform.datasets.batch("alice", "faces")["lastRun"]
    assert last["id"] == job_id and last["results"]["processed"] == 3 and not last["failed"]


def _read(app: Any, digest: str) -> bytes:
    with app.state.lanner.blobs.open(digest) as handle:
        return handle.read()


def test_apply_reuses_the_preview_for_its_images_and_runs_the_rest(app, client, make_account, sdk, monkeypatch,
                                                                   tmp_path):
    """Eight images: the preview's six are applied as they are, the worker gets the other two."""
    alice = make_account("alice", credits_micros=CREDIT)
    _photo_dataset(app, tmp_path, "alice", others=7)
    platform = sdk(alice)
    preview_id = platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "preview": True})[
        "jobId"]
    previewed = {p["imageId"].rpartition("-")[2]
                 for p in platform.datasets.batch("alice", "faces")["lastRun"]["results"]["previews"]}
    assert len(previewed) == 6
    executor = use_fake_executor(app)
    platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "previewJobId": preview_id})
    assert CREDIT - _available(app, alice) == 6 * ONE  # the previewed images, recorded at once
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert {i["key"] for i in spec["images"]} == set(_items(app)) - previewed
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")
    assert CREDIT - _available(app, alice) == 8 * ONE
    assert platform.datasets.batch("alice", "faces")["lastRun"]["results"]["processed"] == 8


def test_a_killed_blur_worker_is_resumed_for_the_rest_and_a_cancelled_one_refused(app, client, world,
                                                                                 monkeypatch, tmp_path):
    alice, platform = world
    photo = _photo_key(_items(app))
    executor = use_fake_executor(app)
    job_id = platform.datasets.create_batch("alice", "faces", body={"operation": "blur"})["jobId"]
    app.state.autolabel.one_pass()
    first = launched_spec(executor)

    class Killed(BaseException):
        pass

    def die(posts: int) -> None:
        raise Killed()

    with pytest.raises(Killed):  # chunks of two: the photo and one other are recorded, then the worker dies
        run_worker(monkeypatch, InProcessHTTP(client, die), first, tmp_path / "w1")
    blurred_once = _items(app)[photo][1]
    assert CREDIT - _available(app, alice) == 2 * ONE
    active = assert_sdk_type(platform.datasets.batch("alice", "faces"), "DatasetsBatchResponse")["activeJob"]
    assert active["progress"]["processed"] == 2 and [p["imageId"].rpartition("-")[2] for p in active["previews"]] \
        == [photo]
    executor.set(job_id, 1, JobState.LOST, -9, "worker killed by signal 9")
    app.state.autolabel.one_pass()  # lost: queued again, and relaunched for what is left
    second = launched_spec(executor)
    assert second["attempt"] == 2 and [i["key"] for i in second["images"]] == [first["images"][2]["key"]]
    with pytest.raises(Stopped):  # the killed attempt's token is refused
        run_worker(monkeypatch, InProcessHTTP(client), first, tmp_path / "w2")
    run_worker(monkeypatch, InProcessHTTP(client), second, tmp_path / "w3")
    assert _items(app)[photo][1] == blurred_once  # blurred once, never again
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(AutolabelImage)) == 3
    assert CREDIT - _available(app, alice) == 3 * ONE

    again = platform.datasets.create_batch("alice", "faces", body={"operation": "blur"})["jobId"]  # then cancel
    app.state.autolabel.one_pass()
    third = launched_spec(executor)
    assert platform.datasets.delete_batch("alice", "faces") == {"action": "cancelled", "jobId": again}
    with pytest.raises(Stopped):
        run_worker(monkeypatch, InProcessHTTP(client), third, tmp_path / "w4")
    assert CREDIT - _available(app, alice) == 3 * ONE


def test_a_dismissed_preview_lets_its_images_go_and_its_apply_blurs_afresh(app, client, world, monkeypatch,
                                                                         tmp_path):
    alice, platform = world
    photo = _photo_key(_items(app))
    preview_id = platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "preview": True})[
        "jobId"]
    with app.state.lanner.db.session() as session:
        [prepared] = [p["sha256"] for p in session.get(AutolabelJob, preview_id).previews if p["sha256"]]
        assert session.get(ImageBlob, prepared) is not None
    assert platform.datasets.delete_batch("alice", "faces", preview_job_id=preview_id) == {
        "action": "dismissed", "jobId": preview_id}
    with app.state.lanner.db.session() as session:
        assert session.get(ImageBlob, prepared) is None  # its blob goes with the collector's grace
    executor = use_fake_executor(app)
    platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "previewJobId": preview_id})
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert len(spec["images"]) == 3 and CREDIT == _available(app, alice)
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")
    assert _items(app)[photo][1] == prepared  # the same pixels, blurred again: the same bytes


def test_image_id_blurs_that_image_alone(app, client, world, monkeypatch, tmp_path):
    alice, platform = world
    before = _items(app)
    photo = _photo_key(before)
    with app.state.lanner.db.session() as session:
        dataset_id = session.scalar(select(Dataset.id).where(Dataset.slug == "faces"))
    executor = use_fake_executor(app)
    platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "imageId": f"{dataset_id}-{photo}"})
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert [i["key"] for i in spec["images"]] == [photo]
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")
    assert CREDIT - _available(app, alice) == ONE and _items(app)[photo][1] != before[photo][1]
    with pytest.raises(APIError) as elsewhere:
        platform.datasets.create_batch("alice", "faces", body={"operation": "blur", "imageId": f"other-{photo}"})
    assert elsewhere.value.status_code == 422


def test_an_operator_cascade_that_is_not_there_is_422_before_anything_runs(app, world, tmp_path):
    alice, platform = world
    app.state.lanner.settings.face_cascade = tmp_path / "missing.xml"
    for body in ({"operation": "blur"}, {"operation": "blur", "preview": True}):
        with pytest.raises(APIError) as refused:
            platform.datasets.create_batch("alice", "faces", body=body)
        assert refused.value.status_code == 422 and "LANNER_FACE_CASCADE" in refused.value.json["error"]
    with app.state.lanner.db.session() as session:
        assert session.scalar(select(func.count()).select_from(DatasetVersion)) == 0


def test_an_operator_installed_cascade_blurs_the_face(app, client, world, monkeypatch, tmp_path):
    """``LANNER_FACE_CASCADE`` pointing at a cascade the operator installed (OpenCV's frontal-face cascade copied
    elsewhere): the run's spec names it, the worker loads it, the face is blurred. The bundled folder is emptied
    first, so the blur cannot come from the fallback."""
    alice, platform = world
    installed = tmp_path / "operator" / "my-faces.xml"
    installed.parent.mkdir()
    shutil.copy(faces.cascade_path(None), installed)
    monkeypatch.setattr(cv2.data, "haarcascades", str(tmp_path / "no-bundled-cascades") + "/")
    assert faces.cascade_path(None) is None
    app.state.lanner.settings.face_cascade = installed
    before = _items(app)
    photo = _photo_key(before)
    executor = use_fake_executor(app)
    platform.datasets.create_batch("alice", "faces", body={"operation": "blur"})
    app.state.autolabel.one_pass()
    spec = launched_spec(executor)
    assert spec["cascade"] == str(installed)
    run_worker(monkeypatch, InProcessHTTP(client), spec, tmp_path / "worker")
    after = _items(app)
    assert after[photo][1] != before[photo][1]
    assert_face_blurred(_pixels(app, before[photo][1]), _pixels(app, after[photo][1]))
    assert all(after[k] == before[k] for k in before if k != photo)
    assert CREDIT - _available(app, alice) == 3 * ONE
