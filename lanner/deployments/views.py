"""What the model page shows of a model's deployments (``lanner.web``): each one's status and why, where and how
it runs, its last 24 hours (requests, p95, errors) and its latency over the last hour for a chart; and what the
create form offers (the regions by area, each named by its place: ``places``). Read with the caller's access,
from the same services and metrics the API answers with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.deployments import metrics, places, service, state
from lanner.deployments.schemas import CPUS, MEMORY_GI, service_url
from lanner.projects.models import ModelRecord

CHANGING = (state.CREATING, state.DEPLOYING, state.STOPPING)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def latency_chart(answer: dict[str, Any]) -> dict[str, list[Any]]:
    """uPlot columns of the last hour: x (epoch seconds), p50 and p95 (null where nothing was asked)."""
    series = answer["timeSeries"]
    counts = [point["value"] for point in series["requests"]]
    return {"x": [_epoch(point["timestamp"]) for point in series["requests"]],
            "p50": [p["value"] if n else None for p, n in zip(series["latencyP50"], counts, strict=True)],
            "p95": [p["value"] if n else None for p, n in zip(series["latencyP95"], counts, strict=True)]}


def section(session: Session, principal: Principal, record: ModelRecord, *, settings: Settings) -> dict[str, Any]:
    rows = []
    for d in service.for_model(session, principal, record):
        day = metrics.metrics(session, d, range_="24h", sparkline=False, overview=True, region=d.region)["summary"]
        hour = metrics.metrics(session, d, range_="1h", sparkline=False, overview=False, region=d.region)
        rows.append({"slug": d.slug, "name": d.name, "status": d.status, "message": d.status_message or "",
                     "region": d.region, "runtime": d.runtime, "cpu": d.cpu, "memory_gi": d.memory_gi,
                     "backend": d.backend, "requests": int(day["totalRequests"]), "p95": day["p95LatencyMs"],
                     "error_rate": day["errorRate"], "restarts": d.restarts, "ready": d.status == state.READY,
                     "startable": d.status in state.STARTABLE, "stoppable": d.status in state.RUNNING,
                     "url": service_url(settings.public_url, principal.username, d.slug),
                     "api": f"/api/deployments/{principal.username}/{d.slug}", "chart": latency_chart(hour)})
    regions = sorted(service.offered_regions(settings))
    return {"rows": rows, "changing": any(r["status"] in CHANGING for r in rows), "regions": places.grouped(regions),
            "default_region": "us-central1" if "us-central1" in regions else regions[0], "cpus": CPUS,
            "memories": MEMORY_GI, "default_name": f"{record.slug}-endpoint",
            "onnx": service.onnx_export(session, record) is not None}
