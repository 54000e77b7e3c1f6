"""A real local Ray cluster whose autoscaler launches simulated worker nodes (Ray's fake multi-node provider:
each "node" is one more raylet on this machine), so tests can watch a pool scale from zero, go idle, and lose a
node the way a spot instance is lost.

The test declares its node types like a Ray cluster config's ``available_node_types``::

    from tests.ray_autoscaling import autoscaling_ray, node_types  # noqa: F401  (the fixture)

    @node_types({"h100": {"resources": {"CPU": 1, "lanner-gpu:h100-sxm": 1}, "max_workers": 1}},
                idle_timeout_minutes=0.2)
    def test_something(autoscaling_ray):
        JobSubmissionClient(autoscaling_ray.address).submit_job(...)

The fixture writes the whole autoscaler config itself (the ray wheel lacks the ``example.yaml`` that
``AutoscalingCluster`` reads, and its ``start``/``shutdown`` would ``ray stop --force`` every Ray on the machine),
starts ``ray start --head --autoscaling-config=...`` with a head that has a CPU and no ``lanner-gpu`` resources,
in a short temporary folder (Ray's socket paths are length-limited), and stops what it started by PID. It takes
the same machine-wide lock as ``tests/ray_cluster.py``: one Ray cluster on this machine at a time.

Autoscaler v1 by default: its report is JSON in the dashboard's ``/api/cluster_status``; v2 (``autoscaler_v2=True``)
reports only text there. tests/training/recorded/ray_autoscaling/README.md has the measurements.

A node type whose ``node_config`` has ``launch_error`` (e.g. ``{"launch_error": "InsufficientInstanceCapacity"}``)
never starts: the provider refuses each launch the way a cloud without capacity does (``NodeLaunchException``)."""

from __future__ import annotations

import copy
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ray_cluster import LOCK
from tests.servers import VENV_BIN, free_port

REPOSITORY = Path(__file__).resolve().parent.parent
# Ray's fake provider names the head and its simulated nodes deterministically: fff…f00000 is the head,
# fff…f00001, fff…f00002, … the worker nodes in launch order.
FAKE_HEAD_NODE_ID = "f" * 51 + "00000"
HEAD_NODE_TYPE = "ray.head.default"
FAKE_PROVIDER = "ray.autoscaler._private.fake_multi_node.node_provider.FakeMultiNodeProvider"
REFUSING_PROVIDER = "tests.ray_autoscaling.RefusingFakeProvider"  # FAKE_PROVIDER + node_config["launch_error"]
# Every process of a cluster inherits this variable (value: the cluster's temporary folder), job drivers too: the
# teardown finds them all by it, orphans included.
MARKER = "TESTS_RAY_CLUSTER_DIR"

DEFAULT_NODE_TYPES: dict[str, dict[str, Any]] = {
    "h100": {"resources": {"CPU": 1, "lanner-gpu:h100-sxm": 1}, "max_workers": 1},
}
# Each simulated node is a raylet with its own object store: keep it small (the provider reads it from the node
# type's resources; the autoscaler then counts it as a resource like any other).
NODE_OBJECT_STORE_BYTES = 100 * 1024 * 1024


def node_types(types: dict[str, dict[str, Any]], *, idle_timeout_minutes: float = 0.2, head_cpus: int = 1,
               autoscaler_v2: bool = False) -> pytest.MarkDecorator:
    """The node types (``available_node_types`` entries: ``resources``, ``max_workers``, optionally
    ``min_workers`` and ``node_config``) that the test's ``autoscaling_ray`` cluster may launch, given to the
    fixture as an indirect parameter."""
    spec = {"node_types": types, "idle_timeout_minutes": idle_timeout_minutes, "head_cpus": head_cpus,
            "autoscaler_v2": autoscaler_v2}
    return pytest.mark.parametrize("autoscaling_ray", [spec], indirect=True,
                                   ids=["-".join(types) + ("-v2" if autoscaler_v2 else "")])


@dataclass
class WorkerNode:
    node_id: str
    node_type: str | None  # the GCS's node_type_name (the fake provider sets it); None until the dashboard has it
    resources: dict[str, float]


@dataclass
class AutoscalingRay:
    address: str  # the dashboard, http://127.0.0.1:PORT (what Lanner takes as LANNER_RAY_ADDRESS)
    config_path: Path  # the autoscaler config the head runs with (JSON, which is YAML too)
    gcs_address: str
    temp: Path
    config: dict[str, Any]
    env: dict[str, str]

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(f"{self.address}{path}", params=params, timeout=30)
        response.raise_for_status()
        return response.json()

    def nodes(self) -> list[dict[str, Any]]:
        """Every node the GCS knows, alive and dead (the state API: resource names as Ray spells them)."""
        return self.get("/api/v0/nodes", detail=1, limit=1000)["data"]["result"]["result"]

    def worker_nodes(self) -> list[WorkerNode]:
        """The alive nodes other than the head, with their node type (from the dashboard's node summary,
        uncached) and total resources."""
        summary = self.get("/nodes", view="summary", nocache=1)["data"]["summary"]
        types = {n["raylet"]["nodeId"]: n["raylet"].get("nodeTypeName") for n in summary if n.get("raylet")}
        return [WorkerNode(node_id=node["node_id"], node_type=types.get(node["node_id"]) or None,
                           resources=node.get("resources_total") or {})
                for node in self.nodes() if node["state"] == "ALIVE" and not node["is_head_node"]]

    def cluster_status(self, formatted: bool = False) -> dict[str, Any]:
        return self.get("/api/cluster_status", **({"format": 1} if formatted else {}))

    def log_tail(self, name: str, lines: int = 40) -> str:
        """The end of one of the head's Ray logs (``monitor.log``, ``monitor.err``, ``gcs_server.out``, ...)."""
        try:
            text = (self.temp / "session_latest" / "logs" / name).read_text(errors="replace")
        except OSError as error:
            return f"({error})\n"
        return "\n".join(text.splitlines()[-lines:]) + "\n"

    def raylet_pid(self, node_id: str) -> int | None:
        for pid, argv in _processes():
            if argv and argv[0].endswith("/raylet") and f"--node_id={node_id}" in argv and pid in self.pids():
                return pid
        return None

    def kill_raylet(self, node_id: str, *, whole_node: bool = True) -> list[int]:
        """A spot preemption of simulated node ``node_id``: SIGKILL its raylet and (``whole_node``) every process
        under it (its agents, workers, job supervisors and the job drivers they started), as losing the machine
        would; returns the PIDs killed. The GCS marks the node dead when its health checks fail (~16 s here).
        With ``whole_node=False`` only the raylet dies: a job driver on that node then lives on as an orphan,
        which a real preemption never leaves behind."""
        pid = self.raylet_pid(node_id)
        if pid is None:
            raise AssertionError(f"no raylet process for node {node_id}")
        victims = [pid, *sorted(_descendants({pid}) - {pid})] if whole_node else [pid]
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return victims

    def pids(self) -> set[int]:
        return _cluster_pids(self.temp)


def _processes() -> Iterator[tuple[int, list[str]]]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            yield int(entry), [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def _descendants(roots: set[int]) -> set[int]:
    parents = _parents()
    found = set(roots)
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        found |= children
        grew = bool(children)
    return found


def _cluster_pids(temp: Path) -> set[int]:
    """The processes of the cluster in ``temp``: those that carry its marker in their environment (every Ray
    process it started, job drivers included) or name the folder on their command line, and their children."""
    marker = f"{MARKER}={temp}".encode()
    ours = set()
    for pid, argv in _processes():
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            environment = []
        if marker in environment or any(str(temp) in arg for arg in argv):
            ours.add(pid)
    ours.discard(os.getpid())
    return _descendants(ours)


def _stop(temp: Path, env: dict[str, str]) -> None:
    """SIGTERM what runs from ``temp``, SIGKILL what is left after a short grace (the GCS server and the
    autoscaler's monitor outlive a SIGTERM by more than 20 s here)."""
    for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        for pid in _cluster_pids(temp):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while _cluster_pids(temp) and time.time() < deadline:
            time.sleep(0.2)
        if not _cluster_pids(temp):
            return
    # Something of ours outlived SIGKILL: sweep as tests/ray_cluster.py does. We hold the machine-wide lock, so
    # no other test's cluster is running.
    subprocess.run([str(VENV_BIN / "ray"), "stop", "--force"], env=env, capture_output=True, timeout=120)


def cluster_config(spec: dict[str, Any], gcs_address: str) -> dict[str, Any]:
    """The complete autoscaler config (everything Ray's fake_multi_node/example.yaml would fill in) for the
    declared worker node types and a head with ``head_cpus`` CPUs and nothing else."""
    v2 = bool(spec.get("autoscaler_v2"))
    types: dict[str, dict[str, Any]] = {}
    for name, declared in spec["node_types"].items():
        node = copy.deepcopy(declared)
        node.setdefault("node_config", {})
        node.setdefault("min_workers", 0)
        node["resources"].setdefault("object_store_memory", NODE_OBJECT_STORE_BYTES)
        types[name] = node
    types[HEAD_NODE_TYPE] = {"resources": {"CPU": spec["head_cpus"]}, "node_config": {}, "max_workers": 0}
    provider: dict[str, Any] = {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                                "disable_launch_config_check": True, "gcs_address": gcs_address}
    refusing = any("launch_error" in node["node_config"] for node in types.values())
    if v2 or refusing:
        # v2 merges the config with the provider type's defaults file, which for "fake_multinode" is the missing
        # example.yaml; an "external" provider (the same class) merges with built-in minimal defaults instead.
        provider.update({"type": "external", "module": REFUSING_PROVIDER if refusing else FAKE_PROVIDER})
    if v2:
        provider.update({"launch_multiple": True, "head_node_id": FAKE_HEAD_NODE_ID})
    return {
        "cluster_name": "lanner-tests", "max_workers": sum(t.get("max_workers", 0) for t in types.values()),
        "provider": provider, "available_node_types": types, "head_node_type": HEAD_NODE_TYPE, "auth": {},
        "upscaling_speed": 1.0, "idle_timeout_minutes": spec["idle_timeout_minutes"], "docker": {},
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [], "worker_setup_commands": [],
        "head_start_ray_commands": [], "worker_start_ray_commands": [], "file_mounts": {},
        "cluster_synced_files": [], "file_mounts_sync_continuously": False, "rsync_exclude": [],
        "rsync_filter": [],
    }


def __getattr__(name: str) -> Any:
    """``RefusingFakeProvider``, built on first use (in the autoscaler's process) so that importing this module
    does not import ray."""
    if name != "RefusingFakeProvider":
        raise AttributeError(name)
    from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider
    from ray.autoscaler.node_launch_exception import NodeLaunchException

    class RefusingFakeProvider(FakeMultiNodeProvider):
        """Ray's fake provider, except that it refuses to launch a node type whose ``node_config`` names a
        ``launch_error``, as a cloud provider does (AWS raises this for InsufficientInstanceCapacity)."""

        def create_node_with_resources_and_labels(self, node_config, tags, count, resources, labels):
            if node_config.get("launch_error"):
                raise NodeLaunchException(node_config["launch_error"],
                                          f"simulated: no capacity for {count} node(s)", None)
            return super().create_node_with_resources_and_labels(node_config, tags, count, resources, labels)

    globals()[name] = RefusingFakeProvider
    return RefusingFakeProvider


def _autoscaler_reports(address: str) -> bool:
    """The dashboard answers and the autoscaler has made its first report (it runs, and read its config): the
    dashboard formats one only then (v1: from the report the monitor stores in the GCS; v2: from the GCS's
    autoscaling state)."""
    try:
        answer = httpx.get(f"{address}/api/cluster_status", params={"format": 1}, timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    return "Autoscaler status" in str((answer.get("data") or {}).get("clusterStatus"))


@pytest.fixture
def autoscaling_ray(request: pytest.FixtureRequest) -> Iterator[AutoscalingRay]:
    """A Ray head with an autoscaler over simulated nodes; declare the node types with ``@node_types(...)``
    (``DEFAULT_NODE_TYPES`` otherwise). One Ray cluster at a time on this machine (``tests/ray_cluster.py``'s
    lock)."""
    spec = {"node_types": DEFAULT_NODE_TYPES, "idle_timeout_minutes": 0.2, "head_cpus": 1, "autoscaler_v2": False,
            **(getattr(request, "param", None) or {})}
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from start_autoscaling_ray(spec)


def start_autoscaling_ray(spec: dict[str, Any]) -> Iterator[AutoscalingRay]:
    """The cluster as a generator that yields once (the fixture's body; ``record.py`` uses it too). The caller
    holds the lock."""
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    gcs_port, dashboard = free_port(), free_port()
    # Simulated nodes dial the GCS here (without it, port 6379); the GCS listens on every address.
    gcs_address = f"127.0.0.1:{gcs_port}"
    config = cluster_config(spec, gcs_address)
    config_path = temp / "autoscaler.json"
    config_path.write_text(json.dumps(config, indent=2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LANNER_", "RAY_"))}
    env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1",
                MARKER: str(temp),
                # the autoscaler imports RefusingFakeProvider from this repository
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH")]))})
    if spec.get("autoscaler_v2"):
        env.update({"RAY_enable_autoscaler_v2": "1", "RAY_CLOUD_INSTANCE_ID": FAKE_HEAD_NODE_ID,
                    "RAY_OVERRIDE_NODE_ID_FOR_TESTING": FAKE_HEAD_NODE_ID})
    command = [str(VENV_BIN / "ray"), "start", "--head", f"--port={gcs_port}", f"--num-cpus={spec['head_cpus']}",
               "--object-store-memory=100000000", f"--dashboard-port={dashboard}", "--dashboard-host=127.0.0.1",
               "--include-dashboard=true", f"--ray-client-server-port={free_port()}", f"--temp-dir={temp}",
               f"--autoscaling-config={config_path}", "--disable-usage-stats"]
    cluster = AutoscalingRay(address=f"http://127.0.0.1:{dashboard}", config_path=config_path,
                             gcs_address=gcs_address, temp=temp, config=config, env=env)
    try:
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=180)
        deadline = time.time() + 120
        while not _autoscaler_reports(cluster.address):
            if time.time() > deadline:
                raise AssertionError("timed out waiting for the Ray head's autoscaler to report; monitor log:\n"
                                     + cluster.log_tail("monitor.err") + cluster.log_tail("monitor.log"))
            time.sleep(0.5)
        yield cluster
    finally:
        _stop(temp, env)
        shutil.rmtree(temp, ignore_errors=True)
