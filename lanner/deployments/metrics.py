"""``deployments.metrics`` in the SDK's three shapes, and the same figures for Prometheus (``GET /metrics``).

From the request log (``deployment_logs``, requests only): requests, errors (any answer of 400 or more: the
client sees a failure), latency percentiles (nearest rank) as seen by the server, per time bucket; from the
resource samples (``deployment_samples``, one a minute while it runs): CPU and memory utilization (percent of
the deployment's vCPUs and memory) and instances. ``errorRate`` is a fraction (0.05 is 5%).

- full: ``{deploymentId, region, timeRange, summary{totalRequests, errorCount, errorRate, avgLatencyMs,
  p50/p95/p99LatencyMs}, timeSeries{requests, errors, latencyP50, latencyP95, cpuUtilization,
  memoryUtilization, instanceCount}}`` over ``range`` (1h, 6h, 24h, 7d, 30d: 60, 72, 96, 168 and 120 buckets);
- ``view=overview``: requests, errors and p95 only;
- ``sparkline=true``: ``{requests24h (24 hourly counts), totalRequests, errorRate, avgLatencyMs}`` over 24 h.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from sqlalchemy import select
from sqlalchemy.orm import Session

from lanner.db import iso, utcnow
from lanner.deployments import state
from lanner.deployments.models import Deployment, DeploymentLog, DeploymentSample

RANGES = {"1h": (timedelta(hours=1), timedelta(minutes=1)), "6h": (timedelta(hours=6), timedelta(minutes=5)),
          "24h": (timedelta(hours=24), timedelta(minutes=15)), "7d": (timedelta(days=7), timedelta(hours=1)),
          "30d": (timedelta(days=30), timedelta(hours=6))}
PROMETHEUS_WINDOW = timedelta(minutes=5)  # the latency quantiles /metrics shows
QUANTILES = (0.5, 0.95, 0.99)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values`` (0 for none)."""
    if not values:
        return 0.0
    return float(values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))])


def _requests(session: Session, deployment_id: str, since: datetime) -> list[tuple[datetime, float, int]]:
    return [(at, latency or 0.0, status or 0) for at, latency, status in session.execute(
        select(DeploymentLog.created_at, DeploymentLog.latency_ms, DeploymentLog.status).where(
            DeploymentLog.deployment_id == deployment_id, DeploymentLog.created_at >= since,
            DeploymentLog.method.is_not(None)))]


def _summary(rows: Iterable[tuple[datetime, float, int]]) -> dict[str, float]:
    rows = list(rows)
    latencies = sorted(latency for _, latency, _ in rows)
    errors = sum(1 for _, _, status in rows if status >= 400)
    total = len(rows)
    return {"totalRequests": float(total), "errorCount": float(errors), "errorRate": errors / total if total else 0.0,
            "avgLatencyMs": sum(latencies) / total if total else 0.0, "p50LatencyMs": percentile(latencies, 0.5),
            "p95LatencyMs": percentile(latencies, 0.95), "p99LatencyMs": percentile(latencies, 0.99)}


def _buckets(start: datetime, step: timedelta, count: int) -> list[datetime]:
    return [start + step * i for i in range(count)]


def _index(at: datetime, start: datetime, step: timedelta, count: int) -> int:
    return min(count - 1, max(0, int((at - start) / step)))


def metrics(session: Session, deployment: Deployment, *, range_: str, sparkline: bool, overview: bool,
            region: str) -> dict[str, Any]:
    now = utcnow()
    if sparkline:
        start = now - timedelta(hours=24)
        rows = _requests(session, deployment.id, start)
        hourly = [0.0] * 24
        for at, _, _ in rows:
            hourly[_index(at, start, timedelta(hours=1), 24)] += 1
        summary = _summary(rows)
        return {"requests24h": hourly, "totalRequests": summary["totalRequests"], "errorRate": summary["errorRate"],
                "avgLatencyMs": summary["avgLatencyMs"]}
    span, step = RANGES[range_]
    count = int(span / step)
    start = now - span
    rows = _requests(session, deployment.id, start)
    per_bucket: list[list[tuple[float, int]]] = [[] for _ in range(count)]
    for at, latency, status in rows:
        per_bucket[_index(at, start, step, count)].append((latency, status))
    stamps = [iso(t) for t in _buckets(start, step, count)]

    def series(values: Iterable[float]) -> list[dict[str, Any]]:
        return [{"timestamp": t, "value": float(v)} for t, v in zip(stamps, values, strict=True)]

    sorted_latencies = [sorted(latency for latency, _ in bucket) for bucket in per_bucket]
    requests = series(len(bucket) for bucket in per_bucket)
    errors = series(sum(1 for _, status in bucket if status >= 400) for bucket in per_bucket)
    p95 = series(percentile(values, 0.95) for values in sorted_latencies)
    summary = _summary(rows)
    answer: dict[str, Any] = {"deploymentId": deployment.id, "region": region,
                              "timeRange": {"start": iso(start), "end": iso(now)}}
    if overview:
        answer["summary"] = {k: summary[k] for k in ("totalRequests", "errorRate", "p95LatencyMs")}
        answer["timeSeries"] = {"requests": requests, "errors": errors, "latencyP95": p95}
        return answer
    samples: list[list[DeploymentSample]] = [[] for _ in range(count)]
    for sample in session.scalars(select(DeploymentSample).where(
            DeploymentSample.deployment_id == deployment.id, DeploymentSample.created_at >= start)):
        samples[_index(sample.created_at, start, step, count)].append(sample)

    def mean(bucket: list[DeploymentSample], field: str) -> float:
        values = [getattr(s, field) for s in bucket if getattr(s, field) is not None]
        return sum(values) / len(values) if values else 0.0

    answer["summary"] = summary
    answer["timeSeries"] = {
        "requests": requests, "errors": errors, "latencyP50": series(percentile(v, 0.5) for v in sorted_latencies),
        "latencyP95": p95, "cpuUtilization": series(mean(b, "cpu_percent") for b in samples),
        "memoryUtilization": series(mean(b, "memory_percent") for b in samples),
        "instanceCount": series(mean(b, "instances") for b in samples)}
    return answer


class _Collector:
    """The caller's deployments as Prometheus metric families (``prometheus_client`` renders the text)."""

    def __init__(self, session: Session, deployments: list[Deployment], owner: str) -> None:
        self.session, self.deployments, self.owner = session, deployments, owner

    def collect(self) -> Iterable[Any]:
        labels = ["owner", "deployment", "model", "runtime"]
        requests = CounterMetricFamily("lanner_endpoint_requests", "Predict requests answered", labels=labels)
        errors = CounterMetricFamily("lanner_endpoint_errors", "Predict requests answered 400 or more", labels=labels)
        restarts = CounterMetricFamily("lanner_endpoint_restarts", "Restarts after the serving process crashed",
                                       labels=labels)
        billed = CounterMetricFamily("lanner_endpoint_billed_seconds", "Instance-seconds metered", labels=labels)
        ready = GaugeMetricFamily("lanner_endpoint_ready", "1 while the endpoint is ready", labels=labels)
        instances = GaugeMetricFamily("lanner_endpoint_instances", "Serving instances running", labels=labels)
        latency = GaugeMetricFamily("lanner_endpoint_latency_ms", "Request latency quantiles over the last 5 minutes "
                                    "(milliseconds, as the server saw them)", labels=[*labels, "quantile"])
        since = utcnow() - PROMETHEUS_WINDOW
        for deployment in self.deployments:
            values = [self.owner, deployment.slug, f"{deployment.project_slug}/{deployment.model_slug}",
                      deployment.runtime]
            requests.add_metric(values, float(deployment.request_count))
            errors.add_metric(values, float(deployment.error_count))
            restarts.add_metric(values, float(deployment.restarts))
            billed.add_metric(values, float(deployment.billed_seconds))
            ready.add_metric(values, 1.0 if deployment.status == state.READY else 0.0)
            instances.add_metric(values, float(deployment.instances))
            recent = sorted(latency for _, latency, _ in _requests(self.session, deployment.id, since))
            for q in QUANTILES:
                latency.add_metric([*values, str(q)], percentile(recent, q))
        yield from (requests, errors, restarts, billed, ready, instances, latency)


def prometheus_text(session: Session, deployments: list[Deployment], *, owner: str) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(session, deployments, owner))  # type: ignore[arg-type]
    return generate_latest(registry)
