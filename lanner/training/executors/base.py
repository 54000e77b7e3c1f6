"""One interface for every place a run can execute (SkyPilot's pattern): the supervisor launches, polls and
stops attempts through it and never cares whether a pid or a Ray job is behind the id it gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class JobState(StrEnum):
    QUEUED = "queued"  # accepted, waiting for a device (Ray: PENDING)
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # exited 0
    FAILED = "failed"  # exited non-zero by itself: the training itself failed; relaunching would fail again
    LOST = "lost"  # killed by a signal, its node died, or nothing is known of it any more: relaunch
    STOPPED = "stopped"  # stopped by us
    EXPIRED = "expired"  # waited in the executor's queue longer than it allows (Ray: 15 min): submit it again


FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.LOST, JobState.STOPPED, JobState.EXPIRED})


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    exit_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class Capacity:
    total: int
    free: int


@dataclass
class LaunchSpec:
    """One attempt of one run: the worker command line and its whole environment (nothing is inherited)."""

    run_id: int
    attempt: int
    gpu_type: str
    command: list[str]
    env: dict[str, str]
    workdir: str
    devices: list[str] = field(default_factory=list)  # local GPU indices, when the executor assigns them


class Executor(Protocol):
    name: str

    def offers(self, gpu_type: str) -> bool:
        """Whether a run for this type can ever run here (Ray: any type, a node may join later)."""

    def capacity(self) -> dict[str, Capacity]:
        """Devices per GPU type, and how many are free right now."""

    def launch(self, spec: LaunchSpec) -> str:
        """Start (or queue) the attempt; returns the id to poll and stop it by."""

    def status(self, external_id: str) -> JobStatus: ...

    def stop(self, external_id: str) -> None:
        """Stop for certain: ask politely, then kill the whole process tree."""

    def log_tail(self, external_id: str, lines: int = 20) -> str: ...
