"""Each GPU pool (``LANNER_POOLS``) as the operator sees it: its declaration, the nodes up now, the runs on it,
how long a node takes to come, and per UTC day of the last 30 what its nodes cost and what runs paid.

- **node-hours**: ``pool_usage`` (sampled by the supervisor, ``training/pool_usage.py``);
- **cost** (USD): node-hours times the pool's ``cost_per_node_hour``, at today's declared price;
- **credits** (USD): the ledger's ``revenue`` from transactions naming the pool's GPU type (training charges
  minus refunds, ``billing.history.revenue_per_day``), whoever paid; a pool is the only pool of its type, and
  a node of that type outside the pool (a fixed one) counts as the pool's in both;
- **margin** (USD): credits minus cost.

Credits per node-hour is the catalogue's price per GPU-hour times the GPUs of one node: what a full node earns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.billing import history
from lanner.db import utcnow
from lanner.errors import Conflict
from lanner.gpus.catalogue import Catalogue, UnknownGpuType
from lanner.gpus.pools import SETTING, Pool, Pools, PoolsError
from lanner.training.executors import Executor
from lanner.training.models import PoolUsage, Run
from lanner.training.pool_usage import nodes_up
from lanner.training.provisioning import typical_start_seconds
from lanner.training.state import RunStatus

DAYS = 30
MICROS = 1_000_000
RUN_STATES = {RunStatus.PROVISIONING: "provisioning", RunStatus.STARTING: "running", RunStatus.RUNNING: "running",
              RunStatus.PENDING: "queued", RunStatus.LOST: "queued"}  # lost: waiting to be launched again


@dataclass(frozen=True)
class PoolDay:
    day: date
    node_seconds: float
    cost_micros: int
    credits_micros: int

    @property
    def margin_micros(self) -> int:
        return self.credits_micros - self.cost_micros

    def as_json(self) -> dict[str, Any]:
        return {"day": self.day.isoformat(), "nodeHours": round(self.node_seconds / 3600, 4),
                "costDollars": dollars(self.cost_micros), "creditsDollars": dollars(self.credits_micros),
                "marginDollars": dollars(self.margin_micros)}


@dataclass(frozen=True)
class PoolView:
    pool: Pool
    gpu_name: str
    credits_per_node_hour: float | None  # None: the catalogue has no such type
    devices_up: int
    devices_free: int
    nodes_up: int
    runs: dict[str, int]  # provisioning, running, queued
    start_seconds: float
    measured_starts: int  # 0: the declared typical_start_minutes
    days: list[PoolDay]

    @property
    def total(self) -> PoolDay:
        return add_days(self.days[-1].day if self.days else utcnow().date(), self.days)

    def as_json(self) -> dict[str, Any]:
        pool = self.pool
        total = self.total
        return {
            "name": pool.name, "gpuType": pool.gpu, "gpuName": self.gpu_name, "gpusPerNode": pool.gpus_per_node,
            "vcpus": pool.vcpus, "ramGib": pool.ram_gib, "maxNodes": pool.max_nodes, "spot": pool.spot,
            "costPerNodeHour": pool.cost_per_node_hour, "creditsPerNodeHour": self.credits_per_node_hour,
            "startTimeoutMinutes": pool.start_timeout_minutes, "typicalStartMinutes": pool.typical_start_minutes,
            "idleTimeoutMinutes": pool.idle_timeout_minutes,
            "nodesUp": self.nodes_up, "devicesUp": self.devices_up, "devicesFree": self.devices_free,
            "runs": dict(self.runs),
            "typicalStart": {"seconds": round(self.start_seconds, 1), "measured": self.measured_starts},
            "days": [day.as_json() for day in self.days],
            "lastDays": {k: v for k, v in total.as_json().items() if k != "day"},
        }


def pools_of(executor: Executor) -> Pools:
    """The executor's pools, read again as the supervisor reads them; 409 naming the mistake when the operator's
    latest edit of the file does not parse (the supervisor cannot use it either)."""
    try:
        return executor.pools
    except PoolsError as exc:
        raise Conflict(str(exc), code="pools_invalid") from exc


def not_configured(setting: str | None, executor_setting: str) -> str:
    """Why there are no pools, and how to declare them."""
    if setting and executor_setting != "ray":
        return (f"{SETTING} is set, but pools are node types of Ray's autoscaler: they take effect with "
                f"LANNER_EXECUTOR=ray (this server runs '{executor_setting}'). See docs/deploy-gpus.md.")
    return (f"No GPU pools are configured: set {SETTING} to a pools file (docs/deploy-gpus.md) with "
            "LANNER_EXECUTOR=ray, and check it with `lanner pools check`.")


def dollars(micros: int) -> float:
    return round(micros / MICROS, 6)


def cost_micros(pool: Pool, node_seconds: float) -> int:
    return round(node_seconds / 3600 * pool.cost_per_node_hour * MICROS)


def add_days(day: date, days: list[PoolDay]) -> PoolDay:
    """The sum of ``days`` (of one pool, or of several pools' same day), dated ``day``."""
    return PoolDay(day, sum(d.node_seconds for d in days), sum(d.cost_micros for d in days),
                   sum(d.credits_micros for d in days))


def per_day_totals(views: list[PoolView]) -> list[PoolDay]:
    """Every pool's days added up, day by day (the chart's figures)."""
    if not views:
        return []
    return [add_days(day.day, [view.days[i] for view in views]) for i, day in enumerate(views[0].days)]


def overview(session: Session, *, pools: Pools, capacity: Mapping[str, Any], executor_name: str,
             catalogue: Catalogue, days: int = DAYS, now: datetime | None = None) -> list[PoolView]:
    """Each declared pool, in the file's order, with its last ``days`` UTC days (oldest first, today last)."""
    if not len(pools):
        return []
    now = now or utcnow()
    gpus = [pool.gpu for pool in pools]
    credits = history.revenue_per_day(session, gpu_types=gpus, days=days, now=now)
    usage = _usage(session, [pool.name for pool in pools], min(credits[gpus[0]]))
    runs = _runs(session, gpus, executor_name)
    views = []
    for pool in pools:
        room = capacity.get(pool.gpu)
        start, measured = typical_start_seconds(session, pool)
        pool_days = []
        for day, paid in sorted(credits[pool.gpu].items()):
            seconds = usage.get((pool.name, day), 0.0)
            pool_days.append(PoolDay(day, seconds, cost_micros(pool, seconds), paid))
        gpu_name, price = _catalogue(catalogue, pool)
        views.append(PoolView(pool, gpu_name, price, room.total if room else 0, room.free if room else 0,
                              nodes_up(pool, capacity), runs.get(pool.gpu, _no_runs()), start, measured, pool_days))
    return views


def _catalogue(catalogue: Catalogue, pool: Pool) -> tuple[str, float | None]:
    try:
        gpu = catalogue.get(pool.gpu)
    except UnknownGpuType:  # `lanner pools check` says so; the page still shows the pool's cost
        return pool.gpu, None
    return gpu.display_name, round(gpu.price_per_hour * pool.gpus_per_node, 6)


def _usage(session: Session, names: list[str], first: date) -> dict[tuple[str, date], float]:
    rows = session.execute(select(PoolUsage.pool, PoolUsage.day, PoolUsage.node_seconds).where(
        PoolUsage.pool.in_(names), PoolUsage.day >= first.isoformat()))
    return {(pool, date.fromisoformat(day)): float(seconds or 0.0) for pool, day, seconds in rows}


def _no_runs() -> dict[str, int]:
    return {"provisioning": 0, "running": 0, "queued": 0}


def _runs(session: Session, gpus: list[str], executor_name: str) -> dict[str, dict[str, int]]:
    """Runs per GPU type placed with ``executor_name`` (``Run.executor``: the ``LANNER_EXECUTOR`` they were
    started under) that are waiting for a node, running, or queued (not launched yet, or held in Ray's queue
    while a device of their type is free)."""
    out: dict[str, dict[str, int]] = {}
    for gpu, status, count in session.execute(
            select(Run.gpu_type, Run.status, func.count()).where(
                Run.executor == executor_name, Run.gpu_type.in_(gpus),
                Run.status.in_([s.value for s in RUN_STATES])).group_by(Run.gpu_type, Run.status)):
        counts = out.setdefault(gpu, _no_runs())
        counts[RUN_STATES[RunStatus(status)]] += int(count)
    return out


def all_time(session: Session, pools: Pools) -> dict[str, tuple[float, int]]:
    """Per pool: (node-seconds ever sampled, credits ever paid for runs on its GPU type, in micro-dollars)."""
    names = [pool.name for pool in pools]
    seconds = dict(session.execute(select(PoolUsage.pool, func.coalesce(func.sum(PoolUsage.node_seconds), 0.0))
                                   .where(PoolUsage.pool.in_(names)).group_by(PoolUsage.pool)).all())
    paid = history.revenue_total(session, gpu_types=[pool.gpu for pool in pools])
    return {pool.name: (float(seconds.get(pool.name, 0.0)), paid.get(pool.gpu, 0)) for pool in pools}

