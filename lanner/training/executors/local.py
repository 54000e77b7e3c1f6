"""The embedded executor: each attempt is a child process in its own session (so a stop reaches the trainer's
data-loader workers too), logging to ``LANNER_HOME/runs/<run>/attempt-<n>.log``.

The id handed back encodes pid, process start time, run, attempt, GPU type and devices, so a restarted server
can still recognise (and stop) a worker it launched before, without mistaking a recycled pid for it; and the
machine that launched it (``db.leases.this_machine``), because a pid means nothing on another one. When the
supervisor's lease moves to another host while workers run here, the new leader must not read "no such pid" as
"the worker is gone" (it would relaunch the run beside its live trainer and break ``LANNER_LOCAL_MAX_RUNS``): for
it the status of a worker elsewhere cannot be read (``WorkerElsewhere``), and the supervisor judges the run by
its events, as it does for a Ray job it cannot read."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

from lanner.db.leases import this_machine
from lanner.gpus.probe import gpu_type_for_name
from lanner.training.executors.base import Capacity, Executor, JobState, JobStatus, LaunchDeferred, LaunchSpec

log = logging.getLogger("lanner.executor.local")
KILL_AFTER_SECONDS = 10.0


class WorkerElsewhere(RuntimeError):
    """The worker was launched on another machine: its process cannot be seen, signalled or read from here."""


def discover_gpus() -> dict[str, list[str]]:
    """GPU type -> NVML device indices on this machine; empty without NVIDIA GPUs or without NVML."""
    try:
        import pynvml  # optional: only machines with NVIDIA drivers have it

        pynvml.nvmlInit()
    except Exception:
        return {}
    found: dict[str, list[str]] = {}
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
            name = name.decode() if isinstance(name, bytes) else str(name)
            gpu_type = gpu_type_for_name(name)
            if gpu_type is not None:
                found.setdefault(gpu_type, []).append(str(index))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return found


@dataclass
class _Worker:
    pid: int
    started_ms: int
    run_id: int | str
    attempt: int
    gpu_type: str
    devices: list[str]
    process: subprocess.Popen | None = None  # None for a worker adopted after a server restart
    machine: str | None = None  # this_machine() of the launching process; None in ids written before it was kept

    @property
    def external_id(self) -> str:
        local = f"{self.pid}:{self.started_ms}:{self.run_id}:{self.attempt}:{self.gpu_type}:{','.join(self.devices)}"
        return f"{local}@{self.machine}" if self.machine else local

    @classmethod
    def parse(cls, external_id: str) -> _Worker:
        local, _, machine = external_id.partition("@")
        pid, started, run_id, attempt, gpu_type, devices = local.split(":", 5)
        # run_id stays text: a run's number or an export's id, only ever written back into paths and ids
        return cls(int(pid), int(started), run_id, int(attempt), gpu_type, [d for d in devices.split(",") if d],
                   machine=machine or None)

    def elsewhere(self) -> bool:
        here = this_machine()
        return bool(self.machine and here and self.machine != here)


def _started_ms(pid: int) -> int | None:
    try:
        return int(psutil.Process(pid).create_time() * 1000)
    except psutil.Error:
        return None


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, root: Path, *, max_cpu_runs: int = 1, gpus: dict[str, list[str]] | None = None) -> None:
        self.root = root
        self.max_cpu_runs = max(0, max_cpu_runs)
        self.gpus = discover_gpus() if gpus is None else gpus
        self._workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()

    # --- capacity --------------------------------------------------------------------------------

    def offers(self, gpu_type: str) -> bool:
        return gpu_type in self.gpus or (gpu_type == "cpu" and self.max_cpu_runs > 0)

    def _alive(self) -> list[_Worker]:
        with self._lock:
            workers = list(self._workers.values())
        # A worker elsewhere holds that machine's devices, not these (the database counts it for the cluster).
        return [w for w in workers if not w.elsewhere() and self._state(w).state in (JobState.RUNNING, JobState.QUEUED)]

    def capacity(self) -> dict[str, Capacity]:
        alive = self._alive()
        totals = {gpu_type: len(indices) for gpu_type, indices in self.gpus.items()}
        if self.max_cpu_runs:
            totals["cpu"] = self.max_cpu_runs
        # A GPU worker holds its devices (one or several); a CPU worker one slot.
        return {gpu_type: Capacity(total=total, free=max(0, total - sum(
                    max(1, len(w.devices)) for w in alive if w.gpu_type == gpu_type)))
                for gpu_type, total in totals.items()}

    def most_devices(self, gpu_type: str) -> int | None:
        return 1 if gpu_type == "cpu" else len(self.gpus.get(gpu_type, []))

    def free_devices(self, gpu_type: str) -> list[str]:
        if gpu_type == "cpu":
            return ["cpu"]
        busy = {d for w in self._alive() if w.gpu_type == gpu_type for d in w.devices}
        return [d for d in self.gpus.get(gpu_type, []) if d not in busy]

    # --- lifecycle -------------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> str:
        env = dict(spec.env)
        devices = spec.devices
        if spec.gpu_type != "cpu" and not devices:
            # A run's devices are reserved together; fewer free than it needs, and it waits (stays pending).
            if (self.most_devices(spec.gpu_type) or 0) < spec.gpu_count:
                raise RuntimeError(f"this machine has {self.most_devices(spec.gpu_type)} {spec.gpu_type}, "
                                   f"not the {spec.gpu_count} the run needs")
            devices = self.free_devices(spec.gpu_type)[:spec.gpu_count]
            if len(devices) < spec.gpu_count:
                raise LaunchDeferred(f"{len(devices)} of the {spec.gpu_count} {spec.gpu_type} it needs are free")
        if spec.gpu_type != "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""
        workdir = Path(spec.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        log_path = self._log_path(spec.run_id, spec.attempt)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as out:
            process = subprocess.Popen(spec.command, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        worker = _Worker(process.pid, _started_ms(process.pid) or 0, spec.run_id, spec.attempt, spec.gpu_type,
                         devices, process, machine=this_machine())
        with self._lock:
            self._workers[worker.external_id] = worker
        log.info("run %s attempt %s: pid %s on %s", spec.run_id, spec.attempt, process.pid, spec.gpu_type)
        return worker.external_id

    def _worker(self, external_id: str) -> _Worker:
        with self._lock:
            worker = self._workers.get(external_id)
            if worker is None:
                worker = _Worker.parse(external_id)
                self._workers[external_id] = worker
            return worker

    def _state(self, worker: _Worker) -> JobStatus:
        if worker.elsewhere():
            raise WorkerElsewhere(f"worker {worker.pid} was launched on another machine; its status cannot be "
                                  "read here")
        if worker.process is not None:
            code = worker.process.poll()
            if code is None:
                return JobStatus(JobState.RUNNING)
            if code == 0:
                return JobStatus(JobState.SUCCEEDED, 0)
            if code < 0:
                return JobStatus(JobState.LOST, code, f"worker killed by signal {-code}")
            return JobStatus(JobState.FAILED, code, f"worker exited with code {code}")
        # Adopted: not our child, so no exit code. Same pid and start time means it is still ours.
        if _started_ms(worker.pid) == worker.started_ms:
            try:
                if psutil.Process(worker.pid).status() != psutil.STATUS_ZOMBIE:
                    return JobStatus(JobState.RUNNING)
            except psutil.Error:
                pass
        return JobStatus(JobState.LOST, None, "worker process is gone")

    def status(self, external_id: str) -> JobStatus:
        return self._state(self._worker(external_id))

    def stop(self, external_id: str) -> None:
        worker = self._worker(external_id)
        if worker.elsewhere():
            log.warning("run %s: its worker (pid %s) runs on another machine; only a server there can stop it",
                        worker.run_id, worker.pid)
            return
        if self._state(worker).state is not JobState.RUNNING:
            return
        self._signal(worker, signal.SIGTERM)

        def finish() -> None:
            if self._state(worker).state is JobState.RUNNING:
                self._signal(worker, signal.SIGKILL)

        timer = threading.Timer(KILL_AFTER_SECONDS, finish)
        timer.daemon = True
        timer.start()

    def kill(self, external_id: str) -> None:
        """Immediately, for a worker that stopped reporting (it may be hung)."""
        self._signal(self._worker(external_id), signal.SIGKILL)

    def _signal(self, worker: _Worker, sig: signal.Signals) -> None:
        if worker.elsewhere():
            log.warning("run %s: its worker (pid %s) runs on another machine; not signalled", worker.run_id,
                        worker.pid)
            return
        if _started_ms(worker.pid) != worker.started_ms:
            return  # exited (or the pid was recycled): nothing of ours to signal
        try:
            os.killpg(worker.pid, sig)  # the worker leads its own session: this reaches its children too
        except ProcessLookupError:
            pass
        except PermissionError:  # pragma: no cover - not our process group after all
            log.warning("cannot signal process group %s", worker.pid)
        if worker.process is not None and sig == signal.SIGKILL:
            try:
                worker.process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass

    def _log_path(self, run_id: int | str, attempt: int) -> Path:
        return self.root / str(run_id) / f"attempt-{attempt}.log"

    def log_tail(self, external_id: str, lines: int = 20) -> str:
        worker = self._worker(external_id)
        path = self._log_path(worker.run_id, worker.attempt)
        try:
            with path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return ""
        text = text.replace("\r", "\n")
        return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])
