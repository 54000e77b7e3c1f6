"""``lanner pools check``: whether the declared pools can work and pay, before a run depends on them.

Compared with the catalogue: each pool's GPU type exists and is offered, and a node-hour earns at least what
it costs (credits per GPU-hour × GPUs per node ≥ the operator's cost). Compared with the cluster config the
pools file names (a Ray autoscaler config's ``available_node_types``, or a KubeRay ``RayCluster``'s worker
groups): the node type exists, advertises ``lanner-gpu:<type>`` once per GPU (or the autoscaler would never
launch it for a run), and may grow to the pool's ``max_nodes``; its idle timeout is the pool's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanner.gpus.catalogue import Catalogue
from lanner.gpus.pools import RESOURCE_PREFIX, Pool, Pools, PoolsError, read_file


@dataclass(frozen=True)
class Problem:
    pool: str
    message: str
    error: bool = True  # False: a warning (the pools work, but not as the operator may think)

    def __str__(self) -> str:
        return f"{'error' if self.error else 'warning'}: {self.pool}: {self.message}"


@dataclass(frozen=True)
class NodeType:
    """What the cluster config says of one node type / worker group."""

    name: str
    resources: Mapping[str, float]
    max_workers: int | None


@dataclass(frozen=True)
class ClusterConfig:
    node_types: Mapping[str, NodeType]
    idle_timeout_minutes: float | None


def check_pools(pools: Pools, catalogue: Catalogue, cluster: ClusterConfig | None = None) -> list[Problem]:
    problems: list[Problem] = []
    for pool in pools:
        problems += _against_catalogue(pool, catalogue)
        if cluster is not None:
            problems += _against_cluster(pool, cluster)
    return problems


def _against_catalogue(pool: Pool, catalogue: Catalogue) -> list[Problem]:
    if pool.gpu not in catalogue:
        return [Problem(pool.name, f"unknown GPU type '{pool.gpu}' (`lanner gpus list` shows the catalogue)")]
    gpu = catalogue.get(pool.gpu)
    out = []
    if not gpu.offered:
        out.append(Problem(pool.name, f"{gpu.id} is not offered (LANNER_GPU_CATALOGUE): no run can ask for it"))
    earns = gpu.price_per_hour * pool.gpus_per_node
    if earns < pool.cost_per_node_hour:
        out.append(Problem(pool.name, f"price below cost: a node-hour costs ${pool.cost_per_node_hour:.2f} and earns "
                                      f"${earns:.2f} in credits ({pool.gpus_per_node} × ${gpu.price_per_hour:.2f} per "
                                      f"{gpu.id} hour); re-price {gpu.id} in LANNER_GPU_CATALOGUE"))
    return out


def _against_cluster(pool: Pool, cluster: ClusterConfig) -> list[Problem]:
    node = cluster.node_types.get(pool.name)
    if node is None:
        known = ", ".join(sorted(cluster.node_types)) or "none"
        return [Problem(pool.name, f"no node type or worker group '{pool.name}' in the cluster config (it has: "
                                   f"{known})")]
    out = []
    resource = f"{RESOURCE_PREFIX}{pool.gpu}"
    offered = node.resources.get(resource)
    if offered is None:
        out.append(Problem(pool.name, f"node type '{node.name}' does not advertise the resource '{resource}': the "
                                      f"autoscaler would never launch it for a {pool.gpu} run"))
    elif offered != pool.gpus_per_node:
        out.append(Problem(pool.name, f"node type '{node.name}' advertises {offered:g} × '{resource}' but the pool "
                                      f"says gpus_per_node: {pool.gpus_per_node}"))
    gpus = node.resources.get("GPU")
    if gpus is not None and gpus != pool.gpus_per_node:
        out.append(Problem(pool.name, f"node type '{node.name}' has {gpus:g} GPUs but the pool says gpus_per_node: "
                                      f"{pool.gpus_per_node}"))
    if node.max_workers is None:
        out.append(Problem(pool.name, f"node type '{node.name}' sets no max_workers (KubeRay: maxReplicas)"))
    elif node.max_workers != pool.max_nodes:
        out.append(Problem(pool.name, f"node type '{node.name}' may grow to {node.max_workers} nodes but the pool "
                                      f"says max_nodes: {pool.max_nodes}"))
    idle = cluster.idle_timeout_minutes
    if idle is not None and abs(idle - pool.idle_timeout_minutes) > 1e-9:
        out.append(Problem(pool.name, f"the cluster releases idle nodes after {idle:g} min but the pool says "
                                      f"idle_timeout_minutes: {pool.idle_timeout_minutes:g}", error=False))
    return out


def read_cluster_config(path: Path) -> ClusterConfig:
    """A Ray autoscaler config (``available_node_types``) or a KubeRay ``RayCluster`` manifest."""
    data = read_file(path, what=f"cluster config '{path.name}'")
    if not isinstance(data, Mapping):
        raise PoolsError(f"cluster config '{path}': expected a mapping")
    if data.get("kind") == "RayCluster":
        return _kuberay(data, path)
    types = data.get("available_node_types")
    if not isinstance(types, Mapping):
        raise PoolsError(f"cluster config '{path}': no available_node_types (nor kind: RayCluster)")
    node_types = {}
    for name, spec in types.items():
        spec = spec if isinstance(spec, Mapping) else {}
        node_types[str(name)] = NodeType(str(name), _numbers(spec.get("resources")), _int(spec.get("max_workers")))
    idle = data.get("idle_timeout_minutes")
    return ClusterConfig(node_types, float(idle) if isinstance(idle, int | float) else None)


def _kuberay(data: Mapping[str, Any], path: Path) -> ClusterConfig:
    spec = data.get("spec") if isinstance(data.get("spec"), Mapping) else {}
    node_types = {}
    for group in spec.get("workerGroupSpecs") or []:
        if not isinstance(group, Mapping) or not group.get("groupName"):
            continue
        params = group.get("rayStartParams") if isinstance(group.get("rayStartParams"), Mapping) else {}
        resources = _numbers(_json(params.get("resources"), path))
        if "num-gpus" in params:
            resources = {**resources, "GPU": float(str(params["num-gpus"]).strip('"'))}
        name = str(group["groupName"])
        node_types[name] = NodeType(name, resources, _int(group.get("maxReplicas")))
    options = spec.get("autoscalerOptions") if isinstance(spec.get("autoscalerOptions"), Mapping) else {}
    idle = options.get("idleTimeoutSeconds")
    return ClusterConfig(node_types, float(idle) / 60.0 if isinstance(idle, int | float) else None)


def _json(value: Any, path: Path) -> Any:
    """``rayStartParams.resources`` is a string holding JSON, often quoted once more for the command line."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1].replace('\\"', '"')
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise PoolsError(f"cluster config '{path}': rayStartParams.resources is not JSON: {value!r}") from None


def _numbers(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
