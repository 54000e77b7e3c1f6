"""Wire shapes of the assistant's settings: every number bounded (``tests/test_bounds.py``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_LABELS = 1_000_000
MAX_EPOCHS = 1000
MIN_IMGSZ, MAX_IMGSZ = 32, 2048


class AssistantUpdate(BaseModel):
    """Fields left out keep their value."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    minLabels: Annotated[int, Field(ge=1, le=MAX_LABELS)] | None = Field(
        default=None, description="labelled images before the first round (default 20)")
    every: Annotated[int, Field(ge=1, le=MAX_LABELS)] | None = Field(
        default=None, description="new labelled images that start the next round (default 25)")
    gpuType: str | None = Field(default=None, min_length=1, max_length=64,
                                description="the GPU type rounds train on, as training.start takes it (cpu, ...)")
    epochs: Annotated[int, Field(ge=1, le=MAX_EPOCHS)] | None = None
    imgsz: Annotated[int, Field(ge=MIN_IMGSZ, le=MAX_IMGSZ)] | None = None
