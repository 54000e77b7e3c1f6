"""Where a deployment's model is served, behind one interface the supervisor drives (launch, observe, stop):

- ``LocalBackend``: a serving process on this machine (``python -m lanner.deployments.server``) launched
  through the training ``LocalExecutor`` (its own session, recognised again after a server restart by pid and
  start time), listening on 127.0.0.1 on a port of ``LANNER_ENDPOINT_PORTS``. Up means: running and answering
  ``/health``. Its log is in ``LANNER_HOME/deployments/<id>/``.
- ``RayBackend``: a Ray Serve application per deployment (``deployments.ray_app``), deployed and deleted by a
  short Ray Job (the job's driver calls ``serve.run``/``serve.delete``; the server itself never joins the
  cluster), observed through the dashboard's Serve API, reached through Serve's HTTP proxy. Serve restarts a
  crashed replica by itself; Lanner redeploys an application that is gone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

from lanner.config import Settings
from lanner.deployments import serving
from lanner.training.executors.base import JobState, LaunchSpec
from lanner.training.executors.local import LocalExecutor
from lanner.training.executors.ray import RayExecutor

log = logging.getLogger("lanner.deployments")
HEALTH_TIMEOUT_SECONDS = 2.0


class Seen(StrEnum):
    STARTING = "starting"  # launched, not answering yet
    UP = "up"  # answering its health check
    DOWN = "down"  # gone or crashed: launch it again
    FAILED = "failed"  # cannot be served: launching again cannot help


@dataclass(frozen=True)
class Observation:
    seen: Seen
    message: str = ""
    instances: int = 0
    cpu_percent: float | None = None  # of the deployment's vCPUs
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Launch:
    """What a deployment's process needs: ``artefact`` is written by ``write_to`` (local) or fetched from
    ``artefact_url`` (Ray)."""

    deployment_id: str
    model_uri: str
    suffix: str
    digest: str
    cpu: int
    memory_gi: int
    min_instances: int
    max_instances: int
    write_to: Any
    artefact_url: str
    max_pixels: int
    max_batch: int
    window_ms: float
    cpu_batch_pixels: int


@dataclass(frozen=True)
class Launched:
    external_id: str
    url: str


def port_range(text: str) -> range:
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not match or not 1024 <= int(match.group(1)) <= int(match.group(2)) <= 65535:
        raise ValueError(f"LANNER_ENDPOINT_PORTS must be FIRST-LAST within 1024-65535, not {text!r}")
    return range(int(match.group(1)), int(match.group(2)) + 1)


def _free(port: int, host: str) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _base_env(folder: Path, spec: dict[str, Any], threads: int) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(folder),
           "YOLO_CONFIG_DIR": str(folder / "config"), "YOLO_OFFLINE": "1", "MPLBACKEND": "Agg",
           "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(threads), serving.SPEC_ENV: json.dumps(spec),
           # idle OpenMP threads sleep instead of spinning: a spinning pool took the CPU the server needed to
           # forward the next request (25 ms of a 130 ms PyTorch predict on 2 cores; docs/benchmarks.md)
           "OMP_WAIT_POLICY": "PASSIVE"}
    if os.environ.get("PYTHONPATH"):  # the server's own import path (a source checkout) is the process's too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def reason_from(log_tail: str, *, killed: bool = False) -> str | None:
    """The ``lanner-endpoint:`` line a serving process printed before it stopped, else its last error line.

    A process ``killed`` by a signal did not stop because of an error it logged earlier (a client's broken
    connection, say): then only the line the process printed on purpose counts.
    """
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(serving.ERROR_PREFIX):
            return line.removeprefix(serving.ERROR_PREFIX).strip()
    if killed:
        return None
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line)]
    return errors[-1][:300] if errors else None


class LocalBackend:
    name = "local"
    host = "127.0.0.1"

    def __init__(self, settings: Settings, executor: LocalExecutor | None = None) -> None:
        self.settings = settings
        self.root = settings.resolved_home / "deployments"
        self.ports = port_range(settings.endpoint_ports)
        self.executor = executor or LocalExecutor(self.root, max_cpu_runs=0)
        self._processes: dict[int, psutil.Process] = {}

    def launch(self, spec: Launch, *, used_ports: set[int]) -> Launched:
        port = next((p for p in self.ports if p not in used_ports and _free(p, self.host)), None)
        if port is None:
            raise RuntimeError(f"no free port left in LANNER_ENDPOINT_PORTS ({self.settings.endpoint_ports})")
        folder = self.root / spec.deployment_id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"model-{spec.digest[:16]}{spec.suffix}"
        if not path.exists():
            partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
            spec.write_to(partial)
            partial.replace(path)
        threads = max(1, min(spec.cpu, len(os.sched_getaffinity(0))))
        process_spec = {"deploymentId": spec.deployment_id, "model": spec.model_uri, "path": str(path),
                        "digest": spec.digest, "folder": str(folder), "host": self.host, "port": port,
                        "threads": threads, "maxBatch": spec.max_batch, "windowMs": spec.window_ms,
                        "maxPixels": spec.max_pixels, "cpuBatchPixels": spec.cpu_batch_pixels}
        python = self.settings.worker_python or sys.executable
        attempt = int(time.time() * 1000) % 2_000_000_000  # one log file per launch
        external_id = self.executor.launch(LaunchSpec(
            run_id=spec.deployment_id, attempt=attempt, gpu_type="cpu", workdir=str(folder),
            command=[python, "-m", "lanner.deployments.server"], env=_base_env(folder, process_spec, threads)))
        return Launched(external_id, f"http://{self.host}:{port}")

    def observe(self, external_id: str, url: str | None, *, cpu: int, deployment: str | None = None) -> Observation:
        status = self.executor.status(external_id)
        if status.state is JobState.RUNNING:
            try:
                answer = httpx.get(f"{url}/health", timeout=HEALTH_TIMEOUT_SECONDS)
                # Its own process answering, not another server's endpoint that took the port first (the port
                # was free when chosen; a process of another Lanner server on this machine may bind it first).
                healthy = answer.status_code == 200 and (deployment is None
                                                         or answer.json().get("deployment") == deployment)
            except (httpx.HTTPError, ValueError):
                healthy = False
            if not healthy:
                return Observation(Seen.STARTING)
            cpu_percent, memory = self._usage(self.pid(external_id))
            return Observation(Seen.UP, instances=1, memory_bytes=memory,
                               cpu_percent=None if cpu_percent is None else cpu_percent / max(1, cpu))
        killed = status.exit_code is not None and status.exit_code < 0
        reason = reason_from(self.executor.log_tail(external_id, lines=40), killed=killed)
        what = status.message or f"the serving process stopped ({status.state.value})"
        if status.exit_code == serving.EXIT_UNSERVABLE:
            return Observation(Seen.FAILED, reason or what)
        return Observation(Seen.DOWN, what.replace("worker", "the serving process") + (f": {reason}" if reason
                                                                                         else ""))

    def stop(self, external_id: str) -> None:
        self.executor.stop(external_id)  # SIGTERM to its process group, SIGKILL 10 s later

    def gone(self, external_id: str) -> bool:
        return self.executor.status(external_id).state is not JobState.RUNNING

    def forget(self, deployment_id: str) -> None:
        """A deleted deployment's folder (its model file and its processes' logs) goes with it."""
        shutil.rmtree(self.root / deployment_id, ignore_errors=True)

    @staticmethod
    def pid(external_id: str) -> int:
        return int(external_id.split(":", 1)[0])

    def _usage(self, pid: int) -> tuple[float | None, int | None]:
        """CPU percent (of one core, since the last look) and resident memory of the process tree."""
        try:
            root = self._processes.get(pid) or self._processes.setdefault(pid, psutil.Process(pid))
            tree = [root, *root.children(recursive=True)]
            return sum(p.cpu_percent(interval=None) for p in tree), sum(p.memory_info().rss for p in tree)
        except psutil.Error:
            self._processes.pop(pid, None)
            return None, None


class RayBackend:
    """Ray Serve applications named ``lanner-<deployment id>`` at ``/lanner/<deployment id>``."""

    name = "ray"
    DELETE_RETRY_SECONDS = 60.0

    def __init__(self, settings: Settings, executor: RayExecutor | None = None) -> None:
        if not settings.ray_address:
            raise ValueError("endpoints in 'ray' regions need LANNER_RAY_ADDRESS (the Ray dashboard)")
        self.settings = settings
        self.address = settings.ray_address.rstrip("/")
        host = urlsplit(self.address).hostname or "127.0.0.1"
        self.serve_url = (settings.ray_serve_url or f"http://{host}:8000").rstrip("/")
        self.executor = executor or RayExecutor(self.address, num_gpus=0)
        self._deleting: dict[str, float] = {}

    @staticmethod
    def app_name(deployment_id: str) -> str:
        return f"lanner-{deployment_id}"

    def _submit(self, args: list[str], spec: dict[str, Any], what: str) -> str:
        env = {serving.SPEC_ENV: json.dumps(spec), "PYTHONUNBUFFERED": "1", "YOLO_OFFLINE": "1"}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        python = self.settings.worker_python or sys.executable
        job = f"lanner-{what}-{spec['app']}-{secrets.token_hex(3)}"
        return str(self.executor.client.submit_job(
            entrypoint=" ".join([python, "-m", "lanner.deployments.ray_app", *args]), submission_id=job,
            runtime_env={"env_vars": env}, entrypoint_num_cpus=0, metadata={"lanner_deployment": spec["app"]}))

    def launch(self, spec: Launch, *, used_ports: set[int]) -> Launched:
        app = self.app_name(spec.deployment_id)
        serve = urlsplit(self.serve_url)
        job_spec = {"app": app, "route": f"/lanner/{spec.deployment_id}", "deploymentId": spec.deployment_id,
                    "model": spec.model_uri, "url": spec.artefact_url, "digest": spec.digest, "suffix": spec.suffix,
                    "cpu": spec.cpu, "memoryGi": spec.memory_gi, "minReplicas": spec.min_instances,
                    "maxReplicas": spec.max_instances, "maxPixels": spec.max_pixels, "maxBatch": spec.max_batch,
                    "windowMs": spec.window_ms, "cpuBatchPixels": spec.cpu_batch_pixels,
                    "serveHost": "0.0.0.0" if serve.hostname not in ("127.0.0.1", "localhost") else "127.0.0.1",
                    "servePort": serve.port or 8000,
                    "pythonPath": os.environ.get("PYTHONPATH", "")}
        self._deleting.pop(app, None)
        job = self._submit(["deploy"], job_spec, "deploy")
        return Launched(f"ray:{app}:{job}", f"{self.serve_url}/lanner/{spec.deployment_id}")

    def _applications(self) -> dict[str, Any]:
        response = httpx.get(f"{self.address}/api/serve/applications/", timeout=10)
        response.raise_for_status()
        return response.json().get("applications") or {}

    def observe(self, external_id: str, url: str | None, *, cpu: int, deployment: str | None = None) -> Observation:
        _, app, job = external_id.split(":", 2)
        found = self._applications().get(app)
        if found is None:
            status = self.executor.status(job)
            if status.state in (JobState.QUEUED, JobState.RUNNING):
                return Observation(Seen.STARTING, "Ray Serve is deploying it")
            reason = reason_from(self.executor.log_tail(job, lines=60))
            if status.state is JobState.SUCCEEDED:
                return Observation(Seen.DOWN, "its Ray Serve application is gone")
            return Observation(Seen.FAILED if reason else Seen.DOWN,
                               reason or f"the Ray deploy job ended ({status.message or status.state.value})")
        state, message = str(found.get("status")), str(found.get("message") or "")[:300]
        replicas = [r for d in (found.get("deployments") or {}).values() for r in d.get("replicas") or []]
        running = sum(1 for r in replicas if r.get("state") == "RUNNING")
        if state == "RUNNING":
            return Observation(Seen.UP, instances=running)
        if state == "DEPLOY_FAILED":
            return Observation(Seen.FAILED, message or "Ray Serve could not deploy it")
        if state in ("UNHEALTHY", "DELETING"):
            return Observation(Seen.STARTING, f"Ray Serve reports {state}: {message}".strip(": "), running)
        return Observation(Seen.STARTING, message, running)

    def stop(self, external_id: str) -> None:
        _, app, _ = external_id.split(":", 2)
        last = self._deleting.get(app)
        if last is not None and time.monotonic() - last < self.DELETE_RETRY_SECONDS:
            return
        self._deleting[app] = time.monotonic()
        _, _, job = external_id.split(":", 2)
        self.executor.stop(job)  # a deploy job still running would deploy it after the delete
        self._submit(["delete"], {"app": app}, "delete")

    def forget(self, deployment_id: str) -> None:
        """Nothing is kept on this server for a Ray deployment."""

    def gone(self, external_id: str) -> bool:
        _, app, job = external_id.split(":", 2)
        if app in self._applications():
            return False
        return self.executor.status(job).state not in (JobState.QUEUED, JobState.RUNNING)
