"""What executors declare instead of being told apart by name: Ray queues jobs itself and moves a worker's files
to its own node; the local executor does neither; ``kill`` falls back to ``stop``."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from ray.job_submission import JobSubmissionClient

from lanner.training.executors import Capability, Executor, JobState, JobStatus, LaunchDeferred, LaunchSpec
from lanner.training.executors.local import LocalExecutor
from lanner.training.executors.ray import RayExecutor
from tests.training.fakes import FakeExecutor


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


def test_ray_defers_a_launch_its_dashboard_asks_to_retry_and_fails_anything_else(tmp_path: Path) -> None:
    class Dashboard:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def submit_job(self, **_: object) -> str:
            raise self.error

    spec = LaunchSpec(run_id=1, attempt=1, gpu_type="h100-sxm", command=["true"], env={}, workdir=str(tmp_path))
    busy = RuntimeError("Request failed with status code 500: No available agent to submit job, please try again "
                        "later..")
    with pytest.raises(LaunchDeferred):
        RayExecutor("http://head:8265", client=Dashboard(busy)).launch(spec)
    with pytest.raises(LaunchDeferred):
        RayExecutor("http://head:8265", client=Dashboard(ConnectionError("refused"))).launch(spec)
    with pytest.raises(RuntimeError, match="bad runtime_env"):
        RayExecutor("http://head:8265", client=Dashboard(RuntimeError("bad runtime_env"))).launch(spec)


def test_ray_asks_for_one_unit_and_one_gpu_per_gpu_of_the_run(tmp_path: Path) -> None:
    """What ``submit_job`` is asked, checked against the installed Ray client's own signature."""
    real = inspect.signature(JobSubmissionClient.submit_job)

    class Dashboard:
        def __init__(self) -> None:
            self.calls: list[dict[str, object]] = []

        def submit_job(self, **kwargs: object) -> str:
            real.bind(self, **kwargs)  # only arguments Ray's client takes
            self.calls.append(kwargs)
            return str(kwargs["submission_id"])

    dashboard = Dashboard()
    for gpu_type, count in (("h100-sxm", 1), ("h100-sxm", 4), ("cpu", 1)):
        RayExecutor("http://head:8265", num_gpus=1.0, client=dashboard).launch(LaunchSpec(
            run_id=1, attempt=1, gpu_type=gpu_type, command=["true"], env={}, workdir=str(tmp_path),
            gpu_count=count))
    RayExecutor("http://head:8265", num_gpus=0.5, client=dashboard).launch(LaunchSpec(
        run_id=2, attempt=1, gpu_type="l4", command=["true"], env={}, workdir=str(tmp_path), gpu_count=2))
    asked = [(c["entrypoint_resources"], c["entrypoint_num_gpus"]) for c in dashboard.calls]
    assert asked == [({"lanner-gpu:h100-sxm": 1}, 1.0), ({"lanner-gpu:h100-sxm": 4}, 4.0),
                     ({"lanner-gpu:cpu": 1}, None), ({"lanner-gpu:l4": 2}, 1.0)]
