"""Runs waiting for a node their pool brings up (``LANNER_POOLS``, Ray's autoscaler): the supervisor's rules.

A launched run whose job Ray holds while no node of its type is free, but whose pool can grow, is
``provisioning``: not billed (its clock starts when the job starts), its hold kept. The wait ends when the job
starts (the time it took is recorded, and the median of the pool's recent waits is the start time the next
run is told), or when the pool's start timeout passes: then the run fails with the reason and no charge, or,
where its request allowed it, moves to the next GPU type the advisor ranked. Runs that cannot all be launched
at once (a pool at its maximum) are launched fairly: the owner with the fewest runs on the type goes first."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lanner.billing.metering import elapsed_seconds
from lanner.billing.service import dollars_to_micros
from lanner.gpus.pools import Pool, Pools
from lanner.projects.models import ModelRecord
from lanner.training.models import PoolLaunch, Run
from lanner.training.state import RunStatus, try_transition

RECENT_LAUNCHES = 20  # the start time told is the median of this many latest waits of the pool


def typical_start_seconds(session: Session, pool: Pool) -> tuple[float, int]:
    """(seconds, how many measured waits it is the median of): the pool's declared ``typical_start_minutes``
    until a node of it has been waited for."""
    waits = list(session.scalars(select(PoolLaunch.seconds).where(PoolLaunch.pool == pool.name,
                                                                  PoolLaunch.outcome == "up")
                                 .order_by(PoolLaunch.id.desc()).limit(RECENT_LAUNCHES)))
    if not waits:
        return pool.typical_start_minutes * 60.0, 0
    return float(statistics.median(waits)), len(waits)


def record_wait(session: Session, run: Run, pool: Pool, outcome: str, now: datetime) -> float:
    """The end of ``run``'s wait for a node (``up``, ``timeout`` or ``cancelled``); returns its seconds."""
    since = run.provisioning_since or now
    seconds = elapsed_seconds(since, now)
    session.add(PoolLaunch(pool=pool.name, gpu_type=pool.gpu, run_id=run.id, requested_at=since, ended_at=now,
                           outcome=outcome, seconds=seconds))
    run.provisioning_since = None
    return seconds


def timed_out(run: Run, pool: Pool, now: datetime) -> bool:
    return run.provisioning_since is not None and elapsed_seconds(run.provisioning_since, now) > \
        pool.start_timeout_seconds


def fair_order(session: Session, pending: Iterable[int], launched_by_owner: dict[str, int]) -> list[int]:
    """Pending runs in the order to launch them when not all fit: round-robin across owners (users and teams),
    oldest first within each, after the owners that have fewest runs launched already."""
    rows = session.execute(select(Run.id, ModelRecord.owner_id).join(ModelRecord, ModelRecord.id == Run.model_id)
                           .where(Run.id.in_(list(pending))).order_by(Run.id)).all()
    queues: dict[str, list[int]] = {}
    for run_id, owner in rows:
        queues.setdefault(owner, []).append(run_id)
    counts = dict(launched_by_owner)
    order: list[int] = []
    while queues:
        owner = min(queues, key=lambda o: (counts.get(o, 0), queues[o][0]))
        order.append(queues[owner].pop(0))
        counts[owner] = counts.get(owner, 0) + 1
        if not queues[owner]:
            del queues[owner]
    return order


def launched_by_owner(session: Session, gpu_type: str, executor_name: str) -> dict[str, int]:
    """Workers launched per owner on ``gpu_type`` that are not known to be gone."""
    rows = session.execute(select(ModelRecord.owner_id, Run.id).join(ModelRecord, ModelRecord.id == Run.model_id)
                           .where(Run.executor == executor_name, Run.gpu_type == gpu_type,
                                  Run.external_id.is_not(None), Run.worker_exited_at.is_(None))).all()
    counts: dict[str, int] = {}
    for owner, _ in rows:
        counts[owner] = counts.get(owner, 0) + 1
    return counts


def has_a_device(session: Session, run: Run, up: Any, executor_name: str) -> bool:
    """Whether devices of the run's type that are up now are its to take: its GPUs and those of the runs launched
    before it (and not gone) no more than the devices up. Ray's own count of free devices cannot say: it counts a
    job as using its device while the job is still starting (Ray's PENDING), so a run on a warm node would look
    as if it waited for a new one."""
    ahead = session.scalar(select(func.coalesce(func.sum(Run.gpu_count), 0)).where(
        Run.executor == executor_name, Run.gpu_type == run.gpu_type, Run.external_id.is_not(None),
        Run.worker_exited_at.is_(None), Run.id < run.id)) or 0
    return ahead + run.gpu_count <= (up.total if up is not None else 0)


def wait_for_node(session: Session, run: Run, pool: Pool, has_device: bool, now: datetime) -> bool:
    """A waiting run whose job Ray holds: ``provisioning`` unless a device up is its to take (``has_a_device``:
    a warm node takes it in a moment). True once its pool's start timeout has passed: the caller stops the job
    and fails the run (nothing was charged: the clock starts when the job does)."""
    if run.status == RunStatus.PENDING:
        if has_device:
            return False
        start, measured = typical_start_seconds(session, pool)
        run.provisioning_since = run.provisioning_since or now  # kept across a resubmission of an expired job
        run.launch = {**(run.launch or {}), "provisioning": {
            "pool": pool.name, "gpuType": pool.gpu, "typicalStartSeconds": round(start, 1),
            "measuredStarts": measured, "timeoutSeconds": pool.start_timeout_seconds}}
        try_transition(session, run, RunStatus.PROVISIONING,
                       reason=f"waiting for a node of pool {pool.name} (about {max(1, round(start / 60))} min)")
        return False
    if timed_out(run, pool, now):
        record_wait(session, run, pool, "timeout", now)
        return True
    return False


def fall_back(session: Session, run: Run, pool: Pool) -> str | None:
    """A run whose node did not come, moved to the next type of its ``fallback`` list (``allowFallback``): pending
    again, priced as that type, its attempt not counted (it never ran). The type, or None when none is left."""
    launch = dict(run.launch or {})
    remaining = list(launch.get("fallback") or [])
    if not remaining:
        return None
    nxt = remaining.pop(0)
    launch["fallback"] = remaining
    launch["triedGpuTypes"] = [*launch.get("triedGpuTypes", []), run.gpu_type]
    launch.pop("provisioning", None)
    if not try_transition(session, run, RunStatus.PENDING, reason=f"no node of pool {pool.name} came: "
                                                                  f"trying {nxt['gpuType']} (allowFallback)"):
        return None
    run.launch = launch
    run.gpu_type = nxt["gpuType"]
    run.price_micros_per_hour = dollars_to_micros(nxt["pricePerHour"])
    run.external_id = None
    run.attempt -= 1
    return str(nxt["gpuType"])


def pool_order(session: Session, pools: Pools, pending: list[int], capacity: dict[str, Any],
               executor_name: str) -> tuple[dict[str, int], list[int]]:
    """Runs each pool can still take (its most nodes' GPUs, or the devices up if more, less the workers launched
    on it), and ``pending`` with each pool type's runs in fair order."""
    types = dict(session.execute(select(Run.id, Run.gpu_type).where(Run.id.in_(pending))).all())
    busy = dict(session.execute(select(Run.gpu_type, func.sum(Run.gpu_count)).where(  # GPUs, not runs
        Run.executor == executor_name, Run.external_id.is_not(None),
        Run.worker_exited_at.is_(None)).group_by(Run.gpu_type)).all())
    room: dict[str, int] = {}
    order: list[int] = []
    for gpu_type in dict.fromkeys(types[run_id] for run_id in pending if run_id in types):
        runs = [run_id for run_id in pending if types.get(run_id) == gpu_type]
        pool = pools.for_gpu(gpu_type or "cpu")
        if pool is None:
            order += runs
            continue
        up = capacity.get(pool.gpu)
        room[pool.gpu] = max(pool.slots, up.total if up else 0) - int(busy.get(gpu_type, 0))
        order += fair_order(session, runs, launched_by_owner(session, pool.gpu, executor_name))
    return room, order
