"""What executors declare instead of being told apart by name: Ray queues jobs itself and moves a worker's files
to its own node; the local executor does neither; ``kill`` falls back to ``stop``."""

from __future__ import annotations

from pathlib import Path

from lanner.training.executors import Capability, Executor, JobState, JobStatus
from lanner.training.executors.local import LocalExecutor
from lanner.training.executors.ray import RayExecutor
from tests.training.conftest import FakeExecutor


def test_ray_queues_jobs_and_keeps_worker_files_on_its_node() -> None:
    ray = RayExecutor("http://head:8265", worker_dir="/scratch/lanner/")
    assert ray.can(Capability.QUEUES_JOBS)
    env = ray.worker_env({"HOME": "/srv/lanner/runs/7", "YOLO_CONFIG_DIR": "/srv/lanner/runs/7/config", "A": "1"},
                         run_id=7)
    assert env == {"A": "1", "YOLO_CONFIG_DIR": "/scratch/lanner/7/config", "LANNER_WORKER_DIR": "/scratch/lanner/7"}


def test_the_local_executor_neither_queues_nor_moves_files(tmp_path: Path) -> None:
    local = LocalExecutor(tmp_path, gpus={})
    assert not local.can(Capability.QUEUES_JOBS)
    env = {"HOME": str(tmp_path), "A": "1"}
    assert local.worker_env(env, run_id=1) == env


def test_kill_falls_back_to_stop() -> None:
    class Polite(FakeExecutor):
        kill = Executor.kill  # the base class's: an executor with no harder way than stop

    executor = Polite()
    executor.states["job"] = JobStatus(JobState.RUNNING)
    executor.kill("job")
    assert executor.stopped == ["job"] and executor.killed == []
