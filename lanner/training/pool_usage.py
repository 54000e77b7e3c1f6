"""Node-hours of each GPU pool (``LANNER_POOLS``), sampled from the cluster: what the operator pays for.

Once per supervisor pass (``record``), each pool's nodes up now (the devices of its GPU type Ray reports,
divided by the GPUs of one node, rounded up) are counted over the time since the previous sample and added to
``pool_usage``, one row per pool and UTC day. An interval across midnight is split between the two days.

The previous sample's time is the ``updated_at`` of the pool's newest row, not something a process keeps in
memory: every server process runs a supervisor (``lanner serve --workers N``, or two servers on one
database), and each would otherwise count the same nodes again. The newest row is locked while the sample
is written (PostgreSQL; SQLite's one writer serialises anyway), so a second process that samples at the same
moment sees the first one's time and adds nothing. An interval is capped (``MAX_INTERVAL_SECONDS``): a server
that was stopped does not know what ran meanwhile and must not invent node-hours for it. Samples closer than
``MIN_INTERVAL_SECONDS`` are skipped, so a pass every two seconds does not write every two seconds."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lanner.db import Database, utcnow
from lanner.gpus.pools import Pool, Pools
from lanner.training.models import PoolUsage

log = logging.getLogger("lanner.pools")
MAX_INTERVAL_SECONDS = 120.0  # longer gaps (a stopped server) count as this much, at the nodes seen now
MIN_INTERVAL_SECONDS = 15.0  # samples closer together add nothing yet (the next one covers the time)


def day_of(moment: datetime) -> str:
    """The UTC day ``moment`` falls on, as ``pool_usage.day`` holds it (``YYYY-MM-DD``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def nodes_up(pool: Pool, capacity: Mapping[str, Any]) -> int:
    """Nodes of ``pool`` up now: the devices of its GPU type (``Capacity.total``) over the GPUs per node, rounded
    up (a node whose GPUs are not all reported yet is still a node paid for)."""
    room = capacity.get(pool.gpu)
    total = int(room.total) if room is not None else 0
    return math.ceil(total / pool.gpus_per_node) if total > 0 else 0


def split_by_day(start: datetime, end: datetime) -> list[tuple[str, float]]:
    """(UTC day, seconds) of the interval ``start`` to ``end``, one entry per day it touches."""
    parts: list[tuple[str, float]] = []
    cursor = start.astimezone(UTC)
    end = end.astimezone(UTC)
    while cursor < end:
        midnight = datetime(cursor.year, cursor.month, cursor.day, tzinfo=UTC) + timedelta(days=1)
        stop = min(midnight, end)
        parts.append((day_of(cursor), (stop - cursor).total_seconds()))
        cursor = stop
    return parts


def sample(session: Session, pools: Pools, capacity: Mapping[str, Any], now: datetime) -> dict[str, float]:
    """Add each pool's node-seconds since its previous sample (at most ``MAX_INTERVAL_SECONDS`` of them, the
    latest) at the nodes up now; returns the node-seconds added per pool. A pool's first sample only records
    its time."""
    added: dict[str, float] = {}
    for pool in pools:
        newest = session.scalar(select(PoolUsage).where(PoolUsage.pool == pool.name)
                                .order_by(PoolUsage.updated_at.desc()).limit(1).with_for_update())
        if newest is None:
            _first(session, pool, now)
            added[pool.name] = 0.0
            continue
        elapsed = (now - newest.updated_at).total_seconds()
        if elapsed < MIN_INTERVAL_SECONDS:
            continue  # another pass (or another server process) sampled a moment ago
        start = now - timedelta(seconds=min(elapsed, MAX_INTERVAL_SECONDS))
        nodes = nodes_up(pool, capacity)
        for day, seconds in split_by_day(start, now):
            row = newest if newest.day == day else session.get(PoolUsage, (pool.name, day))
            if row is None:
                row = PoolUsage(pool=pool.name, day=day, node_seconds=0.0)
                session.add(row)
            row.node_seconds = (row.node_seconds or 0.0) + nodes * seconds
            row.updated_at = now
        newest.updated_at = now  # the previous day's row too: the pool's newest time is this sample's
        added[pool.name] = nodes * (now - start).total_seconds()
    session.flush()
    return added


def _first(session: Session, pool: Pool, now: datetime) -> None:
    """A pool's first row; two processes sampling its very first moment at once both try to insert it (there is
    no row to lock yet): the loser's savepoint is rolled back, and the winner's row stands."""
    try:
        with session.begin_nested():
            session.add(PoolUsage(pool=pool.name, day=day_of(now), node_seconds=0.0, updated_at=now))
    except IntegrityError:
        log.info("pool %s: its first usage sample was written by another process", pool.name)


def record(db: Database, pools: Pools, devices: Callable[[], Mapping[str, Any]]) -> None:
    """One supervisor pass's sample: nothing (and no cluster read) without pools; ``devices`` is the
    supervisor's read of the executor's devices per type, shared with the rest of the pass."""
    if not len(pools):
        return
    capacity = devices()
    with db.session() as session:
        sample(session, pools, capacity, utcnow())
