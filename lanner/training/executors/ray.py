"""The scale-out executor: each attempt is a Ray Job (``lanner[ray]``). Ray places and queues it; Lanner
never schedules. A job asks for the custom resource ``lanner-gpu:<type>``, one unit per GPU of the run (Ray places
a job's entrypoint on one node, so a run on several GPUs gets them all there), which a worker node offers for
each GPU it has::

    ray start --address=<head>:6379 --resources='{"lanner-gpu:h100-sxm": 8}'

A job for a type no node offers stays ``PENDING`` in Ray until such a node joins (Ray gives up on a queued
job after ``RAY_JOB_START_TIMEOUT_SECONDS``, 15 min by default; Lanner then submits it again, so the run
stays pending). Ray's ``stop_job`` cannot stop a job still waiting for resources; the supervisor stops it as
soon as it starts. Free capacity per type is
read from the dashboard's cluster status, so ``gpu-availability`` reflects the real cluster."""

from __future__ import annotations

import logging
import secrets
import shlex
from collections.abc import Callable
from typing import Any

import httpx

from lanner.gpus.pools import NO_POOLS, RESOURCE_PREFIX, Pools
from lanner.training.executors import base

log = logging.getLogger("lanner.executor.ray")


def resource_for(gpu_type: str) -> str:
    return f"{RESOURCE_PREFIX}{gpu_type}"


class RayExecutor(base.Executor):
    name = "ray"
    capabilities = base.Capability.QUEUES_JOBS

    def __init__(self, address: str, *, num_gpus: float = 1.0, worker_dir: str = "~/.lanner-worker/runs",
                 client: Any = None, pools: Callable[[], Pools] = lambda: NO_POOLS) -> None:
        self.address = address.rstrip("/")
        self._pools = pools
        self.num_gpus = num_gpus
        self.worker_dir = worker_dir
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                from ray.job_submission import JobSubmissionClient  # optional: lanner[ray]
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise RuntimeError("LANNER_EXECUTOR=ray needs Ray: pip install 'lanner[ray]'") from exc
            self._client = JobSubmissionClient(self.address)
        return self._client

    # --- capacity --------------------------------------------------------------------------------

    @property
    def pools(self) -> Pools:
        return self._pools()

    def offers(self, gpu_type: str) -> bool:
        """Without pools, any type: a node with it may join at any time (until then Ray keeps the job queued).
        With pools, the operator said what can come: a type a pool brings up, or one a node has now."""
        pools = self.pools
        if not len(pools) or pools.for_gpu(gpu_type) is not None:
            return True
        room = self.capacity().get(gpu_type)
        return room is not None and room.total > 0

    def most_devices(self, gpu_type: str) -> int | None:
        """A pool's nodes' GPUs for a type a pool brings up (a run's GPUs all come on one node); otherwise no
        limit is known (a node with more may join)."""
        pool = self.pools.for_gpu(gpu_type)
        return pool.gpus_per_node if pool is not None else None

    def capacity(self) -> dict[str, base.Capacity]:
        try:
            usage = self._usage()
        except Exception as exc:
            log.warning("could not read Ray cluster status from %s: %s", self.address, exc)
            return {}
        out: dict[str, base.Capacity] = {}
        for name, (used, total) in usage.items():
            if name.startswith(RESOURCE_PREFIX):
                out[name[len(RESOURCE_PREFIX):]] = base.Capacity(total=int(total), free=max(0, int(total - used)))
        return out

    def _usage(self) -> dict[str, tuple[float, float]]:
        """{resource: (used, total)} from the dashboard's autoscaler report. Ray's autoscaler v2 (what ``ray up``
        starts from Ray 2.60) reports no JSON there (``clusterStatus: null``): then the totals of the nodes alive
        (the state API, the same under both), none counted as used: ``capacity``'s callers subtract the workers
        the database knows are running."""
        response = httpx.get(f"{self.address}/api/cluster_status", timeout=5)
        response.raise_for_status()
        data = response.json().get("data", {})
        report = (data.get("clusterStatus") or {}).get("loadMetricsReport")
        if report is None:
            return self._alive_totals()
        usage = report.get("usage") or {}
        return {name: (float(pair[0]), float(pair[1])) for name, pair in usage.items()
                if isinstance(pair, list | tuple) and len(pair) == 2}

    def _alive_totals(self) -> dict[str, tuple[float, float]]:
        response = httpx.get(f"{self.address}/api/v0/nodes", params={"detail": 1, "limit": 10_000}, timeout=5)
        response.raise_for_status()
        nodes = ((response.json().get("data") or {}).get("result") or {}).get("result") or []
        totals: dict[str, float] = {}
        for node in nodes:
            if node.get("state") == "ALIVE":
                for name, amount in (node.get("resources_total") or {}).items():
                    totals[name] = totals.get(name, 0.0) + float(amount)
        return {name: (0.0, total) for name, total in totals.items()}

    # --- lifecycle -------------------------------------------------------------------------------

    def launch(self, spec: base.LaunchSpec) -> str:
        # Unique per submission: a job that expired in Ray's queue is submitted again under a new id.
        submission_id = f"lanner-run-{spec.run_id}-attempt-{spec.attempt}-{secrets.token_hex(3)}"
        gpus = self.num_gpus * spec.gpu_count if spec.gpu_type != "cpu" else 0
        try:
            return str(self.client.submit_job(
                entrypoint=shlex.join(spec.command), submission_id=submission_id,
                runtime_env={"env_vars": spec.env},
                entrypoint_resources={resource_for(spec.gpu_type): spec.gpu_count},
                entrypoint_num_gpus=gpus or None, entrypoint_num_cpus=1,
                metadata={"lanner_run": str(spec.run_id), "attempt": str(spec.attempt)},
            ))
        except Exception as exc:
            if "already exists" in str(exc):  # a retried launch: the job is there already
                return submission_id
            if _transient(exc):
                raise base.LaunchDeferred(str(exc)) from exc
            raise

    def status(self, external_id: str) -> base.JobStatus:
        info = self.client.get_job_info(external_id)
        state = str(getattr(info.status, "value", info.status)).upper()
        message = str(info.message or "")
        code = getattr(info, "driver_exit_code", None)
        if state == "PENDING":
            return base.JobStatus(base.JobState.QUEUED, None, message)
        if state == "RUNNING":
            return base.JobStatus(base.JobState.RUNNING, None, message)
        if state == "SUCCEEDED":
            return base.JobStatus(base.JobState.SUCCEEDED, 0, message)
        if state == "STOPPED":
            return base.JobStatus(base.JobState.STOPPED, code, message or "stopped")
        # FAILED: the trainer's own non-zero exit (1..127) fails the run. A signal (the shell reports 128 + N,
        # e.g. 137 for SIGKILL), a dead node or job supervisor, or no exit code at all was not the run's doing:
        # relaunch. Only the first line is Ray's own; the rest is the job's log, which may say anything.
        first_line = message.splitlines()[0] if message else ""
        if str(getattr(info, "error_type", "") or "") == "JOB_SUPERVISOR_ACTOR_START_TIMEOUT":
            # Nothing offered its resource within RAY_JOB_START_TIMEOUT_SECONDS: it never ran.
            return base.JobStatus(base.JobState.EXPIRED, None, first_line)
        if code is not None and 0 < code < 128 and not _lost_words(first_line):
            return base.JobStatus(base.JobState.FAILED, code, first_line)
        return base.JobStatus(base.JobState.LOST, code, first_line or "Ray job lost")

    def stop(self, external_id: str) -> None:
        try:
            self.client.stop_job(external_id)  # Ray sends SIGTERM, then SIGKILL to the process group
        except Exception as exc:
            log.warning("could not stop Ray job %s: %s", external_id, exc)

    def worker_env(self, env: dict[str, str], *, run_id: int | str) -> dict[str, str]:
        """The worker runs on another node: this server's home is not there, so its files go under
        ``ray_worker_dir`` on that node (and HOME stays the node's own)."""
        worker_dir = f"{self.worker_dir.rstrip('/')}/{run_id}"
        env = {key: value for key, value in env.items() if key != "HOME"}
        return {**env, "YOLO_CONFIG_DIR": f"{worker_dir}/config", "LANNER_WORKER_DIR": worker_dir}

    def log_tail(self, external_id: str, lines: int = 20) -> str:
        try:
            text = str(self.client.get_job_logs(external_id))
        except Exception:
            return ""
        return "\n".join([line for line in text.replace("\r", "\n").splitlines() if line.strip()][-lines:])


def _lost_words(message: str) -> bool:
    lowered = message.lower()
    return any(hint in lowered for hint in ("node", "died", "signal", "supervisor actor", "unexpectedly"))


# What Ray's dashboard answers while its job agent starts or is busy: nothing was submitted, try again later.
_TRANSIENT_MESSAGES = ("try again later", "no available agent", "failed to connect", "connection refused")


def _transient(exc: Exception) -> bool:
    return isinstance(exc, ConnectionError | TimeoutError) or any(
        text in str(exc).lower() for text in _TRANSIENT_MESSAGES)
