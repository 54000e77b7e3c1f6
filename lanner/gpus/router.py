"""``GET /api/gpus``: the GPU catalogue (a Lanner extension; the hosted platform has no such endpoint)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from lanner.accounts.dependencies import CurrentPrincipal
from lanner.deps import Ctx
from lanner.gpus.catalogue import Catalogue, get_catalogue
from lanner.gpus.schemas import GpuList

router = APIRouter(tags=["gpus"])


async def catalogue_dependency(ctx: Ctx) -> Catalogue:
    """A dependency (not a direct call) so tests and other routers can override or share it; async: no I/O."""
    return get_catalogue(ctx)


CurrentCatalogue = Annotated[Catalogue, Depends(catalogue_dependency)]


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
