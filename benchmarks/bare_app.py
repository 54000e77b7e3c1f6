"""The baseline for benchmarks/webhook_ingest.py: a bare FastAPI app with the training-metrics webhook path that
parses the JSON body into pydantic models (the same two-step parse Lanner does: the envelope, then the
``epoch_end`` data) and stores nothing. No auth, no database.

Served like ``lanner serve`` serves Lanner: one uvicorn process, log_level warning, no access log.

    .venv/bin/python benchmarks/bare_app.py --port 8766
"""

from __future__ import annotations

import argparse
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field


class MetricsEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    event: Literal["training_started", "training_progress", "epoch_end", "system_metrics", "console_output",
                   "checkpoint_saved", "training_complete", "training_failed"]
    data: dict[str, Any] = Field(default_factory=dict)
    modelId: str | None = None
    project: str | None = None
    name: str | None = None


class EpochEndData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    epoch: int = Field(ge=0)
    metrics: dict[str, Any] = Field(default_factory=dict)
    system: dict[str, Any] | None = None
    fitness: float | None = None
    best_fitness: float | None = None


app = FastAPI(title="bare webhook baseline")


@app.get("/api/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


# An async handler, like Lanner's (which hands the event to its writer thread and awaits the commit): no
# threadpool hop on either side, so the difference measured is the work.
@app.post("/api/webhooks/training/metrics")
async def training_metrics(body: MetricsEvent) -> dict[str, Any]:
    if body.event == "epoch_end":
        EpochEndData.model_validate(body.data)
    return {"received": True, "event": body.event, "modelId": body.modelId}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
