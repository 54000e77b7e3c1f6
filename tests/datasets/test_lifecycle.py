"""Dataset and upload-session statuses change only as ``datasets/state.py`` and ``storage/upload_sessions.py``
allow, each change leaves a ``StatusEvent``; an import job is queued only after its request commits; and the
trash is purged once its days are over, with everything the dataset owned."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from lanner.accounts.models import User
from lanner.accounts.principal import Principal
from lanner.datasets import service, state, trash
from lanner.datasets.models import Dataset, DatasetExport, DatasetItem, DatasetVersion, Manifest
from lanner.db import after_commit, utcnow
from lanner.errors import Conflict
from lanner.status import InvalidStatusChange, StatusEvent
from lanner.storage import upload_sessions
from lanner.storage.models import UploadSession
from lanner.synthetic import make_detection_dataset
from tests.datasets.helpers import package, upload_dataset


def _events(session: Any, row: Any) -> list[tuple[str | None, str]]:
    return [(e.from_status, e.to_status) for e in session.scalars(
        select(StatusEvent).where(StatusEvent.entity == row.__tablename__, StatusEvent.entity_id == row.id)
        .order_by(StatusEvent.id))]


def _principal(session: Any, account: Any) -> Principal:
    return Principal.of(session.get(User, account.user_id))


def test_dataset_status_changes_are_guarded_and_each_writes_an_event(app, alice):
    with app.state.lanner.db.session() as session:
        dataset = service.create_dataset(session, _principal(session, alice), name="d")
        assert _events(session, dataset) == [(None, "ready")]
        with pytest.raises(InvalidStatusChange):
            state.finish_import(session, dataset, queued=True)  # ready -> ready is no queued import's end
        assert not state.fail_import(session, dataset, "boom")  # only a processing dataset fails
        state.start_import(session, dataset)
        with pytest.raises(Conflict, match="already processing"):
            state.start_import(session, dataset)
        with pytest.raises(InvalidStatusChange):
            state.finish_import(session, dataset, queued=False)  # a direct import never ends a queued one
        assert state.fail_import(session, dataset, "boom")
        assert dataset.status == "failed" and dataset.processing_error["message"] == "boom"
        state.start_import(session, dataset)
        assert dataset.processing_error is None
        state.finish_import(session, dataset, queued=True)
        assert dataset.status == "ready"
        assert _events(session, dataset) == [(None, "ready"), ("ready", "processing"), ("processing", "failed"),
                                             ("failed", "processing"), ("processing", "ready")]


def test_upload_session_status_changes_are_guarded_and_each_writes_an_event(app, alice):
    with app.state.lanner.db.session() as session:
        upload = upload_sessions.create(session, UploadSession(owner_id=alice.user_id, asset_type="datasets",
                                                               filename="a.zip"))
        with pytest.raises(Conflict, match="nothing was uploaded"):
            upload_sessions.mark_ingested(session, upload)  # pending: there is no file to import yet
        upload_sessions.start_receiving(session, upload)
        with pytest.raises(Conflict, match="already used"):
            upload_sessions.start_receiving(session, upload)  # a second PUT while the first is being written
        upload_sessions.receiving_failed(session, upload, "cut off")  # the first failed: the slot is free again
        upload_sessions.start_receiving(session, upload)
        upload_sessions.mark_uploaded(session, upload, sha256="b" * 64, size=4)
        assert (upload.sha256, upload.size) == ("b" * 64, 4)
        upload_sessions.mark_completed(session, upload)
        upload_sessions.mark_completed(session, upload)  # completing twice is harmless
        with pytest.raises(Conflict, match="already used"):
            upload_sessions.start_receiving(session, upload)
        upload_sessions.mark_ingested(session, upload)
        assert upload.sha256 is None  # the import job holds the file from here on
        with pytest.raises(Conflict, match="already imported"):
            upload_sessions.mark_ingested(session, upload)
        assert _events(session, upload) == [(None, "pending"), ("pending", "receiving"), ("receiving", "pending"),
                                            ("pending", "receiving"), ("receiving", "uploaded"),
                                            ("uploaded", "completed"), ("completed", "ingested")]


def test_an_import_job_is_queued_only_when_its_request_commits(app):
    db = app.state.lanner.db
    queued: list[str] = []
    with db.session() as session:
        after_commit(session, lambda: queued.append("job"))
        session.execute(select(1))
        assert queued == []
    assert queued == ["job"]
    with pytest.raises(RuntimeError), db.session() as session:
        after_commit(session, lambda: queued.append("never"))
        session.execute(select(1))
        raise RuntimeError("the request failed")
    assert queued == ["job"]


@pytest.fixture
def imported(sdk, alice, client, tmp_path):
    make_detection_dataset(tmp_path / "shapes", train=4, val=2)
    platform = sdk(alice)
    dataset = upload_dataset(platform, client, "alice", "shapes", package(tmp_path / "shapes", tmp_path / "zip"))
    assert dataset["status"] == "ready" and dataset["imageCount"] == 6
    return platform


def test_an_import_through_the_api_leaves_a_trail(app, imported):
    with app.state.lanner.db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        upload = session.scalar(select(UploadSession))
        assert _events(session, dataset) == [(None, "ready"), ("ready", "processing"), ("processing", "ready")]
        assert _events(session, upload) == [(None, "pending"), ("pending", "receiving"), ("receiving", "uploaded"),
                                            ("uploaded", "completed"), ("completed", "ingested")]


def _count(session: Any, table: Any, *where: Any) -> int:
    return int(session.scalar(select(func.count()).select_from(table).where(*where)) or 0)


def test_purge_expired_deletes_datasets_whose_trash_days_are_over_with_their_rows(app, alice, imported):
    imported.datasets.create_export("alice", "shapes", description="v1")  # a version shares the manifest
    imported.datasets.export("alice", "shapes")  # a cached export row
    imported.datasets.clone("alice", "shapes", name="kept-clone")  # shares the manifest too: it must survive
    imported.datasets.create(dataset="recent", name="recent")
    imported.datasets.delete("alice", "shapes")
    imported.datasets.delete("alice", "recent")
    db = app.state.lanner.db
    with db.session() as session:
        old = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        recent = session.scalar(select(Dataset).where(Dataset.slug == "recent"))
        old.deleted_at = utcnow() - timedelta(days=trash.TRASH_DAYS + 1)
        recent.deleted_at = utcnow() - timedelta(days=trash.TRASH_DAYS - 1)
        old_id, recent_manifest = old.id, recent.manifest_id
        assert _count(session, DatasetVersion, DatasetVersion.dataset_id == old_id) == 1
        assert _count(session, DatasetExport, DatasetExport.dataset_id == old_id) >= 1
    with db.session() as session:
        assert trash.purge_expired(session)[0] == 1
    with db.session() as session:
        assert session.get(Dataset, old_id) is None
        assert _count(session, DatasetVersion, DatasetVersion.dataset_id == old_id) == 0
        assert _count(session, DatasetExport, DatasetExport.dataset_id == old_id) == 0
        assert session.get(Dataset, recent.id) is not None and session.get(Manifest, recent_manifest) is not None
    assert imported.datasets.retrieve("alice", "kept-clone")["dataset"]["imageCount"] == 6
    assert [i["slug"] for i in imported.lifecycle.trash()["items"]] == ["recent"]
    with db.session() as session:  # once the clone goes too, no manifest or item of the purged data is left
        clone = session.scalar(select(Dataset).where(Dataset.slug == "kept-clone"))
        clone.deleted_at = utcnow()
        assert trash.purge_expired(session, now=utcnow() + timedelta(days=trash.TRASH_DAYS + 1))[0] == 2
    with db.session() as session:
        assert _count(session, Dataset) == 0 and _count(session, Manifest) == 0 and _count(session, DatasetItem) == 0
        assert trash.purge_expired(session)[0] == 0
