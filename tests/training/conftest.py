"""Training API tests run the supervisor by hand (``tick``) against a fake executor: no real processes,
full control over what the executor reports (running, killed, exited, queued)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lanner.config import Settings
from lanner.synthetic import make_detection_dataset
from lanner.training.executors import Capacity, Executor, JobState, JobStatus, LaunchSpec
from tests.conftest import GENEROUS_LIMITS, TEST_URL
from tests.datasets.helpers import package, upload_dataset


class FakeExecutor(Executor):
    """Records launches; a test sets each job's state. Offers ``cpu`` (capacity ``slots``) and ``h100-sxm``."""

    name = "local"

    def __init__(self, slots: int = 5) -> None:
        self.slots = slots
        self.launched: list[LaunchSpec] = []
        self.states: dict[str, JobStatus] = {}
        self.stopped: list[str] = []
        self.killed: list[str] = []

    def offers(self, gpu_type: str) -> bool:
        return gpu_type in ("cpu", "h100-sxm")

    def _busy(self, gpu_type: str) -> int:
        return sum(1 for spec in self.launched if spec.gpu_type == gpu_type
                   and self.states[self._id(spec)].state in (JobState.RUNNING, JobState.QUEUED))

    def capacity(self) -> dict[str, Capacity]:
        return {g: Capacity(total=self.slots, free=self.slots - self._busy(g)) for g in ("cpu", "h100-sxm")}

    @staticmethod
    def _id(spec: LaunchSpec) -> str:
        return f"fake-{spec.run_id}-{spec.attempt}"

    def launch(self, spec: LaunchSpec) -> str:
        self.launched.append(spec)
        self.states[self._id(spec)] = JobStatus(JobState.RUNNING)
        return self._id(spec)

    def status(self, external_id: str) -> JobStatus:
        return self.states[external_id]

    def stop(self, external_id: str) -> None:
        self.stopped.append(external_id)
        self.states[external_id] = JobStatus(JobState.STOPPED, -15, "stopped")

    def kill(self, external_id: str) -> None:
        self.killed.append(external_id)
        self.states[external_id] = JobStatus(JobState.LOST, -9, "worker killed by signal 9")

    def log_tail(self, external_id: str, lines: int = 20) -> str:
        return "Traceback: something broke"

    def set(self, run_id: int, attempt: int, state: JobState, code: int | None = None, message: str = "") -> None:
        self.states[f"fake-{run_id}-{attempt}"] = JobStatus(state, code, message)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=database_url, public_url=TEST_URL,
                    secret_key="test-secret", api_key_cache_seconds=0, supervisor_interval_seconds=0,
                    run_lost_after_seconds=600, run_max_relaunches=2, cancel_grace_seconds=0,
                    meter_interval_seconds=0, **GENEROUS_LIMITS)


@pytest.fixture
def fake_executor(app: Any) -> FakeExecutor:
    executor = FakeExecutor()
    app.state.training.use_executor(executor)
    return executor


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
