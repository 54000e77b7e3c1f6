"""The operator's GPU pools page (``/operator/pools``, server admins only: 403 for anyone else, as the API): each
pool of ``LANNER_POOLS`` now (its nodes, runs, typical start, what a node costs against what it earns) and
over the last 30 UTC days what its nodes cost the operator against the credits runs on it paid, as a chart
and as numbers. The figures are ``lanner.operator.pools``, the ones ``GET /api/operator/pools`` answers; the
GPUs page links here for admins."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from lanner.accounts.dependencies import require_admin
from lanner.http.deps import Ctx, DbSession
from lanner.operator import pools as pool_service
from lanner.operator.pools import PoolDay, PoolView
from lanner.training.dependencies import CurrentCatalogue, Runtime
from lanner.web.templating import PageUser, render

router = APIRouter(include_in_schema=False)


def start_text(view: PoolView) -> str:
    """``about 4 min (median of 12)``, or ``about 5 min (declared)`` before any node of the pool was waited for."""
    minutes = max(1, round(view.start_seconds / 60))
    source = f"median of {view.measured_starts}" if view.measured_starts else "declared"
    return f"about {minutes} min ({source})"


def node_hours(seconds: float) -> str:
    """``12.5 node-h``; ``0.02 node-h`` for a minute or so, never a zero that hides a node that was up."""
    hours = seconds / 3600
    return f"{hours:,.2f} node-h" if 0 < hours < 10 else f"{hours:,.1f} node-h"


def chart(days: list[PoolDay]) -> dict[str, list[float]]:
    """Every pool's days added up as uPlot's columns: x in Unix seconds (midnight UTC), the rest in dollars."""
    return {"x": [datetime(d.day.year, d.day.month, d.day.day, tzinfo=UTC).timestamp() for d in days],
            "cost": [d.cost_micros / 1_000_000 for d in days],
            "credits": [d.credits_micros / 1_000_000 for d in days],
            "margin": [d.margin_micros / 1_000_000 for d in days]}


@router.get("/operator/pools", response_class=HTMLResponse)
def operator_pools(request: Request, user: PageUser, session: DbSession, ctx: Ctx, runtime: Runtime,
                   catalogue: CurrentCatalogue) -> Response:
    require_admin(user)
    executor = runtime.executor
    pools = pool_service.pools_of(executor)
    views = pool_service.overview(session, pools=pools, capacity=executor.capacity() if len(pools) else {},
                                  executor_name=ctx.settings.executor, catalogue=catalogue)
    days = pool_service.per_day_totals(views)
    total = pool_service.add_days(days[-1].day, days) if days else None
    return render(request, "operator_pools.html", {
        "views": views, "days": list(reversed(days)), "total": total, "chart": chart(days),
        "nodes_up": sum(v.nodes_up for v in views), "max_nodes": sum(v.pool.max_nodes for v in views),
        "source": pools.source, "note": None if views else pool_service.not_configured(ctx.settings.pools,
                                                                                      ctx.settings.executor),
        "start_text": start_text, "node_hours": node_hours,
    }, user=user, active="gpus")
