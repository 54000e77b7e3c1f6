"""Node-hours per pool (``training/pool_usage.py``): samples count the nodes up over the time since the previous
sample, split at UTC midnight, capped after a gap, skipped when too close; the supervisor samples once per pass
only when there are pools."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from lanner.training import pool_usage
from lanner.training.executors import Capacity
from lanner.training.models import PoolUsage
from tests.training.test_pools import POOLS, PooledExecutor

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def usage(app: Any) -> dict[tuple[str, str], float]:
    with app.state.lanner.db.session() as session:
        return {(row.pool, row.day): row.node_seconds for row in session.scalars(select(PoolUsage))}


def sample(app: Any, at: datetime, devices: int) -> dict[str, float]:
    """A sample at ``at`` with ``devices`` H100s up (the pool has 2 per node)."""
    with app.state.lanner.db.session() as session:
        return pool_usage.sample(session, POOLS, {"h100-sxm": Capacity(total=devices, free=0)}, at)


def test_two_samples_60_s_apart_with_two_nodes_up_add_120_node_seconds(app: Any) -> None:
    assert sample(app, T0, 4) == {"h100": 0.0}  # the first one only records its time
    assert sample(app, T0 + timedelta(seconds=60), 4) == {"h100": 120.0}
    assert usage(app) == {("h100", "2026-12-05"): 120.0}


def test_an_interval_across_midnight_is_split_between_the_two_days(app: Any) -> None:
    before = datetime(2026, 12, 5, 23, 59, 30, tzinfo=UTC)
    sample(app, before, 2)
    assert sample(app, before + timedelta(seconds=90), 3) == {"h100": 180.0}  # 3 GPUs: 2 nodes, rounded up
    assert usage(app) == {("h100", "2026-12-05"): 60.0, ("h100", "2026-12-06"): 120.0}
    sample(app, before + timedelta(seconds=150), 2)  # the next interval counts from the new day's row
    assert usage(app) == {("h100", "2026-12-05"): 60.0, ("h100", "2026-12-06"): 180.0}


def test_a_gap_counts_at_most_two_minutes_and_close_samples_add_nothing_yet(app: Any) -> None:
    sample(app, T0, 2)
    assert sample(app, T0 + timedelta(hours=3), 2) == {"h100": pool_usage.MAX_INTERVAL_SECONDS}
    later = T0 + timedelta(hours=3)
    assert sample(app, later + timedelta(seconds=5), 2) == {}  # another process sampled a moment ago
    assert sample(app, later + timedelta(seconds=40), 2) == {"h100": 40.0}  # from the last written sample
    assert sample(app, later + timedelta(seconds=100), 0) == {"h100": 0.0}  # scaled to zero
    assert usage(app) == {("h100", "2026-12-05"): 160.0}


@pytest.mark.parametrize("devices, nodes", [(0, 0), (1, 1), (2, 1), (3, 2), (16, 8)])
def test_nodes_up_are_devices_over_gpus_per_node_rounded_up(devices: int, nodes: int) -> None:
    pool = POOLS.named("h100")
    assert pool_usage.nodes_up(pool, {"h100-sxm": Capacity(total=devices, free=0)}) == nodes
    assert pool_usage.nodes_up(pool, {}) == 0


def test_the_supervisor_samples_each_pass_when_there_are_pools(app: Any) -> None:
    executor = PooledExecutor(POOLS)
    supervisor = app.state.training.use_executor(executor)
    executor.nodes["h100-sxm"] = Capacity(total=2, free=2)
    supervisor.run_once()
    assert list(usage(app).values()) == [0.0]
    with app.state.lanner.db.session() as session:  # as if the previous pass had been a minute ago
        for row in session.scalars(select(PoolUsage)):
            row.updated_at -= timedelta(seconds=60)
    supervisor.run_once()
    assert 60.0 <= sum(usage(app).values()) < 70.0  # one node (2 GPUs) for the minute


def test_without_pools_the_supervisor_samples_nothing(app: Any, fake_executor: Any) -> None:
    app.state.training.supervisor.run_once()
    assert usage(app) == {}
