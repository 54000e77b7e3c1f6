"""Superseded checkpoints are collected: a running run keeps only its newest resume checkpoint, a settled run
keeps none (its model holds its weights by digest), and a blob goes only when nothing refers to it and nobody
wrote it during the grace period."""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import String, select, update

from lanner.db import Base, utcnow
from lanner.maintenance.gc import collect_checkpoints
from lanner.projects.models import ModelRecord
from lanner.storage.blobs import LocalBlobStore
from lanner.storage.references import BLOB_REFERENCES
from lanner.training.executors import JobState
from lanner.training.models import Run, StagedUpload
from tests.training.conftest import new_model
from tests.training.test_supervisor import run_row, started_run

GRACE = 600.0


def upload(client: Any, key: str, run_id: int, content: bytes) -> str:
    slot = client.post("/api/webhooks/models/upload", headers={"Authorization": f"Bearer {key}"},
                       json={"runId": run_id, "filename": "last.pt"})
    assert slot.status_code == 200, slot.text
    assert client.put(slot.json()["uploadUrl"], content=content).status_code == 200
    return hashlib.sha256(content).hexdigest()


def age_everything(app: Any, seconds: float) -> None:
    """Pretend every upload, settlement and blob write happened ``seconds`` earlier."""
    ago = timedelta(seconds=seconds)
    ctx = app.state.lanner
    with ctx.db.session() as session:
        for row in session.scalars(select(StagedUpload)):
            row.created_at -= ago
            row.uploaded_at = row.uploaded_at - ago if row.uploaded_at else None
        session.execute(update(Run).where(Run.settled_at.is_not(None)).values(settled_at=utcnow() - ago))
    for path in ctx.blobs.root.rglob("*"):
        if path.is_file() and len(path.name) == 64:
            old = path.stat().st_mtime - seconds
            os.utime(path, (old, old))


def staged_digests(app: Any, run_id: int) -> set[str | None]:
    with app.state.lanner.db.session() as session:
        return set(session.scalars(select(StagedUpload.sha256).where(StagedUpload.run_id == run_id)))


def test_a_running_run_keeps_its_newest_resume_checkpoint_and_a_settled_run_none(shapes, app, alice, client,
                                                                                 supervisor, fake_executor):
    ctx = app.state.lanner
    run_id = started_run(shapes, app, alice)
    supervisor.run_once()
    key = fake_executor.launched[0].env["ULTRALYTICS_API_KEY"]
    first, second = upload(client, key, run_id, b"epoch-1"), upload(client, key, run_id, b"epoch-2")
    time.sleep(0.01)  # upload times are ordered
    newest = upload(client, key, run_id, b"epoch-3")
    with ctx.db.session() as session:  # another model happens to hold the first checkpoint's bytes
        other = session.get(ModelRecord, new_model(shapes, "copy"))
        other.weights_sha256 = first

    collected = collect_checkpoints(ctx.db, ctx.blobs, GRACE)
    assert collected.uploads == 0 and staged_digests(app, run_id) == {first, second, newest}  # within the grace

    age_everything(app, GRACE + 1)
    collected = collect_checkpoints(ctx.db, ctx.blobs, GRACE)
    assert (collected.uploads, collected.blobs, collected.bytes) == (2, 1, len(b"epoch-2"))
    assert staged_digests(app, run_id) == {newest}
    assert ctx.blobs.exists(first) and not ctx.blobs.exists(second) and ctx.blobs.exists(newest)

    fake_executor.set(run_id, 1, JobState.LOST, -9, "worker killed by signal 9")
    supervisor.run_once()
    supervisor.run_once()
    spec = json.loads(fake_executor.launched[-1].env["LANNER_WORKER_SPEC"])
    assert spec["resume"] is True and newest in spec["checkpointUrl"]  # the relaunch gets the kept checkpoint
    assert client.get(spec["checkpointUrl"]).content == b"epoch-3"

    client.delete("/api/models/alice/p/m/training", headers=alice.headers)
    supervisor.run_once()
    assert run_row(app, run_id).settled_at is not None
    collect_checkpoints(ctx.db, ctx.blobs, GRACE)
    assert staged_digests(app, run_id) == {newest}  # settled just now: kept for the grace period

    age_everything(app, GRACE + 1)
    collect_checkpoints(ctx.db, ctx.blobs, GRACE)
    assert staged_digests(app, run_id) == set() and not ctx.blobs.exists(newest)
    assert ctx.blobs.exists(first)  # still another model's weights


def test_a_blob_written_again_during_the_grace_is_kept(tmp_path):
    store = LocalBlobStore(tmp_path)
    digest = store.put_bytes(b"weights").sha256
    path = store.local_path(digest)
    assert path is not None
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    store.put_bytes(b"weights")  # deduplicated, but refreshes the write time
    assert not store.delete_if_idle(digest, 600) and store.exists(digest)
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert store.delete_if_idle(digest, 600) and not store.exists(digest)
    assert not store.delete_if_idle(digest, 600)  # already gone


def test_every_column_holding_a_blob_digest_is_known_to_the_collector():
    import lanner.models_registry  # noqa: F401  (every table on the metadata)

    listed = set(BLOB_REFERENCES)
    digests = {(table.name, column.name) for table in Base.metadata.tables.values() for column in table.columns
               if "sha256" in column.name and isinstance(column.type, String)}
    # A bucket image's digest names pixels kept in the user's bucket, never in the store: nothing to collect (its
    # dataset item, which the collector does know, refers to the same digest).
    not_in_the_store = {("bucket_objects", "sha256")}
    # Embeddings (and the map made of them) name the weights and the image a vector was computed from: keys, not
    # holds. A vector outlives
    # neither usefully, and a job whose model is deleted mid-way fails to fetch the weights, as it should.
    names_only = {("embedding_jobs", "model_sha256"), ("image_embeddings", "model_sha256"),
                  ("image_embeddings", "image_sha256"), ("embedding_layouts", "model_sha256"),
                  ("review_jobs", "model_sha256"),  # review scores name their model the same way
                  # a copy-detection head is kept in its own row (``data``): its digest names it, its key the vectors'
                  ("embedding_heads", "sha256"), ("embedding_heads", "model_sha256")}
    assert digests - not_in_the_store - names_only == listed
