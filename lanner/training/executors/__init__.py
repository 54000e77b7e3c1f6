"""Executors: ``local`` (subprocesses on this machine) and ``ray`` (Ray Jobs on a cluster)."""

from __future__ import annotations

from lanner.config import Settings
from lanner.training.executors.base import (
    Capability,
    Capacity,
    Executor,
    JobState,
    JobStatus,
    LaunchDeferred,
    LaunchSpec,
)

__all__ = ["Capability", "Capacity", "Executor", "JobState", "JobStatus", "LaunchDeferred", "LaunchSpec",
           "make_executor"]


def make_executor(settings: Settings) -> Executor:
    """The configured executor; only its own module is imported (start-up cost: the Ray one brings httpx, the
    local one psutil and NVML), so that a command which asks one question of it pays for one."""
    if settings.executor == "local":
        from lanner.training.executors.local import LocalExecutor  # start-up cost: psutil, NVML

        return LocalExecutor(settings.resolved_home / "runs", max_cpu_runs=settings.local_max_runs)
    if settings.executor == "ray":
        if not settings.ray_address:
            raise ValueError("LANNER_EXECUTOR=ray needs LANNER_RAY_ADDRESS (the Ray Jobs address, "
                             "e.g. http://127.0.0.1:8265)")
        from lanner.gpus.pools import load_pools  # start-up cost: only a Ray cluster has pools
        from lanner.training.executors.ray import RayExecutor  # start-up cost: httpx

        return RayExecutor(settings.ray_address, num_gpus=settings.ray_num_gpus, worker_dir=settings.ray_worker_dir,
                           pools=lambda: load_pools(settings.pools))
    raise ValueError(f"LANNER_EXECUTOR must be 'local' or 'ray', not {settings.executor!r}")
