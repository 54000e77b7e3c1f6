"""What training's routes depend on: the training runtime (built and started by ``create_app``) and the
server's GPU catalogue."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from lanner.gpus.catalogue import Catalogue, get_catalogue
from lanner.http.deps import Ctx
from lanner.training.runtime import TrainingRuntime


def runtime_of(request: Request) -> TrainingRuntime:
    return request.app.state.training


async def get_runtime(request: Request) -> TrainingRuntime:
    return runtime_of(request)


Runtime = Annotated[TrainingRuntime, Depends(get_runtime)]


async def catalogue_dependency(ctx: Ctx) -> Catalogue:
    """A dependency (not a direct call) so tests can override it for every route at once; async: no I/O."""
    return get_catalogue(ctx.settings)


CurrentCatalogue = Annotated[Catalogue, Depends(catalogue_dependency)]
