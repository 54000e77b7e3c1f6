"""Record what a real Ray (the version in the venv) answers over the dashboard's HTTP API while its autoscaler
scales a pool of simulated nodes: the fakes that Lanner's tests use are copied from these files, never typed by
hand. Run from the repository root (about 2-3 minutes per autoscaler version, one Ray cluster at a time)::

    PYTHONPATH=$PWD .venv/bin/python tests/training/recorded/ray_autoscaling/record.py [v1] [v2]

For each autoscaler version it writes ``<version>/<moment>.<endpoint>.json`` (the whole answer of each endpoint)
and ``<version>/timings.json`` (seconds, measured on this run). The moments:

- ``pending``: no worker node, one Ray Job waits for ``lanner-gpu:h100-sxm`` (a launch pending);
- ``busy``: one h100 node up, running the job;
- ``idle``: the job succeeded, the node is up and idle (before ``idle_timeout_minutes``);
- ``gone``: the idle node was terminated by the autoscaler;
- ``failed-launch``: a job waits for a node type whose nodes cannot start (a too small object store);
- ``killed``: a job's node lost its raylet (a spot preemption) and Ray failed the job; ``job-killed.json`` is
  that job's ``JobSubmissionClient.get_job_info``.
"""

from __future__ import annotations

import fcntl
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.ray_autoscaling import AutoscalingRay, _processes, start_autoscaling_ray
from tests.ray_cluster import LOCK

HERE = Path(__file__).parent
H100 = "lanner-gpu:h100-sxm"
NODE_TYPES = {
    "h100": {"resources": {"CPU": 1, H100: 1}, "max_workers": 2},
    "rtx-4090": {"resources": {"CPU": 1, "lanner-gpu:rtx-4090": 1}, "max_workers": 1},
    # The provider refuses every launch of this type, as a cloud without capacity does (NodeLaunchException).
    "a100": {"resources": {"CPU": 1, "lanner-gpu:a100-sxm": 1}, "max_workers": 1,
             "node_config": {"launch_error": "InsufficientInstanceCapacity"}},
}
ENDPOINTS = {
    "cluster_status": ("/api/cluster_status", {}),
    "cluster_status-format1": ("/api/cluster_status", {"format": 1}),
    "nodes-summary": ("/nodes", {"view": "summary", "nocache": 1}),  # the plain URL is cached for 2 s
    "api-v0-nodes": ("/api/v0/nodes", {"detail": 1}),
}


def wait(check: Callable[[], Any], what: str, timeout: float = 180) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def save(out: Path, name: str, value: Any) -> None:
    # The node summaries (~25 kB a node, mostly process command lines) on one line; the rest readable.
    indent = None if name.endswith("nodes-summary") else 1
    (out / f"{name}.json").write_text(json.dumps(value, indent=indent, sort_keys=True) + "\n")


def snapshot(cluster: AutoscalingRay, out: Path, moment: str) -> None:
    for name, (path, params) in ENDPOINTS.items():
        answer = httpx.get(f"{cluster.address}{path}", params=params, timeout=30)
        save(out, f"{moment}.{name}", {"status_code": answer.status_code, "json": answer.json()})


def record(version: str) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    out = HERE / version
    out.mkdir(exist_ok=True)
    spec = {"node_types": NODE_TYPES, "idle_timeout_minutes": 0.2, "head_cpus": 1, "autoscaler_v2": version == "v2"}
    timings: dict[str, float] = {}
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.time()
        cluster_generator = start_autoscaling_ray(spec)
        cluster = next(cluster_generator)
        try:
            timings["head_up_s"] = time.time() - started
            save(out, "autoscaler-config", cluster.config)
            jobs = JobSubmissionClient(cluster.address)

            def status(job: str) -> JobStatus:
                return jobs.get_job_info(job).status

            def types_up() -> list[str]:
                return [node.node_id for node in cluster.worker_nodes() if H100 in node.resources]

            job = jobs.submit_job(entrypoint="python -c 'import time; time.sleep(6)'", entrypoint_num_cpus=1,
                                  entrypoint_resources={H100: 1})
            submitted = time.time()
            wait(lambda: "launching" in str(cluster.cluster_status(formatted=True)), "a pending launch", 60)
            assert not cluster.worker_nodes() and status(job) == JobStatus.PENDING
            snapshot(cluster, out, "pending")
            wait(types_up, "an h100 node")
            timings["submit_to_node_alive_s"] = time.time() - submitted
            wait(lambda: status(job) == JobStatus.RUNNING, "the job to run")
            timings["submit_to_job_running_s"] = time.time() - submitted
            # The autoscaler's report (every AUTOSCALER_UPDATE_INTERVAL_S=1 s here) lags the GCS by a tick.
            wait(lambda: "1.0/1.0 lanner-gpu:h100-sxm" in str(cluster.cluster_status(formatted=True)), "usage")
            snapshot(cluster, out, "busy")
            wait(lambda: status(job) == JobStatus.SUCCEEDED, "the job to succeed")
            succeeded = time.time()
            timings["submit_to_job_succeeded_s"] = succeeded - submitted
            wait(lambda: "0.0/1.0 lanner-gpu:h100-sxm" in str(cluster.cluster_status(formatted=True)), "idle")
            snapshot(cluster, out, "idle")
            wait(lambda: not types_up(), "the idle node to go")
            timings["job_succeeded_to_idle_node_dead_s"] = time.time() - succeeded
            snapshot(cluster, out, "gone")

            long_job = jobs.submit_job(entrypoint="python -c 'import time; time.sleep(600)'",
                                       entrypoint_num_cpus=1, entrypoint_resources={H100: 1})
            wait(lambda: status(long_job) == JobStatus.RUNNING, "the long job to run")
            victim = jobs.get_job_info(long_job).driver_node_id
            cluster.kill_raylet(victim)
            killed = time.time()

            def victim_dead() -> bool:
                return any(n["node_id"] == victim and n["state"] == "DEAD" for n in cluster.nodes())

            wait(victim_dead, "the GCS to mark the node dead", 120)
            timings["raylet_killed_to_node_dead_s"] = time.time() - killed
            wait(lambda: status(long_job) in (JobStatus.FAILED, JobStatus.SUCCEEDED), "the job to end", 120)
            timings["raylet_killed_to_job_failed_s"] = time.time() - killed
            snapshot(cluster, out, "killed")
            info = jobs.get_job_info(long_job)
            drivers = [pid for pid, argv in _processes() if "time.sleep(600)" in " ".join(argv)]
            save(out, "job-killed", {"status": str(info.status), "message": info.message,
                                     "error_type": info.error_type, "driver_exit_code": info.driver_exit_code,
                                     "driver_node_id": info.driver_node_id, "killed_node_id": victim,
                                     "driver_processes_left": len(drivers)})

            def autoscaler_let_go() -> bool:
                """v1: the node left the report's node-type mapping; v2: it is listed as a recent failure."""
                if version == "v1":
                    report = cluster.cluster_status()["data"]["clusterStatus"]["autoscalerReport"]
                    return victim not in report["nodeTypeMapping"]
                return victim in cluster.cluster_status(formatted=True)["data"]["clusterStatus"]

            wait(autoscaler_let_go, "the autoscaler to let the dead node go", 120)
            timings["raylet_killed_to_autoscaler_let_go_s"] = time.time() - killed
            # Nothing asks for an h100 any more: does the autoscaler replace the lost node anyway?
            watched = time.time()
            while time.time() - watched < 20:
                if types_up():
                    timings["raylet_killed_to_replacement_alive_s"] = time.time() - killed
                    break
                time.sleep(0.5)
            timings["replacement_watched_s"] = time.time() - watched
            snapshot(cluster, out, "after-kill")

            refused = jobs.submit_job(entrypoint="true", entrypoint_num_cpus=1,
                                     entrypoint_resources={"lanner-gpu:a100-sxm": 1})
            wait(lambda: "a100" in str(cluster.cluster_status(formatted=True)).split("Resources")[0],
                 "the refused launch to show", 60)
            time.sleep(8)  # the autoscaler tries (and fails) a few more times before the recording
            snapshot(cluster, out, "failed-launch")
            jobs.stop_job(refused)
        finally:
            save(out, "timings", {k: round(v, 1) for k, v in timings.items()})
            for _ in cluster_generator:
                pass


if __name__ == "__main__":
    for version in sys.argv[1:] or ["v1", "v2"]:
        record(version)
