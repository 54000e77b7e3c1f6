"""Node pools: the GPU types the operator's cluster can bring up on demand (``LANNER_POOLS``).

A pool is one node type of a Ray autoscaler config (or one KubeRay worker group) that advertises the custom
resource ``lanner-gpu:<type>``: Ray's autoscaler launches such a node when a run's job asks for that resource
and no node has it free, and releases it after its idle timeout. Lanner never launches machines itself; it
needs to know what the autoscaler can do so that it can say so before a run starts (on demand, about N
minutes), show a launched run as ``provisioning`` rather than running, give up on a node that never comes,
queue runs fairly when a pool is full, and compare what the nodes cost the operator with what runs paid.

The file (YAML or JSON)::

    cluster: ray-cluster.yaml        # optional: the autoscaler config / RayCluster these pools belong to
    pools:
      - name: h100                   # the node type (available_node_types key) or worker group name
        gpu: h100-sxm                # a catalogue GPU type
        gpus_per_node: 8
        vcpus: 192
        ram_gib: 2048
        max_nodes: 2
        spot: false
        cost_per_node_hour: 24.0     # USD the operator pays per node-hour
        start_timeout_minutes: 15
        typical_start_minutes: 5     # shown until launches of this pool have been measured
        idle_timeout_minutes: 5      # the autoscaler's; must equal the cluster config's

``lanner pools check`` (``pool_check.py``) compares it with the catalogue and the cluster config."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

SETTING = "LANNER_POOLS"
RESOURCE_PREFIX = "lanner-gpu:"  # the custom resource a node advertises once per GPU of a type; a run's job asks for it
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class PoolsError(ValueError):
    """The pools file cannot be used; the message names the file, the pool and the field."""


@dataclass(frozen=True)
class Pool:
    name: str
    gpu: str
    gpus_per_node: int = 1
    vcpus: int = 8
    ram_gib: float = 32.0
    max_nodes: int = 1
    spot: bool = False
    cost_per_node_hour: float = 0.0
    start_timeout_minutes: float = 15.0
    typical_start_minutes: float = 5.0
    idle_timeout_minutes: float = 5.0

    @property
    def slots(self) -> int:
        """Runs of one GPU each that the pool can hold at its largest."""
        return self.max_nodes * self.gpus_per_node

    @property
    def start_timeout_seconds(self) -> float:
        return self.start_timeout_minutes * 60.0


@dataclass(frozen=True)
class Pools:
    """The declared pools, at most one per GPU type (a run names a type, not a pool)."""

    pools: tuple[Pool, ...] = ()
    cluster: Path | None = None  # the cluster config the file names, resolved against the file's folder
    source: str = ""

    def __iter__(self) -> Iterator[Pool]:
        return iter(self.pools)

    def __len__(self) -> int:
        return len(self.pools)

    def for_gpu(self, gpu_type: str) -> Pool | None:
        return next((pool for pool in self.pools if pool.gpu == gpu_type), None)

    def named(self, name: str) -> Pool | None:
        return next((pool for pool in self.pools if pool.name == name), None)


NO_POOLS = Pools()
_KINDS = {"str": str, "int": int, "float": float, "bool": bool}
_TYPES: dict[str, type] = {f.name: _KINDS[str(f.type)] for f in fields(Pool)}


def parse_pools(data: Any, *, source: str = SETTING, folder: Path | None = None) -> Pools:
    """Pools from the file's parsed content; ``PoolsError`` naming what is wrong."""
    if not isinstance(data, Mapping) or not isinstance(data.get("pools"), list):
        raise PoolsError(f"{source}: expected a mapping with a 'pools' list")
    unknown = set(data) - {"cluster", "pools"}
    if unknown:
        raise PoolsError(f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (known: cluster, pools)")
    pools = tuple(_pool(item, index, source) for index, item in enumerate(data["pools"]))
    for attribute in ("name", "gpu"):
        seen: set[str] = set()
        for pool in pools:
            value = getattr(pool, attribute)
            if value in seen:
                what = "name" if attribute == "name" else "GPU type (a run names a type: one pool per type)"
                raise PoolsError(f"{source}: two pools have the {what} '{value}'")
            seen.add(value)
    cluster = data.get("cluster")
    if cluster is not None and not isinstance(cluster, str):
        raise PoolsError(f"{source}: cluster: expected a file path")
    path = None if cluster is None else (folder or Path.cwd()) / cluster
    return Pools(pools, path, source)


def _pool(item: Any, index: int, source: str) -> Pool:
    where = f"{source}: pools[{index}]"
    if not isinstance(item, Mapping):
        raise PoolsError(f"{where}: expected a mapping")
    unknown = set(item) - set(_TYPES)
    if unknown:
        raise PoolsError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    for required in ("name", "gpu", "max_nodes", "cost_per_node_hour"):
        if required not in item:
            raise PoolsError(f"{where}: '{required}' is required")
    values: dict[str, Any] = {}
    for key, raw in item.items():
        kind = _TYPES[key]
        if kind is bool:
            if not isinstance(raw, bool):
                raise PoolsError(f"{where}.{key}: expected true or false")
            values[key] = raw
        elif kind is str:
            if not isinstance(raw, str) or not _NAME.match(raw):
                raise PoolsError(f"{where}.{key}: expected a name of letters, digits, '.', '_' or '-'")
            values[key] = raw
        else:
            if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != raw or raw < 0:
                raise PoolsError(f"{where}.{key}: expected a number of 0 or more")
            if kind is int and raw != int(raw):
                raise PoolsError(f"{where}.{key}: expected a whole number")
            values[key] = kind(raw)
    pool = Pool(**values)
    name = f"{where} ({pool.name})"
    if not 1 <= pool.gpus_per_node <= 16:
        raise PoolsError(f"{name}.gpus_per_node: expected 1 to 16")
    if pool.max_nodes < 1:
        raise PoolsError(f"{name}.max_nodes: expected 1 or more (a pool that can have no node offers nothing)")
    if pool.start_timeout_minutes <= 0:
        raise PoolsError(f"{name}.start_timeout_minutes: expected more than 0")
    return pool


def read_file(path: Path, what: str = SETTING) -> Any:
    """A JSON or YAML file's content; ``PoolsError`` when it is missing or does not parse."""
    if not path.is_file():
        raise PoolsError(f"{what}: no such file '{path}'")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PoolsError(f"{what}: '{path}' is not valid JSON: {exc}") from None
    import yaml  # PyYAML comes with ultralytics

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PoolsError(f"{what}: '{path}' is not valid YAML: {exc}") from None


def load_pools(value: str | None) -> Pools:
    """The pools ``LANNER_POOLS`` names (none when unset). Cached per path and modification time, so an
    operator's edit is seen without a restart."""
    if not value or not value.strip():
        return NO_POOLS
    path = Path(value.strip()).expanduser()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = -1
    return _load(str(path), stamp)


@lru_cache(maxsize=8)
def _load(path: str, stamp: int) -> Pools:
    file = Path(path)
    return parse_pools(read_file(file), source=f"{SETTING} ({file.name})", folder=file.parent)
