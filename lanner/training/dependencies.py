"""The training runtime for training's routes (built and started by ``create_app``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from lanner.training.runtime import TrainingRuntime


async def get_runtime(request: Request) -> TrainingRuntime:
    return request.app.state.training


Runtime = Annotated[TrainingRuntime, Depends(get_runtime)]
