"""Review tests: the in-process app's loops are off; a test drives the review queue pass by pass with a fake
executor and runs the real worker (the auto-annotation worker) in-process, its HTTP going to the app through the
test client (``tests.autolabel.conftest.InProcessHTTP``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lanner.config import Settings
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.trained import tiny_weights  # noqa: F401  (a fixture)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL, secret_key="test-secret",
                    api_key_cache_seconds=0, autolabel_poll_seconds=0, export_poll_seconds=0, review_poll_seconds=0,
                    embedding_poll_seconds=0, supervisor_interval_seconds=0, maintenance_interval_seconds=0,
                    assistant_poll_seconds=0, autolabel_chunk_images=3, **GENEROUS_LIMITS)
