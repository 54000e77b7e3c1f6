"""Training API tests run the supervisor by hand (``run_once``) against a fake executor (``fake_executor``, shared
with the web tests from ``tests/conftest.py``): no real processes, full control over what the executor reports
(running, killed, exited, queued)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lanner.config import Settings
from lanner.synthetic import make_detection_dataset
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.datasets.helpers import package, upload_dataset
from tests.training.fakes import FakeExecutor


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, supervisor_interval_seconds=0,
                    run_lost_after_seconds=600, run_max_relaunches=2, cancel_grace_seconds=0,
                    meter_interval_seconds=0, **GENEROUS_LIMITS)


@pytest.fixture
def supervisor(app: Any, fake_executor: FakeExecutor) -> Any:
    return app.state.training.supervisor


@pytest.fixture
def shapes(sdk: Any, alice: Any, client: Any, tmp_path: Path) -> Any:
    archive = package(make_detection_dataset(tmp_path / "shapes", train=12, val=6, size=96).parent,
                      tmp_path / "zip")
    platform = sdk(alice)
    upload_dataset(platform, client, "alice", "shapes", archive)
    return platform


ARGS = {"model": "yolo11n.yaml", "data": "ul://alice/datasets/shapes", "epochs": 2, "imgsz": 96, "batch": 4}


def new_model(platform: Any, name: str, project: str = "p") -> str:
    try:
        platform.projects.retrieve("alice", project)
    except Exception:
        platform.projects.create(owner="alice", project=project, name=project, visibility="private")
    return platform.models.create(body={"project": project, "model": name, "name": name})["id"]
