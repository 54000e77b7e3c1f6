"""Request bodies of the review API and the worker's chunk (the auto-annotation worker's, with confidences)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ScoresCreate(BaseModel):
    """``{modelId?}``: without one, the model the embeddings would pick."""

    model_config = ConfigDict(extra="ignore")

    modelId: str | None = Field(default=None, max_length=300)


class NextBody(BaseModel):
    """``restart``: begin a new pass (every scored image unreviewed again)."""

    restart: bool = False


class ChunkResult(BaseModel):
    key: str = Field(max_length=16)
    labels: list[dict[str, Any]] = Field(default_factory=list, max_length=3000)
    confidences: list[float] = Field(default_factory=list, max_length=3000)
    partial: bool = False


class Chunk(BaseModel):
    results: list[ChunkResult] = Field(max_length=500)
