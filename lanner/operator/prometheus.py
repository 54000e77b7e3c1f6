"""The pools' figures in Prometheus text (``GET /api/operator/metrics``), rendered by ``prometheus_client`` as
``deployments/metrics.py`` renders the endpoints'.

Gauges are now: nodes up, the most nodes, runs by state, the typical start. Counters are since the pool was
first sampled: node-hours, their cost at today's declared price, and the credits runs on the pool's GPU type
paid (charges minus refunds, so the counter can step down after a refund, as a ledger does). The 30-day view
per day is ``GET /api/operator/pools``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from lanner.operator.pools import MICROS, PoolView, cost_micros


class _Collector:
    def __init__(self, views: list[PoolView], totals: dict[str, tuple[float, int]]) -> None:
        self.views, self.totals = views, totals

    def collect(self) -> Iterable[Any]:
        up = GaugeMetricFamily("lanner_pool_nodes_up", "Nodes of the pool up now (devices of its GPU type over "
                               "the GPUs per node, rounded up)", labels=["pool", "gpu"])
        largest = GaugeMetricFamily("lanner_pool_max_nodes", "The most nodes the pool may have (max_nodes)",
                                    labels=["pool"])
        runs = GaugeMetricFamily("lanner_pool_runs", "Runs on the pool's GPU type now: waiting for a node "
                                 "(provisioning), running, or queued", labels=["pool", "state"])
        start = GaugeMetricFamily("lanner_pool_start_seconds", "Typical seconds for a node to take a run: the "
                                  "median of the latest measured waits, else the declared typical_start_minutes",
                                  labels=["pool"])
        hours = CounterMetricFamily("lanner_pool_node_hours", "Node-hours the pool had up (sampled each "
                                    "supervisor pass)", labels=["pool"])
        cost = CounterMetricFamily("lanner_pool_cost_dollars", "What the pool's node-hours cost the operator, USD "
                                   "(at today's cost_per_node_hour)", labels=["pool"])
        credits = CounterMetricFamily("lanner_pool_credits_dollars", "Credits charged for runs on the pool's GPU "
                                      "type, USD (charges minus refunds)", labels=["pool"])
        for view in self.views:
            pool = view.pool
            up.add_metric([pool.name, pool.gpu], float(view.nodes_up))
            largest.add_metric([pool.name], float(pool.max_nodes))
            for state, count in view.runs.items():
                runs.add_metric([pool.name, state], float(count))
            start.add_metric([pool.name], float(view.start_seconds))
            seconds, paid = self.totals.get(pool.name, (0.0, 0))
            hours.add_metric([pool.name], seconds / 3600)
            cost.add_metric([pool.name], cost_micros(pool, seconds) / MICROS)
            credits.add_metric([pool.name], paid / MICROS)
        yield from (up, largest, runs, start, hours, cost, credits)


def prometheus_text(views: list[PoolView], totals: dict[str, tuple[float, int]]) -> bytes:
    """``views`` from ``pools.overview``, ``totals`` from ``pools.all_time``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(views, totals))  # type: ignore[arg-type]
    return generate_latest(registry)
