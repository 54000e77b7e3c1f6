"""The fake executor of the training and web tests (the ``fake_executor`` fixture in ``tests/conftest.py``
installs one on the app)."""

from __future__ import annotations

from lanner.training.executors import Capacity, Executor, JobState, JobStatus, LaunchSpec


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
