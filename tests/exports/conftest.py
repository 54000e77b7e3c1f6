"""Export tests: the in-process app runs no export worker (its queue is off); ``tests/exports/test_e2e_*`` run
real workers against a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lanner.config import Settings
from tests.conftest import GENEROUS_LIMITS, TEST_URL


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL, secret_key="test-secret",
                    api_key_cache_seconds=0, export_poll_seconds=0, supervisor_interval_seconds=0,
                    maintenance_interval_seconds=0, **GENEROUS_LIMITS)


def fake_weights(tmp_path: Path) -> Path:
    """Bytes standing in for a checkpoint: no worker reads them in these tests."""
    path = tmp_path / "fake.pt"
    path.write_bytes(b"not a real checkpoint")
    return path


def simulate_worker(app: Any, export_id: str) -> str:
    """What the queue does before a worker runs: the next attempt, launched. Returns the attempt's upload slot."""
    from lanner.exports import jobs
    from lanner.exports.models import ModelExport

    with app.state.lanner.db.session() as session:
        job = session.get(ModelExport, export_id)
        jobs.new_attempt(job)
        assert jobs.launched(session, job, external_id="fake:1", executor="fake")
        return f"{jobs.SLOT_PREFIX}{job.id}/{job.slot}/{job.filename}"
