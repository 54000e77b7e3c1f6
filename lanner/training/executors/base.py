"""One interface for every place a run can execute (SkyPilot's pattern): the supervisor launches, polls and
stops attempts through it and never cares whether a pid or a Ray job is behind the id it gets back. Where
executors differ in behaviour, each declares it (``capabilities``, ``worker_env``); the supervisor asks for a
capability, never for an executor by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Flag, StrEnum, auto

from lanner.gpus.pools import NO_POOLS, Pools


class LaunchDeferred(Exception):
    """The executor cannot take a job right now (Ray's job agent still starting, its API unreachable): nothing
    was launched, and the run stays ``pending`` for a later pass. Any other launch error fails the run."""


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
    """One attempt of one run: the worker command line and its whole environment (nothing is inherited).
    ``run_id`` is the job's id: a run's number, or another job's string id (an export's)."""

    run_id: int | str
    attempt: int
    gpu_type: str
    command: list[str]
    env: dict[str, str]
    workdir: str
    devices: list[str] = field(default_factory=list)  # local GPU indices, when the executor assigns them
    gpu_count: int = 1  # GPUs of gpu_type the attempt gets, all on one node (DDP)


class Capability(Flag):
    """What an executor does that the supervisor must not do for it."""

    NONE = 0
    # It holds a launched job until a device is free (Ray): Lanner neither counts free slots before launching nor
    # starts an attempt's clock at launch; the attempt starts when its status first says RUNNING.
    QUEUES_JOBS = auto()


class Executor(ABC):
    name: str
    capabilities: Capability = Capability.NONE

    def can(self, capability: Capability) -> bool:
        return capability in self.capabilities

    @property
    def pools(self) -> Pools:
        """The node pools this executor's cluster brings up on demand (``LANNER_POOLS``): none by default."""
        return NO_POOLS

    @abstractmethod
    def offers(self, gpu_type: str) -> bool:
        """Whether a run for this type can ever run here (Ray: any type, a node may join later)."""

    @abstractmethod
    def capacity(self) -> dict[str, Capacity]:
        """Devices per GPU type, and how many are free right now."""

    def most_devices(self, gpu_type: str) -> int | None:
        """The most devices of this type one run can get here (all on one node); None where no limit is known
        (Ray: a node with more may join)."""
        return None

    @abstractmethod
    def launch(self, spec: LaunchSpec) -> str:
        """Start (or queue) the attempt; returns the id to poll and stop it by."""

    @abstractmethod
    def status(self, external_id: str) -> JobStatus: ...

    @abstractmethod
    def stop(self, external_id: str) -> None:
        """Stop for certain: ask politely, then kill the whole process tree."""

    def kill(self, external_id: str) -> None:
        """Stop at once, for a worker that stopped reporting (it may be hung). By default: ``stop``."""
        self.stop(external_id)

    @abstractmethod
    def log_tail(self, external_id: str, lines: int = 20) -> str: ...

    def worker_env(self, env: dict[str, str], *, run_id: int | str) -> dict[str, str]:
        """The worker's environment as this executor must change it (paths on the node that runs it)."""
        return env
