"""Where and at what cost to train (Lanner extensions): ``GET /api/gpus`` (the catalogue) and
``POST /api/training/estimate``. HTTP only: the logic is ``training/estimates.py``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.gpus.schemas import GpuList
from lanner.http.deps import DbSession
from lanner.training import estimates
from lanner.training.capacity import add_availability, availability, recommend_here, runnable_types
from lanner.training.dependencies import CurrentCatalogue, Runtime
from lanner.training.schemas import EstimateRequest

router = APIRouter(tags=["gpus"])


@router.get(
    "/api/gpus",
    response_model=GpuList,
    summary="List GPU types (Lanner extension)",
    description=(
        "Every GPU type `training.start` accepts, plus `cpu`, with specs, price per hour (USD) and the lowest "
        "account tier that may use it. `offered` says whether this server offers the type at all; `allowed` "
        "says whether the caller's tier may start training on it. Operators change prices, tiers and the "
        "offered list with `LANNER_GPU_CATALOGUE`. Not part of the Ultralytics Platform API."
    ),
)
def list_gpus(principal: CurrentPrincipal, catalogue: CurrentCatalogue) -> GpuList:
    return GpuList.from_catalogue(catalogue, tier=principal.tier)


@router.post("/api/training/estimate", summary="Estimate time, memory and cost on every GPU type (Lanner)",
             description="Before launch: per GPU type the batch used (AutoBatch resolved), whether it fits, peak "
                         "memory, the largest batch that fits, epoch and total time and cost as value/low/high "
                         "ranges from the calibration residuals, whether the run is loader-bound, whether it is on "
                         "the time/cost Pareto front (`pareto`), each type's availability and start-up time, and a "
                         "cheapest / fastest / balanced recommendation under an optional deadline and budget among "
                         "the types this server can run, ranked by training plus start-up (`doneInSeconds`).")
def estimate(body: EstimateRequest, principal: CurrentPrincipal, session: DbSession, catalogue: CurrentCatalogue,
             runtime: Runtime) -> dict[str, Any]:
    result = estimates.estimate(session, principal, body, catalogue=catalogue)
    found = availability(session, runtime.executor, catalogue)
    for item in result["estimates"]:  # free now, on demand (with its start-up time), queued, or not offered
        add_availability(item, found.get(item["gpuType"]))
    recommend_here(result, runnable_types(runtime.executor, found), deadline_minutes=body.deadlineMinutes,
                   budget_cents=body.budgetCents)
    return result
