"""The operator's API (Lanner extensions, server admins only; 403 ``admin_required`` for anyone else): the GPU
pools with their cost and credits per day (``GET /api/operator/pools``), and the same figures for Prometheus
(``GET /api/operator/metrics``). HTTP only: the figures are ``operator/pools.py``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from lanner.accounts.dependencies import AdminPrincipal
from lanner.http.deps import Ctx, DbSession
from lanner.operator import pools as pool_service
from lanner.operator.prometheus import prometheus_text
from lanner.training.dependencies import CurrentCatalogue, Runtime

router = APIRouter(tags=["operator"])


@router.get("/api/operator/pools", summary="Lanner: GPU pools, their cost to the operator and the credits runs paid",
            description="Server admins only (403 `admin_required` for anyone else). Per pool of `LANNER_POOLS`: "
            "its declaration, nodes and devices up now, runs waiting for a node (`provisioning`), running and "
            "queued on its GPU type, the typical start (`seconds`, the median of `measured` waits; 0 measured: "
            "the declared `typicalStartMinutes`), and for each of the last 30 UTC days (oldest first) its "
            "node-hours, their cost to the operator (node-hours × `costPerNodeHour`, USD), the credits charged "
            "for runs on its GPU type (USD, charges minus refunds) and the margin (credits − cost, USD); "
            "`lastDays` sums them. `days` adds every pool up per day. Without pools, `pools` is empty and "
            "`note` says how to declare them.")
def operator_pools(principal: AdminPrincipal, session: DbSession, ctx: Ctx, runtime: Runtime,
                   catalogue: CurrentCatalogue) -> dict[str, Any]:
    executor = runtime.executor
    pools = pool_service.pools_of(executor)
    views = pool_service.overview(session, pools=pools, capacity=executor.capacity() if len(pools) else {},
                                  executor_name=ctx.settings.executor, catalogue=catalogue)
    return {"pools": [view.as_json() for view in views],
            "days": [day.as_json() for day in pool_service.per_day_totals(views)],
            "currency": "USD",
            "note": None if views else pool_service.not_configured(ctx.settings.pools, ctx.settings.executor)}


@router.get("/api/operator/metrics", summary="Lanner: GPU pools' metrics in Prometheus text format",
            description="Server admins only (403 `admin_required` for anyone else), with an admin's API key as a "
            "bearer token or a signed-in admin's session. Gauges `lanner_pool_nodes_up{pool,gpu}`, "
            "`lanner_pool_max_nodes{pool}`, `lanner_pool_runs{pool,state}` (provisioning, running, queued), "
            "`lanner_pool_start_seconds{pool}` (typical); counters since the pool was first sampled "
            "`lanner_pool_node_hours_total{pool}`, `lanner_pool_cost_dollars_total{pool}` and "
            "`lanner_pool_credits_dollars_total{pool}` (USD).", response_class=Response)
def operator_metrics(principal: AdminPrincipal, session: DbSession, ctx: Ctx, runtime: Runtime,
                     catalogue: CurrentCatalogue) -> Response:
    executor = runtime.executor
    pools = pool_service.pools_of(executor)
    views = pool_service.overview(session, pools=pools, capacity=executor.capacity() if len(pools) else {},
                                  executor_name=ctx.settings.executor, catalogue=catalogue,
                                  days=1)
    return Response(prometheus_text(views, pool_service.all_time(session, pools)), media_type=CONTENT_TYPE_LATEST)
