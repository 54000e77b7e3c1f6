"""Embedding tests: the in-process app runs no embedding worker (its queue is off); ``drive_worker`` does what a
worker does through the same signed links, with the same functions (``lanner.embeddings.worker``), and
``tests/embeddings/test_e2e_*`` run real workers against a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from lanner.config import Settings
from lanner.embeddings import jobs, worker
from lanner.embeddings.models import EmbeddingJob
from lanner.training.executors.base import JobState, JobStatus
from tests.conftest import GENEROUS_LIMITS, TEST_URL


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL, secret_key="test-secret",
                    api_key_cache_seconds=0, export_poll_seconds=0, embedding_poll_seconds=0, embedding_imgsz=64,
                    supervisor_interval_seconds=0, maintenance_interval_seconds=0, **GENEROUS_LIMITS)


def launch(app: Any, job_id: str) -> dict[str, Any]:
    """What the queue does before a worker runs: the next attempt, launched. Returns the worker's spec."""
    queue = app.state.embeddings
    with app.state.lanner.db.session() as session:
        job = session.get(EmbeddingJob, job_id)
        jobs.new_attempt(job)
        assert jobs.launched(session, job, external_id=f"inproc:{job.attempt}", executor="inproc")
        assert jobs.running(session, job)
        import json
        return json.loads(queue._spec(session, job).env[worker.SPEC_ENV])


def relative(url: str) -> str:
    return url.removeprefix(TEST_URL)


def drive_worker(client: Any, spec: dict[str, Any], model: Any, *, pages: int | None = None) -> int:
    """The worker's loop (``worker.run``) through the test client: pages of missing images, fetched from their
    signed links, embedded, delivered. Stops after ``pages`` pages (a worker killed there); returns vectors sent."""
    after, sent, done = "", 0, 0
    while pages is None or done < pages:
        answer = client.get(relative(worker.page_url(spec["manifestUrl"], after, spec["batch"])))
        assert answer.status_code == 200, answer.text
        page = answer.json()["images"]
        if not page:
            break
        after = page[-1]["sha256"]
        pixels = [cv2.imdecode(np.frombuffer(client.get(relative(i["url"])).content, np.uint8), cv2.IMREAD_COLOR)
                  for i in page]
        vectors = worker.embed(model, pixels, spec["imgsz"])
        stored = client.put(relative(spec["vectorsUrl"]), content=worker.pack(
            [i["sha256"] for i in page], vectors, 0, 0))
        assert stored.status_code == 200, stored.text
        sent += len(page)
        done += 1
    return sent


def finish(app: Any, job_id: str, state: JobState = JobState.SUCCEEDED) -> None:
    """The queue's watch seeing the worker gone with ``state``."""
    queue = app.state.embeddings
    with app.state.lanner.db.session() as session:
        job = session.get(EmbeddingJob, job_id)
        queue._observe(session, job, JobStatus(state, message="test"))
